// Package mq is the only package that imports the RocketMQ client. It sends
// messages keyed by our own stable message id and receives them with a
// SimpleConsumer (explicit ack, invisible-duration redelivery).
package mq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// PropMessageID is the user property carrying our business message id; the
// id is also the message's first key, so it can be queried on the broker.
const PropMessageID = "seckill_message_id"

var logOnce sync.Once

// quietClientLog sends the client's own log to a file under the temp dir
// (its default is the home directory) unless the caller chose a place.
func quietClientLog() {
	logOnce.Do(func() {
		if os.Getenv(rmq.CLIENT_LOG_ROOT) == "" {
			_ = os.Setenv(rmq.CLIENT_LOG_ROOT, os.TempDir()+"/seckill-rocketmq-client")
		}
		rmq.ResetLogger()
	})
}

func config(endpoint, group string) *rmq.Config {
	return &rmq.Config{Endpoint: endpoint, ConsumerGroup: group, Credentials: sessionCredentials()}
}

// Message is what we send.
type Message struct {
	Topic string
	// MessageID is our stable business id (never the broker's).
	MessageID string
	// Key is an extra index key, e.g. the reservation id (design.md#messages message_key).
	Key  string
	Tag  string
	Body []byte
	// DeliverAt makes a delayed message (the topic must be DELAY).
	DeliverAt  time.Time
	Properties map[string]string
}

// Producer sends messages. After a broker or proxy restart the client
// library may keep failing (a restarted proxy has lost its settings); after
// reconnectAfter failed sends in a row the client is started afresh, once at
// a time, in the background, while sends go on with the old one.
type Producer struct {
	endpoint string
	topics   []string

	mu         sync.Mutex
	p          rmq.Producer
	failures   int // consecutive failed sends
	restarting bool
	// wanted: a Reconnect asked for a fresh client that has not started
	// yet (the restart loop goes on each second until one does).
	wanted bool
	fresh  []func() // told once the wanted client is in
	closed chan struct{}
}

// NewProducer starts a producer for the given topics; it fails when a topic
// does not exist on the broker.
func NewProducer(endpoint string, topics ...string) (*Producer, error) {
	quietClientLog()
	if err := caFromEnv(); err != nil {
		return nil, err
	}
	pr := &Producer{endpoint: endpoint, topics: topics, closed: make(chan struct{})}
	p, err := pr.start()
	if err != nil {
		return nil, err
	}
	pr.p = p
	return pr, nil
}

func (pr *Producer) start() (rmq.Producer, error) {
	var p rmq.Producer
	err := startRetrying(func() error {
		var err error
		if p, err = rmq.NewProducer(config(pr.endpoint, ""), rmq.WithTopics(pr.topics...), rmq.WithMaxAttempts(1)); err != nil {
			return fmt.Errorf("creating RocketMQ producer: %w", err)
		}
		if err := p.Start(); err != nil {
			return fmt.Errorf("starting RocketMQ producer for %v: %w", pr.topics, err)
		}
		return nil
	})
	return p, err
}

func (pr *Producer) client() rmq.Producer {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.p
}

// sent counts a send's outcome; a failure past the limit (or one that says
// the proxy lost the settings) starts a fresh client in the background.
func (pr *Producer) sent(err error) {
	pr.mu.Lock()
	if err == nil {
		pr.failures = 0
		pr.mu.Unlock()
		return
	}
	pr.failures++
	restart := (settingsLost(err) || pr.failures >= reconnectAfter) && !pr.restarting
	if restart {
		pr.restarting = true
	}
	pr.mu.Unlock()
	if restart {
		go pr.restart()
	}
}

// Reconnect starts a fresh client in the background — again each second
// while the broker does not answer, until one starts or the producer is
// closed — swaps it in and then calls fresh. Sends go on with the old
// client meanwhile. (The gateway calls it when its entry breaker opens.)
func (pr *Producer) Reconnect(fresh func()) {
	pr.mu.Lock()
	pr.wanted = true
	if fresh != nil {
		pr.fresh = append(pr.fresh, fresh)
	}
	running := pr.restarting
	pr.restarting = true
	pr.mu.Unlock()
	if !running {
		go pr.restart()
	}
}

