// Package pipeline runs the workers of the order pipeline as loops: the
// order consumer (RocketMQ → PostgreSQL), the outbox relay (PostgreSQL →
// RocketMQ), the projector (order events → Redis) and the compensator
// (rejections → Redis). Each loop stops when its context ends.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill-operator/workloads/cancel"
	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/lease"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/states"
)

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
				log.Warn("receive failed", "error", err)
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
			log.Warn("handing back a delivery at shutdown failed; it is redelivered after its invisibility", "message_id", d.MessageID, "error", err)
		}
	}
	log.Info("shutdown: handed deliveries back to the broker", "count", len(ds))
}

// OrderConsumer feeds order-create messages to the order transaction.
type OrderConsumer struct {
	MQ        *mq.Consumer
	Store     *orderstore.Consumer
	Invisible time.Duration
	Log       *slog.Logger
	// ID names this consumer in its heartbeat rows (empty: no heartbeats).
	ID         string
	ActivityID int64
	// HeartbeatEvery is how often the commit rate and latency are reported.
	HeartbeatEvery time.Duration
	// MaxAttempts is the group's delivery limit (retries + 1): a failure at
	// the last attempt sends the message to the DLQ and is counted.
	MaxAttempts int
	Metrics     *metrics.Consumer
	Health      *metrics.Health
	meter       orderstore.Meter
	// acks in flight: an acknowledgement is sent after the commit without
	// holding up the next message (a round trip of ~1 ms each, a quarter
	// of a message's time); Run waits for them before it returns.
	acks   sync.WaitGroup
	ackSem chan struct{}
}

// maxAcksInFlight bounds the acknowledgements a consumer has outstanding.
const maxAcksInFlight = 32

// ackTimeout bounds one acknowledgement, so a broker gone at shutdown
// cannot hold Run: an ack lost is a redelivery the inbox answers.
const ackTimeout = 2 * time.Second

// ack acknowledges d in the background, after its effect is committed.
func (c *OrderConsumer) ack(ctx context.Context, d mq.Delivery, messageID uuid.UUID) {
	c.ackSem <- struct{}{}
	c.acks.Add(1)
	go func() {
		defer c.acks.Done()
		defer func() { <-c.ackSem }()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		defer cancel()
		if err := c.MQ.Ack(actx, d); err != nil {
			c.Log.Warn("ack failed; the redelivery is answered by the inbox", "message_id", messageID, "error", err)
		}
	}()
}

// Run consumes until ctx ends.
func (c *OrderConsumer) Run(ctx context.Context) error {
	c.ackSem = make(chan struct{}, maxAcksInFlight)
	defer c.acks.Wait()
	if c.ID != "" {
		every := c.HeartbeatEvery
		if every <= 0 {
			every = 5 * time.Second
		}
		go c.heartbeats(ctx, every)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewConsumer(prometheus.NewRegistry(), c.Store.Group)
	}
	receiveBatches(ctx, c.MQ, c.Invisible, c.Health, c.Log, c.handleBatch)
	return nil
}

// handleBatch turns a received batch into orders in one transaction
// (orderstore.ConsumeBatch); a malformed message is quarantined first and
// never joins the batch.
func (c *OrderConsumer) handleBatch(ctx context.Context, ds []mq.Delivery) {
	items := make([]orderstore.Item, 0, len(ds))
	valid := make([]mq.Delivery, 0, len(ds))
	for _, d := range ds {
		msg, err := events.ParseOrderCreateRequested(d.Body)
		if err != nil {
			var ie *events.InvalidError
			reason := events.ReasonMalformed
			if errors.As(err, &ie) {
				reason = ie.Reason
			}
			c.quarantine(ctx, d, nil, reason, err.Error())
			continue
		}
		items = append(items, orderstore.Item{Msg: msg, Raw: d.Body})
		valid = append(valid, d)
	}
	if len(items) == 0 {
		return
	}
	t0 := time.Now()
	res := c.Store.ConsumeBatch(ctx, items)
	took := time.Since(t0)
	for i, r := range res {
		c.settle(ctx, valid[i], items[i].Msg, r.Outcome, r.Err, took)
	}
}

