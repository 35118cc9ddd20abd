package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// batcher runs concurrent calls of one script together. Each of its lanes
// takes the first waiting call and every call already queued behind it (at
// most max) and sends them to Redis in one pipeline: one write and one read
// for the batch instead of one of each per call, on both sides of the
// connection. Nothing waits for a batch to fill — a call alone goes at once;
// a batch is what arrived while the lanes were busy — so a quiet process
// answers as fast as with one call and a busy one makes fewer system calls.
//
// Each call's script runs on its own and atomically, exactly as a single
// call runs it. A pipeline that fails (the connection lost half-way) leaves
// each of its calls unknown, as a failed single call does: the caller
// retries with the same ids and the script answers with the same outcome.
type batcher[Req, Res any] struct {
	s      *Store
	script *redis.Script
	args   func(Req) (keys []string, args []any)
	parse  func(v any, err error) (Res, error)
	calls  chan *batchCall[Req, Res]
	max    int
	closed chan struct{}
	once   sync.Once
	lanes  sync.WaitGroup
	sent   atomic.Int64 // round trips (batches) sent
	ran    atomic.Int64 // calls sent in them
}

type batchCall[Req, Res any] struct {
	r    Req
	res  Res
	err  error
	done chan struct{}
}

func newBatcher[Req, Res any](s *Store, script *redis.Script, args func(Req) ([]string, []any), parse func(any, error) (Res, error), lanes, size int) *batcher[Req, Res] {
	b := &batcher[Req, Res]{s: s, script: script, args: args, parse: parse,
		calls: make(chan *batchCall[Req, Res]), max: max(1, size), closed: make(chan struct{})}
	for range max(1, lanes) {
		b.lanes.Add(1)
		go b.lane()
	}
	return b
}

// single runs one call alone (Run loads the script when Redis lost it).
func (b *batcher[Req, Res]) single(ctx context.Context, r Req) (Res, error) {
	keys, args := b.args(r)
	return b.parse(b.script.Run(ctx, b.s.c, keys, args...).Result())
}

// do runs r in the next batch. A caller that gives up (ctx done) after its
// call was taken gets an unknown outcome: the script may still run. After
// close it runs the script itself.
func (b *batcher[Req, Res]) do(ctx context.Context, r Req) (Res, error) {
	c := &batchCall[Req, Res]{r: r, done: make(chan struct{})}
	var zero Res
	select {
	case b.calls <- c:
	case <-b.closed:
		return b.single(ctx, r)
	case <-ctx.Done():
		return zero, fmt.Errorf("not sent: %w", ctx.Err())
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return zero, fmt.Errorf("sent, outcome unknown: %w", ctx.Err())
	}
}

func (b *batcher[Req, Res]) stats() (roundTrips, calls int64) { return b.sent.Load(), b.ran.Load() }

func (b *batcher[Req, Res]) close() {
	b.once.Do(func() { close(b.closed) })
	b.lanes.Wait()
}

func (b *batcher[Req, Res]) lane() {
	defer b.lanes.Done()
	batch := make([]*batchCall[Req, Res], 0, b.max)
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
func (b *batcher[Req, Res]) run(batch []*batchCall[Req, Res]) {
	ctx := context.Background()
	b.sent.Add(1)
	b.ran.Add(int64(len(batch)))
	if len(batch) == 1 {
		c := batch[0]
		c.res, c.err = b.single(ctx, c.r)
		close(c.done)
		return
	}
	calls := make([]scriptCall, len(batch))
	for i, c := range batch {
		keys, args := b.args(c.r)
		calls[i] = scriptCall{b.script, keys, args}
	}
	vals, errs := b.s.evalPipelined(ctx, calls)
	for i, c := range batch {
		c.res, c.err = b.parse(vals[i], errs[i])
		close(c.done)
	}
}

// scriptCall is one script call for evalPipelined.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// evalPipelined sends calls in one pipeline, in order — one write and one
// read for all of them — and answers each call's reply and error. A call
// the server answers NOSCRIPT (it lost its scripts: a restart, a
// failover) did not run; it runs alone, loading its script. Each script
// runs atomically on its own, as a single call does.
func (s *Store) evalPipelined(ctx context.Context, calls []scriptCall) ([]any, []error) {
	vals, errs := make([]any, len(calls)), make([]error, len(calls))
	cmds := make([]*redis.Cmd, len(calls))
	// Each command's own error is read below; Pipelined's is the first of them.
	_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = c.script.EvalSha(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	for i, c := range calls {
		vals[i], errs[i] = cmds[i].Result()
		if errs[i] != nil && redis.HasErrorPrefix(errs[i], "NOSCRIPT") {
			vals[i], errs[i] = c.script.Run(ctx, s.c, c.keys, c.args...).Result()
		}
	}
	return vals, errs
}

// ReserveBatcher runs concurrent reservations (reserve.lua) together, as
// batcher describes.
type ReserveBatcher struct {
	b *batcher[ReserveRequest, ReserveResult]
}

// NewReserveBatcher starts lanes pipelines' worth of senders (at least 1),
// each sending at most size calls at a time (at least 1).
func NewReserveBatcher(s *Store, lanes, size int) *ReserveBatcher {
	return &ReserveBatcher{newBatcher(s, scriptReserve, reserveArgs, reserveResult, lanes, size)}
}

// Reserve runs reserve.lua for r in the next batch, with Reserve's outcome.
func (b *ReserveBatcher) Reserve(ctx context.Context, r ReserveRequest) (ReserveResult, error) {
	return b.b.do(ctx, r)
}

// Stats reports the round trips sent so far and the calls they carried.
func (b *ReserveBatcher) Stats() (roundTrips, calls int64) { return b.b.stats() }

// Close stops the lanes after the batches they hold; later calls run alone.
func (b *ReserveBatcher) Close() { b.b.close() }

// SendAck is one successful send to record (AckSend's arguments).
type SendAck struct {
	Slot          Slot
	ReservationID uuid.UUID
	Owned         int64
	Now           time.Time
	// ResendAfter > 0 keeps the entry to verify the delivery (Store.AckSend).
	ResendAfter time.Duration
}

// AckBatcher records successful sends (send_ack.lua) together, as batcher
// describes: a gateway sending many reservations' messages marks them sent
// in a few round trips.
type AckBatcher struct{ b *batcher[SendAck, Result] }

// NewAckBatcher is NewReserveBatcher for send acknowledgements.
func NewAckBatcher(s *Store, lanes, size int) *AckBatcher {
	return &AckBatcher{newBatcher(s, scriptSendAck, sendAckArgs, sendAckResult, lanes, size)}
}

// AckSend runs send_ack.lua for a in the next batch, with Store.AckSend's outcome.
func (b *AckBatcher) AckSend(ctx context.Context, a SendAck) (Result, error) { return b.b.do(ctx, a) }

// Stats reports the round trips sent so far and the calls they carried.
func (b *AckBatcher) Stats() (roundTrips, calls int64) { return b.b.stats() }

// Close stops the lanes after the batches they hold; later calls run alone.
func (b *AckBatcher) Close() { b.b.close() }