// restart starts a fresh client and swaps it in (pr.restarting is set by
// the caller, cleared here). One that cannot start yet is tried again each
// second while a Reconnect wants it; otherwise the next failed sends try
// again.
func (pr *Producer) restart() {
	for {
		p, err := pr.start()
		pr.mu.Lock()
		if err == nil {
			old := pr.p
			pr.p, pr.failures, pr.restarting, pr.wanted = p, 0, false, false
			fresh := pr.fresh
			pr.fresh = nil
			pr.mu.Unlock()
			go func() { _ = old.GracefulStop() }()
			for _, f := range fresh {
				f()
			}
			return
		}
		if !pr.wanted {
			pr.restarting = false
			pr.mu.Unlock()
			return // the broker is still away: the next failures try again
		}
		pr.mu.Unlock()
		select {
		case <-pr.closed:
			pr.mu.Lock()
			pr.restarting = false
			pr.mu.Unlock()
			return
		case <-time.After(time.Second):
		}
	}
}

// startRetrying retries a client start that failed on the client library's
// start-up race (its settings are marshaled while being filled in: "size
// mismatch"), at most three times. Other errors are returned at once.
func startRetrying(start func() error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = start(); err == nil || !strings.Contains(err.Error(), "size mismatch") {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return err
}

// Send sends one message and returns the broker's id for it. An error does
// not mean the broker did not store it (design.md#rules rule 2): callers resend
// with the same MessageID, and consumers deduplicate by it.
func (p *Producer) Send(ctx context.Context, m Message) (string, error) {
	if m.MessageID == "" {
		return "", errors.New("sending message: empty message id")
	}
	msg := &rmq.Message{Topic: m.Topic, Body: m.Body}
	keys := []string{m.MessageID}
	if m.Key != "" {
		keys = append(keys, m.Key)
	}
	msg.SetKeys(keys...)
	if m.Tag != "" {
		msg.SetTag(m.Tag)
	}
	msg.AddProperty(PropMessageID, m.MessageID)
	for k, v := range m.Properties {
		msg.AddProperty(k, v)
	}
	if !m.DeliverAt.IsZero() {
		msg.SetDelayTimestamp(m.DeliverAt)
	}
	client := p.client()
	receipts, err := withContext(ctx, func() ([]*rmq.SendReceipt, error) { return client.Send(ctx, msg) })
	p.sent(err)
	if err != nil {
		return "", fmt.Errorf("sending message %s to %s: %w", m.MessageID, m.Topic, err)
	}
	if len(receipts) == 0 {
		return "", fmt.Errorf("sending message %s to %s: no receipt", m.MessageID, m.Topic)
	}
	return receipts[0].MessageID, nil
}

// Close stops the producer, waiting at most stopWait for the client library.
func (p *Producer) Close() error {
	p.mu.Lock()
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	p.mu.Unlock()
	return stopWithin(p.client().GracefulStop, stopWait)
}

// Delivery is one received message.
type Delivery struct {
	BrokerID  string
	MessageID string
	Topic     string
	Tag       string
	Keys      []string
	Body      []byte
	// Attempt is 1 for the first delivery.
	Attempt    int
	Properties map[string]string
	view       *rmq.MessageView
}

// Consumer receives from one consumer group.
type Consumer struct {
	endpoint, group string
	subs            map[string]*rmq.FilterExpression

	mu       sync.Mutex
	c        rmq.SimpleConsumer
	failures int // consecutive failed receives
	await    time.Duration
}

// ReceiveAwait is how long a receive long-polls an empty queue. Short,
// because a message that arrives while several consumers of a group poll
// can wait for a poll to end: measured on this stack (BenchmarkDeliveryLatency,
// 20 messages/s, two consumers), a 5 s await gave p99 3.1 s from send to
// receive, a 1 s await p99 11 ms. The proxy must allow it:
// grpcClientConsumerMinLongPollingTimeoutMillis (default 5000) at most 1000
// (the stack's rmq-proxy.json). A proxy that does not answers
// ILLEGAL_POLLING_TIME; the consumer then falls back to fallbackAwait.
const ReceiveAwait = time.Second

// fallbackAwait suits a proxy with the default 5 s polling floor.
const fallbackAwait = 5 * time.Second

// NewConsumer starts a SimpleConsumer of group subscribed to all messages of topics.
func NewConsumer(endpoint, group string, topics ...string) (*Consumer, error) {
	quietClientLog()
	if err := caFromEnv(); err != nil {
		return nil, err
	}
	subs := make(map[string]*rmq.FilterExpression, len(topics))
	for _, t := range topics {
		subs[t] = rmq.SUB_ALL
	}
	c := &Consumer{endpoint: endpoint, group: group, subs: subs, await: ReceiveAwait}
	sc, err := c.start()
	if err != nil {
		return nil, err
	}
	c.c = sc
	return c, nil
}

func (c *Consumer) start() (rmq.SimpleConsumer, error) {
	topics := make([]string, 0, len(c.subs))
	for t := range c.subs {
		topics = append(topics, t)
	}
	var sc rmq.SimpleConsumer
	c.mu.Lock()
	await := c.await
	c.mu.Unlock()
	err := startRetrying(func() error {
		var err error
		sc, err = rmq.NewSimpleConsumer(config(c.endpoint, c.group),
			rmq.WithSimpleAwaitDuration(await),
			rmq.WithSimpleSubscriptionExpressions(c.subs))
		if err != nil {
			return fmt.Errorf("creating RocketMQ consumer %s: %w", c.group, err)
		}
		if err := sc.Start(); err != nil {
			return fmt.Errorf("starting RocketMQ consumer %s for %v: %w", c.group, topics, err)
		}
		return nil
	})
	return sc, err
}

func (c *Consumer) client() rmq.SimpleConsumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c
}