// settle acknowledges, retries or quarantines one delivery by its outcome.
func (c *OrderConsumer) settle(ctx context.Context, d mq.Delivery, msg events.OrderCreateRequested, out orderstore.Outcome, err error, took time.Duration) {
	if errors.Is(err, orderstore.ErrCommitUnknown) {
		c.Metrics.CommitUnknown.Inc()
	}
	switch out.Action {
	case orderstore.Ack:
		c.meter.Observe(took)
		c.count(out)
		c.ack(ctx, d, msg.MessageID)
	case orderstore.Manual:
		if errors.Is(err, orderstore.ErrPayloadConflict) {
			c.Metrics.PayloadConflict.Inc()
		}
		c.Metrics.Consumed.WithLabelValues(orderstore.ResultManualReview).Inc()
		c.quarantine(ctx, d, &msg.MessageID, "CONFLICT", err.Error())
	default: // Retry: nothing committed or unknown; never compensated here.
		c.Metrics.Consumed.WithLabelValues("RETRY").Inc()
		if c.MaxAttempts > 0 && d.Attempt >= c.MaxAttempts {
			// The broker moves it to %DLQ%<group>; "seckill dlq-replay" brings it back.
			c.Metrics.DeadLettered.Inc()
			c.Log.Error("last attempt failed; the message goes to the DLQ", "message_id", msg.MessageID,
				"reservation_id", msg.ReservationID, "attempt", d.Attempt, "dlq", "%DLQ%"+c.Store.Group, "error", err)
		} else {
			c.Log.Warn("order transaction not committed; redelivery", "message_id", msg.MessageID, "attempt", d.Attempt, "error", err)
		}
		_ = c.MQ.Retry(d, time.Second)
	}
}

// count records an acknowledged outcome in the design.md#metrics metrics.
func (c *OrderConsumer) count(out orderstore.Outcome) {
	if out.Redelivered {
		c.Metrics.Consumed.WithLabelValues(orderstore.ResultDuplicate).Inc()
		c.Metrics.Duplicates.Inc()
		return
	}
	c.Metrics.Consumed.WithLabelValues(out.Result).Inc()
	switch {
	case out.Result == orderstore.ResultDuplicate:
		c.Metrics.Duplicates.Inc()
	case out.Result == orderstore.ResultOrderRejected && out.Reason == orderstore.ReasonStockExhausted:
		c.Metrics.StockReject.Inc()
	case out.Result == orderstore.ResultOrderRejected && out.Reason == orderstore.ReasonAlreadyPurchased:
		c.Metrics.UserUnique.Inc()
	}
}

// heartbeats reports the measured commit rate and latency (design.md#backlog: the
// operator sizes the consumers from what PostgreSQL is seen to sustain).
func (c *OrderConsumer) heartbeats(ctx context.Context, every time.Duration) {
	c.meter.Take(time.Now())
	for idle(ctx, every) {
		h := c.meter.Take(time.Now())
		if err := orderstore.ReportHeartbeat(ctx, c.Store.Pool, c.ID, "order-consumer", c.ActivityID, h, 0); err != nil {
			c.Log.Warn("heartbeat not reported", "error", err)
		}
	}
}

// quarantine keeps the message with its evidence, then acknowledges it: it
// is out of the retry loop, not a success.
func (c *OrderConsumer) quarantine(ctx context.Context, d mq.Delivery, id *uuid.UUID, reason, detail string) {
	err := orderstore.Quarantine(ctx, c.Store.Pool, orderstore.Quarantined{Group: c.Store.Group, Topic: d.Topic,
		BrokerMessageID: d.BrokerID, MessageID: id, Reason: reason, Detail: detail, Payload: d.Body})
	if err != nil {
		c.Log.Error("quarantine failed; message left for redelivery", "broker_message_id", d.BrokerID, "error", err)
		_ = c.MQ.Retry(d, 5*time.Second)
		return
	}
	c.Metrics.Quarantined.WithLabelValues(reason).Inc()
	c.Log.Warn("message quarantined", "broker_message_id", d.BrokerID, "reason", reason, "detail", detail)
	_ = c.MQ.Ack(ctx, d)
}

// Relay sends outbox events.
type Relay struct {
	Store    *outbox.Store
	Producer *mq.Producer
	Batch    int
	// Parallel is how many events of a claimed batch are in flight to the
	// broker at once (default 16): one send after another made the relay
	// the bottleneck of a backlog (a broker outage at 1,000 orders/s left
	// ~35k events that took minutes to drain).
	Parallel int
	Log      *slog.Logger
	Metrics  *metrics.Relay
	Health   *metrics.Health
	// Failpoint, when set, is called at after_outbox_send_before_mark (the
	// batch sent, not yet marked SENT: design.md#faults's relay crash); the
	// failpoints build exits the process there.
	Failpoint func(name string) error
}

