package redisstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// BenchmarkReserve measures the reserve script through the Go client, every
// call a new buyer, from parallel goroutines. hack/bench-reserve.sh prints it
// next to redis-benchmark running the same script (the ceiling).
func BenchmarkReserve(b *testing.B) {
	c := testenv.RedisSingle(b)
	ctx := context.Background()
	if err := redisstore.LoadScripts(ctx, c); err != nil {
		b.Fatal(err)
	}
	s := redisstore.New(c)
	ring, _ := ids.NewKeyring(1, map[byte][]byte{1: []byte("bench-key-bench-key-bench-key-bench")})
	slot := redisstore.SKUSlot(time.Now().UnixNano()%1_000_000_000, 1)
	if _, _, err := s.Provision(ctx, slot, 1_000_000_000, 1); err != nil {
		b.Fatal(err)
	}
	if err := s.SetWindow(ctx, slot, redisstore.WindowActive); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// Leave no million-key residue: the bench keys are dropped by tag.
		iter := c.Scan(ctx, 0, "seckill:"+slot.Tag()+":*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	var user atomic.Int64
	now := time.Now()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := user.Add(1)
			req := uuid.New()
			rid := ring.ReservationID(ids.ReservationKey{ActivityID: slot.ActivityID, SKUID: slot.SKUID, UserID: u, RequestID: req})
			mid, _ := ring.MessageID(rid, 1)
			res, err := s.Reserve(ctx, redisstore.ReserveRequest{Slot: slot, ReservationID: rid, MessageID: mid, RequestID: req,
				UserID: u, Now: now, BusinessDeadline: now.Add(time.Minute), SendDue: now.Add(5 * time.Second),
				RequestTTL: time.Minute, SchemaVersion: 1, KeyVersion: 1})
			if err != nil || res.Code != redisstore.ReserveOK {
				b.Errorf("reserve: %v %v", res, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reserves/s")
}
