package ids

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func testRing(t *testing.T, current byte) *Keyring {
	t.Helper()
	k, err := NewKeyring(current, map[byte][]byte{
		1: bytes.Repeat([]byte{0x11}, 32),
		2: bytes.Repeat([]byte{0x22}, 32),
	})
	require.NoError(t, err)
	return k
}

var req = ReservationKey{ActivityID: 1001, SKUID: 90001, UserID: 80000001,
	RequestID: uuid.MustParse("019c8d22-7600-7fa6-9307-6126afbc703b")}

func TestReservationIDDeterministic(t *testing.T) {
	k := testRing(t, 1)
	a, b := k.ReservationID(req), k.ReservationID(req)
	require.Equal(t, a, b)
	require.Equal(t, uuid.Version(8), a.Version())
	require.Equal(t, uuid.RFC4122, a.Variant())
	v, err := KeyVersion(a)
	require.NoError(t, err)
	require.Equal(t, byte(1), v)
}

func TestReservationIDChangesWithEveryField(t *testing.T) {
	k := testRing(t, 1)
	base := k.ReservationID(req)
	cases := map[string]ReservationKey{
		"activity": {ActivityID: 1002, SKUID: req.SKUID, UserID: req.UserID, RequestID: req.RequestID},
		"sku":      {ActivityID: req.ActivityID, SKUID: 90002, UserID: req.UserID, RequestID: req.RequestID},
		"user":     {ActivityID: req.ActivityID, SKUID: req.SKUID, UserID: 80000002, RequestID: req.RequestID},
		"request":  {ActivityID: req.ActivityID, SKUID: req.SKUID, UserID: req.UserID, RequestID: uuid.New()},
		// field boundaries are length-prefixed: 1001|90001 vs 10019|0001
		"boundary": {ActivityID: 10019, SKUID: 1, UserID: req.UserID, RequestID: req.RequestID},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, base, k.ReservationID(c))
		})
	}
}

func TestRotationKeepsExistingIDs(t *testing.T) {
	old := testRing(t, 1)
	rotated := testRing(t, 2)
	resOld := old.ReservationID(req)
	msgOld, err := old.MessageID(resOld, 1)
	require.NoError(t, err)

	// New requests get ids under the new key ...
	resNew := rotated.ReservationID(req)
	require.NotEqual(t, resOld, resNew)
	v, _ := KeyVersion(resNew)
	require.Equal(t, byte(2), v)

	// ... while an existing reservation re-derives exactly its old ids.
	again, err := rotated.ReservationIDWith(1, req)
	require.NoError(t, err)
	require.Equal(t, resOld, again)
	msgAgain, err := rotated.MessageID(resOld, 1)
	require.NoError(t, err)
	require.Equal(t, msgOld, msgAgain)
}

func TestMessageIDDependsOnSchemaAndReservation(t *testing.T) {
	k := testRing(t, 1)
	r := k.ReservationID(req)
	m1, err := k.MessageID(r, 1)
	require.NoError(t, err)
	m2, err := k.MessageID(r, 2)
	require.NoError(t, err)
	require.NotEqual(t, m1, m2)
	require.NotEqual(t, r, m1)
	e, err := k.EventID(r, "ORDER_CREATED", 1)
	require.NoError(t, err)
	require.NotEqual(t, m1, e)
}

func TestErrors(t *testing.T) {
	_, err := NewKeyring(1, map[byte][]byte{1: []byte("short")})
	require.Error(t, err)
	_, err = NewKeyring(3, map[byte][]byte{1: bytes.Repeat([]byte{1}, 32)})
	require.Error(t, err)
	_, err = NewKeyring(1, nil)
	require.Error(t, err)
	k := testRing(t, 1)
	_, err = k.MessageID(NewRandom(), 1) // a v7 id carries no key version
	require.Error(t, err)
	_, err = k.ReservationIDWith(9, req)
	require.Error(t, err)
}

func TestNewRandomIsV7(t *testing.T) {
	a, b := NewRandom(), NewRandom()
	require.Equal(t, uuid.Version(7), a.Version())
	require.NotEqual(t, a, b)
}

// TestDerivationIsPinned holds the derivation to known vectors: ids already
// stored in Redis, PostgreSQL and the broker must be derived again exactly
// (an optimisation of derive must not change a bit).
func TestDerivationIsPinned(t *testing.T) {
	k, err := NewKeyring(3, map[byte][]byte{3: []byte("0123456789abcdef0123456789abcdef")})
	require.NoError(t, err)
	rid := k.ReservationID(ReservationKey{ActivityID: 7, SKUID: 11, UserID: 42, RequestID: uuid.MustParse("3f1c2a4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b")})
	require.Equal(t, "035702b1-f74f-8ff2-b40b-d097e97265aa", rid.String())
	mid, err := k.MessageID(rid, 1)
	require.NoError(t, err)
	require.Equal(t, "0328d6c7-93a6-8f86-a842-e28af3ac1d3a", mid.String())
}

func BenchmarkReservationAndMessageID(b *testing.B) {
	k, err := NewKeyring(1, map[byte][]byte{1: []byte("0123456789abcdef0123456789abcdef")})
	require.NoError(b, err)
	key := ReservationKey{ActivityID: 7, SKUID: 11, UserID: 42, RequestID: uuid.New()}
	b.ReportAllocs()
	for b.Loop() {
		key.UserID++
		if _, err := k.MessageID(k.ReservationID(key), 1); err != nil {
			b.Fatal(err)
		}
	}
}