// Run relays until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	if r.Metrics == nil {
		r.Metrics = metrics.NewRelay(prometheus.NewRegistry())
	}
	r.Health.Ready()
	for ctx.Err() == nil {
		r.Health.Beat()
		evs, err := r.Store.Claim(ctx, r.Batch)
		if err != nil {
			r.Log.Warn("claim failed", "error", err)
			idle(ctx, time.Second)
			continue
		}
		if len(evs) == 0 {
			idle(ctx, 50*time.Millisecond)
			continue
		}
		r.relay(ctx, evs)
	}
	return nil
}

// relay sends a claimed batch, at most Parallel sends at a time, then marks
// the sent ones in one statement and each failed one for a retry. The
// events of one aggregate (one message key: an order's ORDER_CREATED, then
// its ORDER_PAID) go one after another in the order claimed, as before; only
// different aggregates overlap. A send whose outcome is unknown is retried
// with the same event id (the consumers' inbox makes the copies one).
func (r *Relay) relay(ctx context.Context, evs []outbox.Event) {
	parallel := r.Parallel
	if parallel < 1 {
		parallel = 16
	}
	var keys []string
	byKey := map[string][]int{}
	for i, e := range evs {
		if _, seen := byKey[e.MessageKey]; !seen {
			keys = append(keys, e.MessageKey)
		}
		byKey[e.MessageKey] = append(byKey[e.MessageKey], i)
	}
	errs := make([]error, len(evs))
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, k := range keys {
		slots <- struct{}{}
		wg.Add(1)
		go func(idx []int) {
			defer func() { <-slots; wg.Done() }()
			for n, i := range idx {
				if n > 0 && errs[idx[n-1]] != nil {
					errs[i] = fmt.Errorf("not sent: the aggregate's earlier event failed: %w", errs[idx[n-1]])
					continue
				}
				e := evs[i]
				m := mq.Message{Topic: e.Topic, MessageID: e.EventID.String(), Key: e.MessageKey, Tag: e.EventType, Body: e.Payload}
				if e.DeliverAt != nil {
					m.DeliverAt = *e.DeliverAt
				}
				sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_, errs[i] = r.Producer.Send(sctx, m)
				cancel()
			}
		}(byKey[k])
	}
	wg.Wait()
	if r.Failpoint != nil {
		if err := r.Failpoint("after_outbox_send_before_mark"); err != nil {
			return // the leases run out; the events are sent again
		}
	}
	var sent []uuid.UUID
	for i, e := range evs {
		if errs[i] == nil {
			sent = append(sent, e.EventID)
			continue
		}
		status, rerr := r.Store.MarkRetry(ctx, e.EventID, e.Attempt, errs[i])
		if rerr != nil {
			r.Log.Warn("retry not recorded", "event_id", e.EventID, "error", rerr)
			continue
		}
		r.Metrics.Sent.WithLabelValues(status).Inc()
		if status == string(states.OutboxManual) {
			r.Metrics.Manual.Inc()
			r.Log.Error("outbox event given up after the attempt cap; manual review", "event_id", e.EventID, "attempt", e.Attempt, "error", errs[i])
		}
	}
	r.Metrics.Sent.WithLabelValues(string(states.OutboxSent)).Add(float64(len(sent)))
	n, err := r.Store.MarkSentMany(ctx, sent)
	switch {
	case err != nil:
		r.Log.Warn("sent but not marked; they will be sent again", "events", len(sent), "error", err)
	case n < int64(len(sent)):
		r.Log.Warn("sent, but some leases were lost meanwhile; their new owner sends them again", "events", len(sent), "marked", n)
	}
}

// Projector applies order events to the Redis projection.
type Projector struct {
	MQ        *mq.Consumer
	Redis     *redisstore.Store
	Pool      *pgxpool.Pool
	Group     string
	Invisible time.Duration
	Log       *slog.Logger
	Metrics   *metrics.Projector
	Health    *metrics.Health
	// TerminalTTL is how long a released reservation stays (default 7 days).
	TerminalTTL time.Duration
}

func (p *Projector) terminalTTL() time.Duration {
	if p.TerminalTTL > 0 {
		return p.TerminalTTL
	}
	return 7 * 24 * time.Hour
}

