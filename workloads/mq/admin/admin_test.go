package admin_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/mq/admin"
	"github.com/seckill/seckill-operator/workloads/names"
)

func client(t *testing.T) *admin.Client {
	t.Helper()
	return &admin.Client{NameServer: testenv.Get(t, "SECKILL_RMQ_NAMESRV"),
		AccessKey: testenv.Get(t, names.EnvRMQAccessKey), SecretKey: testenv.Get(t, names.EnvRMQSecretKey)}
}

// The stack's broker runs with ACLs: a request without a signature, or
// signed with the wrong secret, is refused as an auth error (not an
// outage), and nothing is created.
func TestUnsignedOrWronglySignedIsRefused(t *testing.T) {
	ctx := context.Background()
	good := client(t)
	for name, c := range map[string]*admin.Client{
		"unsigned":     {NameServer: good.NameServer},
		"wrong secret": {NameServer: good.NameServer, AccessKey: good.AccessKey, SecretKey: "not-the-secret"},
		"unknown user": {NameServer: good.NameServer, AccessKey: "nobody", SecretKey: good.SecretKey},
	} {
		t.Run(name, func(t *testing.T) {
			topic := unique("seckill-admin-refused")
			err := c.CreateTopic(ctx, admin.Topic{Name: topic, Type: admin.Normal, Queues: 1})
			require.Error(t, err)
			require.True(t, admin.IsAuthError(err), "%v", err)
			ok, err := good.TopicExists(ctx, topic)
			require.NoError(t, err)
			require.False(t, ok, "nothing created")
		})
	}
}

// unique is a name no earlier run used.
func unique(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(ids.NewRandom().String(), "-", "")[:16]
}

// A topic and a group created through the admin protocol exist with what
// was asked (message type, queues, retry limit), a second create changes
// nothing, and deleting removes them.
func TestCreateReadBackDelete(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	brokers, err := c.Brokers(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, brokers)
	require.NotEmpty(t, brokers[0].Master)

	topic, group := unique("seckill-admin-test"), unique("seckill-admin-test-g")
	for range 2 {
		require.NoError(t, c.CreateTopic(ctx, admin.Topic{Name: topic, Type: admin.Delay, Queues: 2}))
		require.NoError(t, c.CreateGroup(ctx, admin.Group{Name: group, RetryMaxTimes: 5}))
	}
	topics, err := c.Topics(ctx)
	require.NoError(t, err)
	require.Equal(t, admin.Topic{Name: topic, Type: admin.Delay, Queues: 2}, topics[topic])
	groups, err := c.Groups(ctx)
	require.NoError(t, err)
	require.Equal(t, admin.Group{Name: group, RetryMaxTimes: 5}, groups[group])
	ok, err := c.TopicExists(ctx, topic)
	require.NoError(t, err)
	require.True(t, ok, "the name server routes it")

	require.NoError(t, c.DeleteTopic(ctx, topic))
	require.NoError(t, c.DeleteGroup(ctx, group))
	ok, err = c.TopicExists(ctx, topic)
	require.NoError(t, err)
	require.False(t, ok)
	groups, err = c.Groups(ctx)
	require.NoError(t, err)
	require.NotContains(t, groups, group)
}

// Two activities on one broker, each with its own topic and group created
// through the admin protocol: the proxy serves both groups (it refuses a
// group that was never created), and each activity's consumer receives its
// own messages and never the other's.
func TestPerActivityTopicsAndGroupsIsolate(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	type activity struct{ topic, group, message string }
	acts := []*activity{{topic: unique("seckill-iso-a"), group: unique("seckill-iso-a-g")}, {topic: unique("seckill-iso-b"), group: unique("seckill-iso-b-g")}}
	for _, a := range acts {
		require.NoError(t, c.CreateTopic(ctx, admin.Topic{Name: a.topic, Type: admin.Normal}))
		require.NoError(t, c.CreateGroup(ctx, admin.Group{Name: a.group, RetryMaxTimes: 3}))
		t.Cleanup(func() {
			_ = c.DeleteTopic(context.Background(), a.topic)
			_ = c.DeleteGroup(context.Background(), a.group)
		})
	}
	p, err := mq.NewProducer(endpoint, acts[0].topic, acts[1].topic)
	require.NoError(t, err)
	defer p.Close()
	consumers := make([]*mq.Consumer, len(acts))
	for i, a := range acts {
		consumers[i], err = mq.NewConsumer(endpoint, a.group, a.topic)
		require.NoError(t, err, "the proxy serves a group created through the admin protocol")
		defer consumers[i].Close()
	}
	for _, a := range acts {
		a.message = ids.NewRandom().String()
		_, err := p.Send(ctx, mq.Message{Topic: a.topic, MessageID: a.message, Key: a.message, Tag: "ORDER_CREATE_REQUESTED", Body: []byte(`{}`)})
		require.NoError(t, err)
	}
	for i, a := range acts {
		var got []string
		deadline := time.Now().Add(20 * time.Second)
		for len(got) == 0 && time.Now().Before(deadline) {
			ds, err := consumers[i].Receive(ctx, 16, 10*time.Second)
			require.NoError(t, err)
			for _, d := range ds {
				got = append(got, d.MessageID)
				require.NoError(t, consumers[i].Ack(ctx, d))
			}
		}
		require.Equal(t, []string{a.message}, got, "activity %d receives its own message only", i)
	}
	// Nothing else arrives for either.
	for i := range consumers {
		ds, err := consumers[i].Receive(ctx, 16, 10*time.Second)
		require.NoError(t, err)
		require.Empty(t, ds, "activity %d", i)
	}
}

// Names RocketMQ would refuse are refused before any call; an unreachable
// broker is an error naming it, not a hang.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"", "has space", "dot.ted", strings.Repeat("x", 128), "slash/y"} {
		require.Error(t, admin.CheckName(name), name)
	}
	require.NoError(t, admin.CheckName("seckill-7a3f_x%RETRY|y"))
	c := client(t)
	require.Error(t, c.CreateTopic(ctx, admin.Topic{Name: "seckill-admin-bad", Type: "WEIRD"}))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	c.BrokerAddr = func(string) string { return closed }
	c.Timeout = 3 * time.Second
	err = c.CreateGroup(ctx, admin.Group{Name: "seckill-admin-never", RetryMaxTimes: 1})
	require.ErrorContains(t, err, closed)
}