// reconnectAfter is how many receives in a row may fail before the client
// is started afresh.
const reconnectAfter = 5

// settingsLost: a restarted proxy no longer knows this client's settings
// (they travel on the telemetry stream at start-up and then only every 5
// minutes) and fails every receive with a NullPointerException until then.
func settingsLost(err error) bool {
	m := err.Error()
	return strings.Contains(m, "Settings") && strings.Contains(m, "null")
}

// failed counts a failed receive and, after a broker restart, starts the
// client afresh: its start-up sends the settings again.
// The new client starts outside the lock: acks of other goroutines keep
// using the old one meanwhile.
func (c *Consumer) failed(err error) {
	c.mu.Lock()
	c.failures++
	restart := settingsLost(err) || c.failures >= reconnectAfter
	if st, ok := rmq.AsErrRpcStatus(err); ok && st.GetCode() == int32(v2.Code_ILLEGAL_POLLING_TIME) && c.await < fallbackAwait {
		// The proxy's polling floor is above our await: every receive
		// would fail. Poll as long as it asks, at the cost of latency.
		c.await, restart = fallbackAwait, true
	}
	c.mu.Unlock()
	if !restart {
		return
	}
	sc, serr := c.start()
	if serr != nil {
		return // the broker is still away: try again after the next failures
	}
	c.mu.Lock()
	old := c.c
	c.c, c.failures = sc, 0
	c.mu.Unlock()
	go func() { _ = old.GracefulStop() }()
}

// Await is how long this consumer's receives long-poll.
func (c *Consumer) Await() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.await
}