// Run projects until ctx ends.
func (p *Projector) Run(ctx context.Context) error {
	if p.Metrics == nil {
		p.Metrics = metrics.NewProjector(prometheus.NewRegistry())
	}
	receiveLoop(ctx, p.MQ, p.Invisible, p.Health, p.Log, p.handle)
	return nil
}

func (p *Projector) handle(ctx context.Context, d mq.Delivery) {
	eventID, err := uuid.Parse(d.MessageID)
	var ev events.Event
	if err == nil {
		ev, err = events.ParseEvent(d.Body)
	}
	if err != nil {
		if qerr := orderstore.Quarantine(ctx, p.Pool, orderstore.Quarantined{Group: p.Group, Topic: d.Topic,
			BrokerMessageID: d.BrokerID, Reason: events.ReasonOf(err), Detail: "event refused: " + err.Error(), Payload: d.Body}); qerr != nil {
			_ = p.MQ.Retry(d, 5*time.Second)
			return
		}
		p.Metrics.Projected.WithLabelValues("QUARANTINED").Inc()
		_ = p.MQ.Ack(ctx, d)
		return
	}
	result := "IGNORED" // payments: for systems downstream
	switch e := ev.(type) {
	case events.OrderCreated:
		slot := redisstore.Slot{ActivityID: e.ActivityID, SKUID: e.SKUID, Bucket: e.Bucket}
		res, err := p.Redis.ProjectOrderCreated(ctx, slot, e.ReservationID, e.OrderID, time.Now())
		if err != nil {
			_ = p.MQ.Retry(d, time.Second)
			return
		}
		result = res.Reason
		if !res.OK() {
			// Missing or conflicting projection: the reconcile job rebuilds it
			// from PostgreSQL (design.md#auto-repair row 1); recorded, not retried forever.
			p.Log.Warn("projection refused", "reservation_id", e.ReservationID, "reason", res.Reason)
		}
	case events.CompensateRequired:
		// The refusal is shown (GET answers ORDER_REJECTED with its reason);
		// the compensator restores the stock.
		slot := redisstore.Slot{ActivityID: e.ActivityID, SKUID: e.SKUID, Bucket: e.Bucket}
		res, err := p.Redis.ProjectOrderRejected(ctx, slot, e.ReservationID, e.Reason, time.Now())
		if err != nil {
			_ = p.MQ.Retry(d, time.Second)
			return
		}
		result = res.Reason
		if !res.OK() && res.Code != -1 {
			// A lost hash is the compensator's and the reconcile job's;
			// a conflict is recorded, not retried forever.
			p.Log.Warn("rejection projection refused", "reservation_id", e.ReservationID, "reason", res.Reason)
		}
	case events.OrderCancelled:
		slot := redisstore.Slot{ActivityID: e.ActivityID, SKUID: e.SKUID, Bucket: e.Bucket}
		res, err := p.Redis.ReleaseAfterCancel(ctx, slot, e.ReservationID, e.OrderID, time.Now(), p.terminalTTL())
		if err != nil {
			_ = p.MQ.Retry(d, time.Second)
			return
		}
		result = res.Reason
		if !res.OK() {
			p.Log.Warn("release refused", "reservation_id", e.ReservationID, "reason", res.Reason)
		}
	}
	if err := orderstore.RecordProjection(ctx, p.Pool, p.Group, d.Topic, ev.Type(), eventID, ev.Reservation(), d.Body, result); err != nil {
		_ = p.MQ.Retry(d, time.Second)
		return
	}
	p.Metrics.Projected.WithLabelValues(result).Inc()
	_ = p.MQ.Ack(ctx, d)
}

// Compensator runs compensation tasks.
type Compensator struct {
	Worker  *compensation.Worker
	Batch   int
	Log     *slog.Logger
	Metrics *metrics.Compensator
	Health  *metrics.Health
	// Once makes Run return when no task is due (a scheduled sweep).
	Once bool
}

