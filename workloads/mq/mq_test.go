package mq_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/names"
)

const (
	topicNormal = "seckill-test-normal"
	topicDelay  = "seckill-test-delay"
)

// receiveUntil polls until want(delivery) is seen or the deadline passes.
// Other messages (left by earlier runs on the shared topic) are acked and skipped.
func receiveUntil(t *testing.T, c *mq.Consumer, deadline time.Duration, invisible time.Duration, want func(mq.Delivery) bool) (mq.Delivery, time.Time) {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		ds, err := c.Receive(context.Background(), 16, invisible)
		require.NoError(t, err)
		for _, d := range ds {
			if want(d) {
				return d, time.Now()
			}
			require.NoError(t, c.Ack(context.Background(), d))
		}
	}
	t.Fatalf("message not received within %s", deadline)
	return mq.Delivery{}, time.Time{}
}

func TestEveryTopicExists(t *testing.T) {
	p, err := mq.NewProducer(testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), names.TopicOrderCreate, names.TopicOrderEvents, names.TopicOrderCancel)
	require.NoError(t, err, "hack/stack.sh creates every topic the code uses")
	require.NoError(t, p.Close())
}

func TestRoundTripAckAndRedelivery(t *testing.T) {
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	p, err := mq.NewProducer(endpoint, topicNormal)
	require.NoError(t, err)
	defer p.Close()
	c, err := mq.NewConsumer(endpoint, "seckill-test-group", topicNormal)
	require.NoError(t, err)
	defer c.Close()

	id := ids.NewRandom().String()
	reservation := ids.NewRandom().String()
	brokerID, err := p.Send(context.Background(), mq.Message{Topic: topicNormal, MessageID: id, Key: reservation,
		Tag: "ORDER_CREATE_REQUESTED", Body: []byte(`{"schema_version":1}`)})
	require.NoError(t, err)
	require.NotEmpty(t, brokerID)
	mine := func(d mq.Delivery) bool { return d.MessageID == id }

	// First delivery: not acked, so it comes back after its invisible time.
	d1, _ := receiveUntil(t, c, 30*time.Second, 2*time.Second, mine)
	require.Equal(t, 1, d1.Attempt)
	require.Equal(t, brokerID, d1.BrokerID)
	require.Equal(t, []byte(`{"schema_version":1}`), d1.Body)
	require.Contains(t, d1.Keys, id)
	require.Contains(t, d1.Keys, reservation)
	require.Equal(t, "ORDER_CREATE_REQUESTED", d1.Tag)

	d2, _ := receiveUntil(t, c, 40*time.Second, 2*time.Second, mine)
	require.Equal(t, 2, d2.Attempt, "an unacknowledged message is redelivered")
	require.Equal(t, id, d2.MessageID, "redelivery keeps our message id")
	require.NoError(t, c.Ack(context.Background(), d2))

	// Acked: it does not come back (wait past invisible time + revive delay).
	end := time.Now().Add(8 * time.Second)
	for time.Now().Before(end) {
		ds, err := c.Receive(context.Background(), 16, 2*time.Second)
		require.NoError(t, err)
		for _, d := range ds {
			require.NotEqual(t, id, d.MessageID, "an acked message was redelivered")
			require.NoError(t, c.Ack(context.Background(), d))
		}
	}
}

func TestDelayedMessageArrivesAfterItsTime(t *testing.T) {
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	p, err := mq.NewProducer(endpoint, topicDelay)
	require.NoError(t, err)
	defer p.Close()
	c, err := mq.NewConsumer(endpoint, "seckill-test-delay-group", topicDelay)
	require.NoError(t, err)
	defer c.Close()

	id := ids.NewRandom().String()
	at := time.Now().Add(4 * time.Second)
	_, err = p.Send(context.Background(), mq.Message{Topic: topicDelay, MessageID: id, Body: []byte("cancel"), DeliverAt: at})
	require.NoError(t, err)
	d, got := receiveUntil(t, c, 40*time.Second, 10*time.Second, func(d mq.Delivery) bool { return d.MessageID == id })
	require.False(t, got.Before(at.Add(-time.Second)), "delivered at %s, due %s", got, at) // 1 s timer precision
	require.NoError(t, c.Ack(context.Background(), d))
}

