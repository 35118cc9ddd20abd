// Package pipeline runs the workers of the order pipeline as loops, one
// file each: the order consumer (consumer.go: RocketMQ → PostgreSQL), the
// outbox relay (relay.go: PostgreSQL → RocketMQ), the projector
// (projector.go: order events → Redis), the compensator (compensator.go:
// rejections → Redis), the send scanner (scanner.go: Redis → RocketMQ) and
// the canceller (canceller.go: timeout-cancel timers). This file holds what
// they share: the receive loops, the drain at shutdown, the quarantine.
// Each loop stops when its context ends.
package pipeline

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/inbox"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
)

// quarantine keeps a message the worker refuses with its evidence
// (inbox.Quarantine) and then acknowledges it: out of the retry loop,
// not a success — never dropped. When the evidence cannot be written the
// message comes back in 5 s instead. It reports whether it was quarantined.
func quarantine(ctx context.Context, c *mq.Consumer, pool *pgxpool.Pool, q inbox.Quarantined, d mq.Delivery, log *slog.Logger) bool {
	q.Topic, q.BrokerMessageID, q.Payload = d.Topic, d.BrokerID, d.Body
	if err := inbox.Quarantine(ctx, pool, q); err != nil {
		log.Error("quarantine failed; message left for redelivery", append([]any{"broker_message_id", d.BrokerID}, logs.Err(err)...)...)
		retryLater(c, d, 5*time.Second, log)
		return false
	}
	log.Warn("message quarantined", "broker_message_id", d.BrokerID, "reason", q.Reason, "detail", q.Detail)
	ackDone(ctx, c, d, log) // a redelivery is quarantined again, kept once
	return true
}

// retryLater makes d visible again after delay. A retry the broker did not
// take only leaves d to come back when its invisibility ends: logged, not
// returned.
func retryLater(c *mq.Consumer, d mq.Delivery, delay time.Duration, log *slog.Logger) {
	if err := c.Retry(d, delay); err != nil {
		log.Warn("retry not scheduled; the message comes back after its invisibility", append([]any{"broker_message_id", d.BrokerID}, logs.Err(err)...)...)
	}
}

// ackDone acknowledges d once its effect is committed. A lost ack is a
// redelivery the worker's inbox (or its idempotent step) answers: logged,
// not returned.
func ackDone(ctx context.Context, c *mq.Consumer, d mq.Delivery, log *slog.Logger) {
	if err := c.Ack(ctx, d); err != nil {
		log.Warn("ack failed; the redelivery is answered again", append([]any{"broker_message_id", d.BrokerID}, logs.Err(err)...)...)
	}
}

// acker acknowledges deliveries in the background, after their effects
// are committed, without holding up the next batch (a round trip of ~1 ms
// each); wait returns when the ones in flight are done. At most
// maxAcksInFlight are outstanding.
type acker struct {
	c    *mq.Consumer
	log  *slog.Logger
	wg   sync.WaitGroup
	slot chan struct{}
}

// maxAcksInFlight bounds the acknowledgements a worker has outstanding.
const maxAcksInFlight = 32

// ackTimeout bounds one acknowledgement, so a broker gone at shutdown
// cannot hold a worker: an ack lost is a redelivery the inbox answers.
const ackTimeout = 2 * time.Second

func newAcker(c *mq.Consumer, log *slog.Logger) *acker {
	return &acker{c: c, log: log, slot: make(chan struct{}, maxAcksInFlight)}
}

// ack acknowledges d in the background (ackDone, bounded by ackTimeout).
func (a *acker) ack(ctx context.Context, d mq.Delivery) {
	a.slot <- struct{}{}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() { <-a.slot }()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		defer cancel()
		ackDone(actx, a.c, d, a.log)
	}()
}

// wait returns when every acknowledgement sent so far is answered.
func (a *acker) wait() { a.wg.Wait() }

// idle waits between empty polls, returning false when ctx is done.
func idle(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// receiveLoop is the consumers' loop: receive a batch, handle each delivery
// (handle acknowledges, retries or quarantines it), until ctx ends.
func receiveLoop(ctx context.Context, c *mq.Consumer, invisible time.Duration, health *metrics.Health, log *slog.Logger,
	handle func(context.Context, mq.Delivery)) {
	receiveBatches(ctx, c, invisible, health, log, func(work context.Context, ds []mq.Delivery) {
		for i, d := range ds {
			if work.Err() != nil {
				handBack(c, ds[i:], log)
				return
			}
			handle(work, d)
		}
	})
}

// receiveBatches receives up to 16 deliveries at a time and hands each
// batch to handle, until ctx ends. The next batch is received while one is
// handled (one receive in flight), so the broker round trip overlaps the
// database's. A batch received before shutdown is finished, not abandoned:
// handle gets a context that outlives ctx by drainGrace, and hands back
// (handBack) what it cannot finish in time; a batch received but not yet
// started at shutdown is handed back at once. Either is then redelivered
// within a second instead of waiting out its invisibility on a consumer
// that is gone.
func receiveBatches(ctx context.Context, c *mq.Consumer, invisible time.Duration, health *metrics.Health, log *slog.Logger,
	handle func(context.Context, []mq.Delivery)) {
	health.Ready()
	batches := make(chan []mq.Delivery)
	go func() {
		defer close(batches)
		for ctx.Err() == nil {
			health.Beat()
			ds, err := c.Receive(ctx, 16, invisible)
			if err != nil {
				log.Warn("receive failed", logs.Err(err)...)
				idle(ctx, time.Second)
				continue
			}
			if len(ds) == 0 {
				continue
			}
			select {
			case batches <- ds:
			case <-ctx.Done():
				handBack(c, ds, log)
			}
		}
	}()
	for ds := range batches {
		if ctx.Err() != nil {
			handBack(c, ds, log)
			continue
		}
		work, done := drainContext(ctx, drainGrace)
		handle(work, ds)
		done()
	}
}

// drainGrace bounds how long a received batch may still be worked on after
// shutdown began (the pods' termination grace is 30 s).
var drainGrace = 10 * time.Second

// drainContext is a context that ends grace after ctx ends (or when the
// returned cancel is called). Nothing runs for it until ctx ends.
func drainContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var t *time.Timer
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		t = time.AfterFunc(grace, cancel)
	})
	return work, func() {
		stop()
		mu.Lock()
		if t != nil {
			t.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// handBack makes unhandled deliveries visible again within a second.
func handBack(c *mq.Consumer, ds []mq.Delivery, log *slog.Logger) {
	for _, d := range ds {
		if err := c.Retry(d, time.Second); err != nil {
			log.Warn("handing back a delivery at shutdown failed; it is redelivered after its invisibility", append([]any{logs.MessageID, d.MessageID}, logs.Err(err)...)...)
		}
	}
	log.Info("shutdown: handed deliveries back to the broker", "count", len(ds))
}
