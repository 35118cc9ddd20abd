package gateway

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// borrower moves stock into a user's empty bucket from a sibling bucket of
// the same SKU (redisstore.MoveStock), so that no unit stays unsold behind
// an empty bucket while buyers are refused. A SKU found empty in every
// bucket is remembered for hold, so that a sold-out sale costs one script
// per request, not one per bucket.
type borrower struct {
	redis *redisstore.Store
	hold  time.Duration
	max   int
	moved *prometheus.CounterVec
	next  atomic.Uint64 // rotates the first sibling asked

	mu      sync.Mutex
	soldOut map[int64]time.Time // sku -> when every bucket was seen empty
}

// borrow moves units from the first sibling of dst that has any and returns
// how many moved: 0 when every sibling is empty, -1 when the SKU was held
// as sold out less than hold ago (nothing asked).
func (b *borrower) borrow(ctx context.Context, dst redisstore.Slot, buckets int, now time.Time) (int64, error) {
	if buckets <= 1 || dst.Bucket < 0 {
		return 0, nil
	}
	b.mu.Lock()
	at, seen := b.soldOut[dst.SKUID]
	b.mu.Unlock()
	if seen && now.Sub(at) < b.hold {
		return -1, nil
	}
	start := int(b.next.Add(1) % uint64(buckets))
	for i := 0; i < buckets; i++ {
		src := (start + i) % buckets
		if src == dst.Bucket {
			continue
		}
		n, err := b.redis.MoveStock(ctx, redisstore.BucketSlot(dst.ActivityID, dst.SKUID, src), dst, b.max, now)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			b.moved.WithLabelValues(strconv.FormatInt(dst.SKUID, 10)).Add(float64(n))
			return n, nil
		}
	}
	return 0, nil
}

// allGone reports whether no bucket of dst's SKU has a unit available or in
// transit (an error counts as "not known to be gone": no hold).
func (b *borrower) allGone(ctx context.Context, dst redisstore.Slot, buckets int) bool {
	var total redisstore.Counters
	for _, sl := range redisstore.Slots(dst.ActivityID, dst.SKUID, buckets) {
		c, err := b.redis.ReadCounters(ctx, sl)
		if err != nil {
			return false
		}
		total = total.Add(c)
	}
	return total.Available == 0 && total.InTransit() == 0
}

// soldOutAt holds sku as sold out: every bucket was found empty at now.
func (b *borrower) soldOutAt(sku int64, now time.Time) {
	b.mu.Lock()
	b.soldOut[sku] = now
	b.mu.Unlock()
}

// SettleMoves finishes, every interval, the stock moves a gateway left in
// transit when it crashed between their two halves (any gateway may finish
// any move: each is applied once, by id). It returns when ctx ends.
func (s *Server) SettleMoves(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for sku, n := range s.cfg.SKUs {
			if n <= 1 {
				continue
			}
			done, err := s.redis.Settle(ctx, redisstore.Slots(s.cfg.ActivityID, sku, n), every, s.now())
			if err != nil && ctx.Err() == nil {
				s.log.Error("settling stock moves", "sku", sku, "error", err)
			}
			if done > 0 {
				s.log.Warn("settled stock moves left in transit", "sku", sku, "moves", done)
			}
		}
	}
}
