package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestKeyLayout(t *testing.T) {
	id := uuid.MustParse("019c8d22-7700-72af-a910-a2a167416d6c")
	req := uuid.MustParse("019c8d22-7600-7fa6-9307-6126afbc703b")
	for _, tc := range []struct {
		slot Slot
		tag  string
	}{
		{SKUSlot(1001, 90001), "{1001:90001}"},
		{BucketSlot(1001, 90001, 3), "{1001:90001:3}"},
	} {
		s := tc.slot
		require.Equal(t, "seckill:"+tc.tag+":stock", s.Stock())
		require.Equal(t, "seckill:"+tc.tag+":window", s.Window())
		require.Equal(t, "seckill:"+tc.tag+":counter", s.Counter())
		require.Equal(t, "seckill:"+tc.tag+":send_due", s.SendDue())
		require.Equal(t, "seckill:"+tc.tag+":reservation:"+id.String(), s.Reservation(id))
		require.Equal(t, "seckill:"+tc.tag+":request:80000001:"+req.String(), s.Request(80000001, req))
		require.Equal(t, "seckill:"+tc.tag+":user:80000001", s.User(80000001))
		require.Equal(t, "seckill:"+tc.tag+":comp:"+id.String(), s.Compensation(id))
		require.Equal(t, "seckill:"+tc.tag+":rate:80000001", s.Rate(80000001))
		require.Equal(t, "seckill:"+tc.tag+":open", s.Open())
		require.Equal(t, "seckill:"+tc.tag+":moves_in", s.MovesIn())
		require.Equal(t, "seckill:"+tc.tag+":moves_out", s.MovesOut())
		require.Equal(t, tc.tag, s.Tag())
	}
	require.Len(t, Slots(1, 2, 0), 1)
	require.Equal(t, []Slot{BucketSlot(1, 2, 0), BucketSlot(1, 2, 1)}, Slots(1, 2, 2))
}

func TestBucketForUsesEveryBucket(t *testing.T) {
	require.Equal(t, -1, BucketFor(7, 1))
	seen := map[int]int{}
	for u := int64(0); u < 4000; u += 2 { // even ids only
		b := BucketFor(u, 4)
		require.GreaterOrEqual(t, b, 0)
		require.Less(t, b, 4)
		seen[b]++
	}
	require.Len(t, seen, 4)
	for _, n := range seen {
		require.InDelta(t, 500, n, 100)
	}
}

// FuzzKeyLayout holds the keys built in one buffer to the layout written
// plainly (design.md#redis-keys), for any ids.
func FuzzKeyLayout(f *testing.F) {
	f.Add(int64(1001), int64(90001), 3, int64(80000001), []byte("0123456789abcdef"))
	f.Add(int64(-1), int64(0), -1, int64(-9223372036854775808), make([]byte, 16))
	f.Fuzz(func(t *testing.T, activity, sku int64, bucket int, user int64, raw []byte) {
		var u uuid.UUID
		copy(u[:], raw)
		s := Slot{ActivityID: activity, SKUID: sku, Bucket: max(-1, bucket)}
		tag := fmt.Sprintf("{%d:%d}", activity, sku)
		if s.Bucket >= 0 {
			tag = fmt.Sprintf("{%d:%d:%d}", activity, sku, s.Bucket)
		}
		want := func(parts ...any) string {
			k := "seckill:" + tag
			for _, p := range parts {
				k += fmt.Sprint(":", p)
			}
			return k
		}
		require.Equal(t, tag, s.Tag())
		require.Equal(t, want("stock"), s.Stock())
		require.Equal(t, want("reservation", u.String()), s.Reservation(u))
		require.Equal(t, want("request", user, u.String()), s.Request(user, u))
		require.Equal(t, want("user", user), s.User(user))
		require.Equal(t, want("rate", user), s.Rate(user))
		require.Equal(t, want("comp", u.String()), s.Compensation(u))
	})
}

// BenchmarkReserveArgs is what the gateway spends on a reservation's keys
// and arguments before the script runs.
func BenchmarkReserveArgs(b *testing.B) {
	now := time.UnixMilli(1782360000000)
	r := ReserveRequest{Slot: BucketSlot(1782360000123, 90001, 3), ReservationID: uuid.New(), MessageID: uuid.New(),
		RequestID: uuid.New(), UserID: 70001234, Now: now, BusinessDeadline: now.Add(time.Hour), SendDue: now.Add(5 * time.Second),
		RequestTTL: time.Hour, SchemaVersion: 1, KeyVersion: 1, UserLimit: 20, UserWindow: 10 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = reserveArgs(r)
	}
}