// The stack's proxy runs with ACLs: a client signing with the wrong secret
// cannot even start, and one without credentials is refused the same way;
// the right ones work (every other test).
func TestWrongCredentialsAreRefused(t *testing.T) {
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	user, secret := testenv.Get(t, names.EnvRMQAccessKey), testenv.Get(t, names.EnvRMQSecretKey)
	t.Cleanup(func() { mq.UseCredentials(user, secret) })
	for name, cred := range map[string][2]string{"wrong secret": {user, "not-the-secret"}, "none": {"", ""}} {
		t.Run(name, func(t *testing.T) {
			mq.UseCredentials(cred[0], cred[1])
			_, err := mq.NewProducer(endpoint, "seckill-test-normal")
			require.ErrorContains(t, err, "UNAUTHORIZED")
		})
	}
	mq.UseCredentials(user, secret)
	p, err := mq.NewProducer(endpoint, "seckill-test-normal")
	require.NoError(t, err)
	require.NoError(t, p.Close())
}

// The operator's login check: the stack's user is accepted (also for a
// topic that does not exist: the login came first), a wrong secret and an
// unknown user are ErrLoginRefused, and a proxy that does not answer is
// not judged a refusal.
func TestCheckLogin(t *testing.T) {
	ctx := context.Background()
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	ca, err := os.ReadFile(testenv.Get(t, names.EnvRMQCAFile))
	require.NoError(t, err)
	tc, err := mq.TLSConfig(ca)
	require.NoError(t, err)
	user, secret := testenv.Get(t, names.EnvRMQAccessKey), testenv.Get(t, names.EnvRMQSecretKey)
	require.NoError(t, mq.CheckLogin(ctx, endpoint, tc, user, secret, "seckill-test-normal"))
	require.NoError(t, mq.CheckLogin(ctx, endpoint, nil, user, secret, "seckill-no-such-topic"))
	require.ErrorIs(t, mq.CheckLogin(ctx, endpoint, tc, user, "not-the-secret", "seckill-test-normal"), mq.ErrLoginRefused)
	require.ErrorIs(t, mq.CheckLogin(ctx, endpoint, tc, "nobody", secret, "seckill-test-normal"), mq.ErrLoginRefused)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	err = mq.CheckLogin(ctx, closed, tc, user, "not-the-secret", "seckill-test-normal")
	require.Error(t, err)
	require.NotErrorIs(t, err, mq.ErrLoginRefused)
}

func TestSendToMissingTopicFails(t *testing.T) {
	_, err := mq.NewProducer(testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), "seckill-no-such-topic")
	require.Error(t, err)
}

// A message that is never acknowledged is redelivered up to the group's
// retry limit (2 for the test group) and then no more: the broker moves it
// to the group's DLQ (%DLQ%<group>) instead of retrying forever.
func TestRetryLimitSendsToDLQ(t *testing.T) {
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	group := "seckill-test-dlq-group"
	p, err := mq.NewProducer(endpoint, topicNormal)
	require.NoError(t, err)
	defer p.Close()
	c, err := mq.NewConsumer(endpoint, group, topicNormal)
	require.NoError(t, err)
	defer c.Close()
	id := ids.NewRandom().String()
	_, err = p.Send(context.Background(), mq.Message{Topic: topicNormal, MessageID: id, Body: []byte("poison")})
	require.NoError(t, err)
	mine := func(d mq.Delivery) bool { return d.MessageID == id }
	for attempt := 1; attempt <= 3; attempt++ {
		d, _ := receiveUntil(t, c, 60*time.Second, 2*time.Second, mine)
		require.Equal(t, attempt, d.Attempt)
		require.NoError(t, c.Retry(d, time.Second))
	}
	// The broker moves it to the DLQ during a later receive.
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) {
		ds, err := c.Receive(context.Background(), 16, 2*time.Second)
		require.NoError(t, err)
		for _, d := range ds {
			require.NotEqual(t, id, d.MessageID, "delivered past the retry limit")
			require.NoError(t, c.Ack(context.Background(), d))
		}
	}
}
