package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// ReserveBatcher runs concurrent reservations together. Each of its lanes
// takes the first waiting call and every call already queued behind it (at
// most max) and sends them to Redis in one pipeline: one write and one read
// for the batch instead of one of each per call, on both sides of the
// connection. Nothing waits for a batch to fill — a call alone goes at once;
// a batch is what arrived while the lanes were busy — so a quiet gateway
// answers as fast as with Reserve and a busy one makes fewer system calls.
//
// Each call's script runs on its own and atomically, exactly as Reserve runs
// it. A pipeline that fails (the connection lost half-way) leaves each of its
// calls unknown, as a failed Reserve does: the caller retries with the same
// ids and the script answers with the same reservation.
type ReserveBatcher struct {
	s      *Store
	calls  chan *reserveCall
	max    int
	closed chan struct{}
	once   sync.Once
	lanes  sync.WaitGroup
	sent   atomic.Int64 // round trips (batches) sent
	ran    atomic.Int64 // calls sent in them
}

// Stats reports the round trips sent so far and the calls they carried.
func (b *ReserveBatcher) Stats() (roundTrips, calls int64) { return b.sent.Load(), b.ran.Load() }

type reserveCall struct {
	r    ReserveRequest
	res  ReserveResult
	err  error
	done chan struct{}
}

// NewReserveBatcher starts lanes pipelines' worth of senders (at least 1),
// each sending at most size calls at a time (at least 1).
func NewReserveBatcher(s *Store, lanes, size int) *ReserveBatcher {
	b := &ReserveBatcher{s: s, calls: make(chan *reserveCall), max: max(1, size), closed: make(chan struct{})}
	for range max(1, lanes) {
		b.lanes.Add(1)
		go b.lane()
	}
	return b
}

// Reserve runs reserve.lua for r in the next batch. A caller that gives up
// (ctx done) after its call was taken gets an unknown outcome: the script
// may still run. After Close it runs the script itself.
func (b *ReserveBatcher) Reserve(ctx context.Context, r ReserveRequest) (ReserveResult, error) {
	c := &reserveCall{r: r, done: make(chan struct{})}
	select {
	case b.calls <- c:
	case <-b.closed:
		return b.s.Reserve(ctx, r)
	case <-ctx.Done():
		return ReserveResult{}, fmt.Errorf("reserve not sent: %w", ctx.Err())
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return ReserveResult{}, fmt.Errorf("reserve sent, outcome unknown: %w", ctx.Err())
	}
}

// Close stops the lanes after the batches they hold; later calls run alone.
func (b *ReserveBatcher) Close() {
	b.once.Do(func() { close(b.closed) })
	b.lanes.Wait()
}

func (b *ReserveBatcher) lane() {
	defer b.lanes.Done()
	batch := make([]*reserveCall, 0, b.max)
	for {
		select {
		case c := <-b.calls:
			batch = append(batch[:0], c)
		case <-b.closed:
			return
		}
	more:
		for len(batch) < b.max {
			select {
			case c := <-b.calls:
				batch = append(batch, c)
			default:
				break more
			}
		}
		b.run(batch)
	}
}

// run sends one batch. Its context is not any caller's: a caller leaving
// must not cut the others' calls off half-way (go-redis' read timeout
// bounds it).
func (b *ReserveBatcher) run(batch []*reserveCall) {
	ctx := context.Background()
	b.sent.Add(1)
	b.ran.Add(int64(len(batch)))
	if len(batch) == 1 {
		c := batch[0]
		c.res, c.err = b.s.Reserve(ctx, c.r)
		close(c.done)
		return
	}
	cmds := make([]*redis.Cmd, len(batch))
	_, _ = b.s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range batch {
			keys, args := reserveArgs(c.r)
			cmds[i] = scriptReserve.EvalSha(ctx, p, keys, args...)
		}
		return nil
	})
	for i, c := range batch {
		v, err := cmds[i].Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// The server lost its scripts (restart, failover): nothing ran;
			// Reserve loads the script and runs the call.
			c.res, c.err = b.s.Reserve(ctx, c.r)
		} else {
			c.res, c.err = reserveResult(v, err)
		}
		close(c.done)
	}
}