// Run compensates until ctx ends (or, with Once, until nothing is due).
func (c *Compensator) Run(ctx context.Context) error {
	if c.Metrics == nil {
		c.Metrics = metrics.NewCompensator(prometheus.NewRegistry())
	}
	c.Health.Ready()
	for ctx.Err() == nil {
		c.Health.Beat()
		tasks, err := c.Worker.Claim(ctx, c.Batch)
		if err != nil {
			c.Log.Warn("claim failed", "error", err)
			idle(ctx, time.Second)
			continue
		}
		if len(tasks) == 0 {
			if c.Once {
				return nil
			}
			idle(ctx, 50*time.Millisecond)
			continue
		}
		for _, t := range tasks {
			outcome, reason, err := c.Worker.Run(ctx, t)
			c.Metrics.Total.WithLabelValues(outcome).Inc()
			switch {
			case reason == "ALREADY_COMPENSATED":
				c.Metrics.AlreadyApplied.Inc()
			case reason == "RESERVATION_MISSING":
				c.Metrics.RedisMissing.Inc()
			case outcome == compensation.OutcomeManual:
				c.Metrics.StateConflict.Inc()
			}
			if err != nil || outcome != compensation.OutcomeApplied {
				c.Log.Warn("compensation not applied", "reservation_id", t.ReservationID, "outcome", outcome, "reason", reason, "error", err)
			}
		}
	}
	return nil
}

// SendScanner resends reservations whose order-create message is not known
// to be sent (design.md#send): leased claims of due send_due entries, the
// original message id, backoff on failure, the entry removed only after a
// successful send.
type SendScanner struct {
	Redis    *redisstore.Store
	Producer *mq.Producer
	Topic    string
	Slots    []redisstore.Slot
	Lease    time.Duration
	Batch    int
	// ResendAfter: a sent reservation PostgreSQL has not decided after this
	// long is sent again (gateway.Config.ResendAfter); 0: never.
	ResendAfter time.Duration
	Log         *slog.Logger
	Metrics     *metrics.Scanner
	Health      *metrics.Health
}

// Run scans until ctx ends.
func (s *SendScanner) Run(ctx context.Context) error {
	if s.Metrics == nil {
		s.Metrics = metrics.NewScanner(prometheus.NewRegistry())
	}
	s.Health.Ready()
	for ctx.Err() == nil {
		s.Health.Beat()
		n := 0
		for _, sl := range s.Slots {
			n += s.scan(ctx, sl)
		}
		if n == 0 {
			idle(ctx, 200*time.Millisecond)
		}
	}
	return nil
}

func (s *SendScanner) scan(ctx context.Context, sl redisstore.Slot) int {
	claims, err := s.Redis.ClaimDue(ctx, sl, time.Now(), s.Lease, s.Batch)
	if err != nil {
		s.Log.Warn("claiming send_due failed", "slot", sl.Tag(), "error", err)
		return 0
	}
	for _, c := range claims {
		h, err := s.Redis.Reservation(ctx, sl, c.ReservationID)
		if err != nil || h == nil {
			// Missing: evidence for the reconcile job; the entry stays.
			s.Log.Warn("send_due entry without reservation", "reservation_id", c.ReservationID, "error", err)
			continue
		}
		if h.Status() != states.HashReserved {
			_, _ = s.Redis.AckSend(ctx, sl, c.ReservationID, c.Lease, time.Now(), 0) // nothing left to send
			continue
		}
		msg, err := events.FromReservationHash(h)
		if err != nil {
			s.Log.Error("reservation hash unreadable", "reservation_id", c.ReservationID, "error", err)
			continue
		}
		body, _ := msg.Marshal()
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = s.Producer.Send(sctx, mq.Message{Topic: s.Topic, MessageID: msg.MessageID.String(),
			Key: msg.ReservationID.String(), Tag: events.TypeOrderCreateRequested, Body: body})
		cancel()
		attempts, _ := strconv.Atoi(h["send_attempts"])
		if err != nil {
			s.Metrics.Unknown.Inc()
			next := time.Now().Add(lease.Backoff(attempts + 1))
			_, _ = s.Redis.RescheduleSend(ctx, sl, c.ReservationID, c.Lease, next, redisstore.MQUnknown, err.Error())
			continue
		}
		s.Metrics.Resent.Inc()
		s.Metrics.Sends.Observe(float64(attempts + 1))
		if _, err := s.Redis.AckSend(ctx, sl, c.ReservationID, c.Lease, time.Now(), s.ResendAfter); err != nil {
			s.Log.Warn("sent but not acked; it will be resent with the same id", "reservation_id", c.ReservationID, "error", err)
		}
	}
	return len(claims)
}

