package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestBreaker(t *testing.T) {
	b := &Breaker{Threshold: 3, Cooldown: time.Second}
	t0 := time.Unix(0, 0)
	for range 3 {
		require.True(t, b.Allow(t0))
		b.Record(false, t0)
	}
	require.False(t, b.Allow(t0.Add(500*time.Millisecond)), "open")
	require.True(t, b.Allow(t0.Add(2*time.Second)), "half-open trial")
	require.False(t, b.Allow(t0.Add(2*time.Second)), "one trial at a time")
	b.Record(true, t0.Add(2*time.Second))
	require.True(t, b.Allow(t0.Add(2*time.Second)), "closed after a success")
}

func TestVerifyToken(t *testing.T) {
	key := []byte("k")
	now := time.Unix(1_800_000_000, 0)
	u, err := VerifyToken(SignToken(42, key, now.Add(time.Minute)), key, now)
	require.NoError(t, err)
	require.Equal(t, int64(42), u)
	for _, tok := range []string{"", "a.b", "a.b.c", SignToken(42, key, now), SignToken(0, key, now.Add(time.Hour)),
		SignToken(42, []byte("other"), now.Add(time.Hour)), strings.Repeat("a", 5000)} {
		_, err := VerifyToken(tok, key, now)
		require.ErrorIs(t, err, ErrUnauthenticated, tok)
	}
}

func FuzzParseReservationRequest(f *testing.F) {
	f.Add([]byte(`{"request_id":"019c8d22-7600-7fa6-9307-6126afbc703b"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"request_id":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseReservationRequest(body)
		if err == nil {
			require.NotEqual(t, uuid.Nil, r.RequestID)
			require.LessOrEqual(t, len(body), MaxBodyBytes)
		}
	})
}

func FuzzVerifyToken(f *testing.F) {
	key := []byte("fuzz-key")
	f.Add(SignToken(1, key, time.Unix(2_000_000_000, 0)))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.")
	f.Fuzz(func(t *testing.T, tok string) {
		u, err := VerifyToken(tok, key, time.Unix(1_900_000_000, 0))
		if err == nil {
			require.Positive(t, u)
		}
	})
}
