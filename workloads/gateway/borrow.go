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
// the same SKU (redisstore.MoveStockAndReserve: the move sells the mover
// its unit), so that no unit stays unsold behind an empty bucket while
// buyers are refused. A SKU found empty in every
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
	// recheck: sku -> when one request began to look again after the hold
	// ran out. Until it reports (soldOutAt, or a move) the others keep the
	// hold, for at most one more hold: a busy sold-out SKU is looked at by
	// one request at a time, not by every request in flight.
	recheck map[int64]time.Time
}

// borrow moves units from the first sibling of r's bucket that has any and
// reserves r with them in the same transaction (MoveStockAndReserve): it
// returns how many moved and the reservation's result. moved is 0 when
// every sibling is empty, -1 when the SKU was held as sold out less than
// hold ago (nothing asked); in both cases nothing was reserved.
func (b *borrower) borrow(ctx context.Context, r redisstore.ReserveRequest, buckets int, now time.Time) (int64, redisstore.ReserveResult, error) {
	dst := r.Slot
	if buckets <= 1 || dst.Bucket < 0 {
		return 0, redisstore.ReserveResult{}, nil
	}
	if b.held(dst.SKUID, now) {
		return -1, redisstore.ReserveResult{}, nil
	}
	start := int(b.next.Add(1) % uint64(buckets))
	for i := 0; i < buckets; i++ {
		src := (start + i) % buckets
		if src == dst.Bucket {
			continue
		}
		n, res, err := b.redis.MoveStockAndReserve(ctx, redisstore.BucketSlot(dst.ActivityID, dst.SKUID, src), b.max, now, r)
		if n > 0 {
			b.mu.Lock()
			delete(b.soldOut, dst.SKUID) // not sold out: units moved
			delete(b.recheck, dst.SKUID)
			b.mu.Unlock()
			b.moved.WithLabelValues(strconv.FormatInt(dst.SKUID, 10)).Add(float64(n))
		}
		if err != nil || n > 0 {
			return n, res, err
		}
	}
	return 0, redisstore.ReserveResult{}, nil
}

// held reports whether sku is held as sold out at now: seen empty in every
// bucket less than hold ago, or another request is looking again.
func (b *borrower) held(sku int64, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, seen := b.soldOut[sku]
	if !seen {
		return false
	}
	if now.Sub(at) < b.hold {
		return true
	}
	if r, ok := b.recheck[sku]; ok && now.Sub(r) < b.hold {
		return true
	}
	b.recheck[sku] = now // this request looks again
	return false
}

// stockLeft is what a look at every bucket of a SKU found.
type stockLeft int

const (
	stockGone    stockLeft = iota // no unit available or in transit anywhere
	stockSome                     // units available in some bucket, or in transit (a move half done)
	stockUnknown                  // the counters could not be read
)

// look reads every bucket of dst's SKU in one round trip. Units found
// end any hold of the SKU.
func (b *borrower) look(ctx context.Context, dst redisstore.Slot, buckets int) stockLeft {
	cs, err := b.redis.ReadCountersOf(ctx, redisstore.Slots(dst.ActivityID, dst.SKUID, buckets))
	if err != nil {
		return stockUnknown
	}
	var total redisstore.Counters
	for _, c := range cs {
		total = total.Add(c)
	}
	if total.Available == 0 && total.InTransit() == 0 {
		return stockGone
	}
	b.mu.Lock()
	delete(b.soldOut, dst.SKUID) // units are left: no hold, nobody rechecking
	delete(b.recheck, dst.SKUID)
	b.mu.Unlock()
	return stockSome
}

// soldOutAt holds sku as sold out: every bucket was found empty at now.
func (b *borrower) soldOutAt(sku int64, now time.Time) {
	b.mu.Lock()
	b.soldOut[sku] = now
	delete(b.recheck, sku)
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
