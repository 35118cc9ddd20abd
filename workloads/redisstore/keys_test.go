package redisstore

import (
	"testing"

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