// Receive long-polls for up to max messages, each invisible to other
// receivers for invisible; an empty poll is not an error.
func (c *Consumer) Receive(ctx context.Context, max int, invisible time.Duration) ([]Delivery, error) {
	sc := c.client()
	views, err := withContext(ctx, func() ([]*rmq.MessageView, error) { return sc.Receive(ctx, int32(max), invisible) })
	if err != nil {
		if st, ok := rmq.AsErrRpcStatus(err); ok && st.GetCode() == int32(v2.Code_MESSAGE_NOT_FOUND) {
			c.succeeded()
			return nil, nil
		}
		if ctx.Err() == nil {
			c.failed(err)
		}
		return nil, fmt.Errorf("receiving: %w", err)
	}
	c.succeeded()
	out := make([]Delivery, 0, len(views))
	for _, v := range views {
		d := Delivery{BrokerID: v.GetMessageId(), Topic: v.GetTopic(), Keys: v.GetKeys(), Body: v.GetBody(),
			Attempt: int(v.GetDeliveryAttempt()), Properties: v.GetProperties(), view: v}
		if t := v.GetTag(); t != nil {
			d.Tag = *t
		}
		d.MessageID = d.Properties[PropMessageID]
		out = append(out, d)
	}
	return out, nil
}

func (c *Consumer) succeeded() {
	c.mu.Lock()
	c.failures = 0
	c.mu.Unlock()
}

// Ack acknowledges a delivery: only after its effect is committed.
func (c *Consumer) Ack(ctx context.Context, d Delivery) error {
	sc := c.client()
	if _, err := withContext(ctx, func() (struct{}, error) { return struct{}{}, sc.Ack(ctx, d.view) }); err != nil {
		return fmt.Errorf("acking %s: %w", d.MessageID, err)
	}
	return nil
}

// Retry makes a delivery visible again after delay (a negative ack). The
// broker counts the attempt; past the group's retry limit it goes to the DLQ.
func (c *Consumer) Retry(d Delivery, delay time.Duration) error {
	if err := c.client().ChangeInvisibleDuration(d.view, delay); err != nil {
		return fmt.Errorf("scheduling retry of %s: %w", d.MessageID, err)
	}
	return nil
}

// Close stops the consumer, waiting at most stopWait for the client library.
func (c *Consumer) Close() error { return stopWithin(c.client().GracefulStop, stopWait) }

// stopWait bounds a client's graceful stop: the library waits for its
// in-flight calls (a long poll, a send to a broker that went away) and can
// hang on a dead connection; a process told to stop must stop regardless.
const stopWait = 10 * time.Second

// stopWithin runs stop and gives up waiting after d; the stop goes on in
// the background and its connections die with the process.
func stopWithin(stop func() error, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- stop() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("stopping the RocketMQ client: still waiting after %s", d)
	}
}

// Reachable reports whether the broker's endpoint (the first of a
// ";"-separated list) accepts a TCP connection: a liveness probe's view of
// "the broker answers", not a proof that sends will succeed.
func Reachable(ctx context.Context, endpoint string) error {
	addr, _, _ := strings.Cut(endpoint, ";")
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dialing the broker at %s: %w", addr, err)
	}
	return c.Close()
}

// IsTopicNotFound reports whether err says the topic does not exist (for a
// DLQ: nothing was ever dead-lettered in that group).
func IsTopicNotFound(err error) bool {
	if err == nil {
		return false
	}
	if st, ok := rmq.AsErrRpcStatus(err); ok && st.GetCode() == int32(v2.Code_TOPIC_NOT_FOUND) {
		return true
	}
	return strings.Contains(err.Error(), "TOPIC_NOT_FOUND")
}

// withContext returns when call does or when ctx ends, whichever is first.
// The client library does not always honour the context: while the broker
// is down its calls queue behind a lock held for each 5 s connection
// attempt (seen on a broker restart: a send with a 2 s deadline waited
// minutes). A call given up this way has an unknown outcome — a send may
// still be stored — which callers already treat as such: resend with the
// same message id, never assume failure. The call itself finishes in the
// background within the library's own timeouts.
func withContext[T any](ctx context.Context, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("outcome unknown: %w", ctx.Err())
	}
}