// Canceller runs the timeout-cancel timers (delayed messages due at each
// order's expires_at).
type Canceller struct {
	MQ        *mq.Consumer
	Cancel    *cancel.Canceller
	Group     string
	Invisible time.Duration
	Log       *slog.Logger
	Health    *metrics.Health
	// RefundEvery is the period of the refund sweep (0: none).
	RefundEvery time.Duration
	// RearmAfter is the delivery attempt from which a paused or frozen
	// timer is written again as a new message instead of redelivered
	// (default 4; keep it below the group's retry limit).
	RearmAfter int
}

func (c *Canceller) rearmAfter() int {
	if c.RearmAfter > 0 {
		return c.RearmAfter
	}
	return 4
}

// Run cancels until ctx ends; every RefundEvery it also refunds the
// payments reported after a cancellation.
func (c *Canceller) Run(ctx context.Context) error {
	if c.RefundEvery > 0 && c.Cancel.Payments != nil {
		go func() {
			for idle(ctx, c.RefundEvery) {
				if n, err := c.Cancel.Payments.Refund(ctx, c.Cancel.Channel, 100); err != nil {
					c.Log.Warn("refunds not run", "error", err)
				} else if n > 0 {
					c.Log.Info("refunded payments of cancelled orders", "count", n)
				}
			}
		}()
	}
	receiveLoop(ctx, c.MQ, c.Invisible, c.Health, c.Log, c.handle)
	return nil
}

func (c *Canceller) handle(ctx context.Context, d mq.Delivery) {
	tm, err := events.ParseCancelTimer(d.Body)
	var out cancel.Outcome
	if err == nil {
		out, err = c.Cancel.Handle(ctx, tm.OrderID)
	}
	if err != nil && (errors.Is(err, cancel.ErrNoOrder) || errors.Is(err, events.ErrInvalid)) {
		if qerr := orderstore.Quarantine(ctx, c.Cancel.Pool, orderstore.Quarantined{Group: c.Group, Topic: d.Topic,
			BrokerMessageID: d.BrokerID, Reason: events.ReasonOf(err), Detail: err.Error(), Payload: d.Body}); qerr != nil {
			_ = c.MQ.Retry(d, 5*time.Second)
			return
		}
		_ = c.MQ.Ack(ctx, d)
		return
	}
	if err != nil && errors.Is(err, payment.ErrConflict) {
		// The channel reports a payment that contradicts what is recorded
		// (its transaction belongs to another order): no automatic decision.
		// The order stays CANCEL_PENDING, the timer is kept as evidence.
		c.Log.Error("cancel timer: the channel's payment conflicts; quarantined for review", "order_id", tm.OrderID, "error", err)
		if qerr := orderstore.Quarantine(ctx, c.Cancel.Pool, orderstore.Quarantined{Group: c.Group, Topic: d.Topic,
			BrokerMessageID: d.BrokerID, Reason: events.ReasonInconsistent, Detail: err.Error(), Payload: d.Body}); qerr != nil {
			_ = c.MQ.Retry(d, 5*time.Second)
			return
		}
		_ = c.MQ.Ack(ctx, d)
		return
	}
	if err != nil {
		c.Log.Warn("cancel timer failed; redelivery", "order_id", tm.OrderID, "error", err)
		_ = c.MQ.Retry(d, 5*time.Second)
		return
	}
	switch out.Result {
	case cancel.Paused, cancel.Frozen, cancel.Early, cancel.Unknown:
		long := out.Result == cancel.Paused || out.Result == cancel.Frozen
		if long && d.Attempt >= c.rearmAfter() {
			// A long wait: every redelivery counts against the group's
			// limit, so the timer is written again as a new message and
			// this one acknowledged (never dead-lettered by waiting).
			id := d.MessageID
			if id == "" {
				id = d.BrokerID
			}
			if _, err := c.Cancel.Rearm(ctx, id, d.Topic, tm.OrderID, out.RetryAt); err != nil {
				c.Log.Warn("cancel timer not re-armed; redelivery", "order_id", tm.OrderID, "error", err)
				_ = c.MQ.Retry(d, 5*time.Second)
				return
			}
			_ = c.MQ.Ack(ctx, d)
			return
		}
		// Not now: the same timer comes back later (bounded wait).
		_ = c.MQ.Retry(d, min(max(time.Until(out.RetryAt), time.Second), 10*time.Minute))
	default:
		c.Log.Info("cancel timer", "order_id", tm.OrderID, "result", out.Result)
		_ = c.MQ.Ack(ctx, d)
	}
}
