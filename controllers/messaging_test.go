package controllers

import (
	"context"
	"net"

	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/mq/admin"
	"github.com/seckill/seckill-operator/workloads/names"
)

// nameServer points a sale at a name server through a Secret of its own.
func nameServer(t *testing.T, name, addr string) func(*seckillv1alpha1.SeckillActivity) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-namesrv", Namespace: "default"}, StringData: map[string]string{"addr": addr}}
	require.NoError(t, k8sClient.Create(testCtx, sec))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), sec) })
	return func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Connections.RocketMQNameServerSecret = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: sec.Name}, Key: "addr"}
	}
}

func deploymentArgs(t *testing.T, a *seckillv1alpha1.SeckillActivity, component string) []string {
	t.Helper()
	var d appsv1.Deployment
	require.Eventually(t, func() bool {
		return k8sClient.Get(testCtx, types.NamespacedName{Namespace: a.Namespace, Name: ObjectName(a, component)}, &d) == nil
	}, 30*time.Second, 200*time.Millisecond, component)
	return d.Spec.Template.Spec.Containers[0].Args
}

// Two activities on one broker, each with its own database: each gets its
// own topics (with their message types) and consumer groups, created on the
// broker before its workloads, and its workloads are pointed at them; the
// shared names are used by neither. Deleting one removes its topics and
// groups and leaves the other's. (That a group only receives its own
// topic's messages through the proxy: mq/admin's
// TestPerActivityTopicsAndGroupsIsolate.)
func TestActivitiesGetTheirOwnTopicsAndGroups(t *testing.T) {
	needsAPIServer(t)
	addr := testenv.Get(t, "SECKILL_RMQ_NAMESRV")
	broker := &admin.Client{NameServer: addr, AccessKey: testenv.Get(t, names.EnvRMQAccessKey), SecretKey: testenv.Get(t, names.EnvRMQSecretKey)}
	sales := []*sale{newSale(t, "iso-a", nameServer(t, "iso-a", addr)), newSale(t, "iso-b", nameServer(t, "iso-b", addr))}
	var own []names.Messaging
	for _, s := range sales {
		a := s.eventually("connected", func(a *seckillv1alpha1.SeckillActivity) bool {
			return condition(a, seckillv1alpha1.ConditionDegraded).Reason == "Connected"
		})
		m := messaging(a)
		require.NotEqual(t, names.Shared(), m)
		own = append(own, m)
		require.Contains(t, deploymentArgs(t, a, ComponentGateway), "-create-topic="+m.CreateTopic)
		consumer := deploymentArgs(t, a, ComponentConsumer)
		for _, want := range []string{"-create-topic=" + m.CreateTopic, "-events-topic=" + m.EventsTopic, "-cancel-topic=" + m.CancelTopic, "-group=" + m.ConsumerGroup} {
			require.Contains(t, consumer, want)
		}
		require.Contains(t, deploymentArgs(t, a, ComponentProjector), "-group="+m.ProjectorGroup)
		require.Contains(t, deploymentArgs(t, a, ComponentRelay), "-events-topic="+m.EventsTopic)
		require.Contains(t, deploymentArgs(t, a, ComponentScanner), "-create-topic="+m.CreateTopic)
	}
	require.NotEqual(t, own[0], own[1])

	topics, err := broker.Topics(testCtx)
	require.NoError(t, err)
	groups, err := broker.Groups(testCtx)
	require.NoError(t, err)
	for _, m := range own {
		require.Equal(t, admin.Normal, topics[m.CreateTopic].Type)
		require.Equal(t, admin.Normal, topics[m.EventsTopic].Type)
		require.Equal(t, admin.Delay, topics[m.CancelTopic].Type)
		require.Equal(t, names.RetryLimit, groups[m.ConsumerGroup].RetryMaxTimes)
		require.Equal(t, names.RetryLimit, groups[m.CancellerGroup].RetryMaxTimes)
		require.Equal(t, names.ReplayerRetryLimit, groups[m.ReplayerGroup].RetryMaxTimes)
		require.Contains(t, groups, m.ProjectorGroup)
	}

	require.NoError(t, k8sClient.Delete(testCtx, sales[0].get()))
	sales[0].gone()
	topics, err = broker.Topics(testCtx)
	require.NoError(t, err)
	groups, err = broker.Groups(testCtx)
	require.NoError(t, err)
	for _, n := range []string{own[0].CreateTopic, own[0].EventsTopic, own[0].CancelTopic} {
		require.NotContains(t, topics, n, "deleted with its activity")
	}
	for _, n := range []string{own[0].ConsumerGroup, own[0].ProjectorGroup, own[0].CancellerGroup, own[0].ReplayerGroup} {
		require.NotContains(t, groups, n, "deleted with its activity")
	}
	require.Contains(t, topics, own[1].CreateTopic, "the other activity's stay")
	require.Contains(t, groups, own[1].ConsumerGroup)
}

// The operator checks the activity's ACL user before any workload runs:
// through the name server (its own topics are created as that user) and,
// without one, with the proxy (the route query every client starts with).
// A wrong secret is Degraded RocketMQAuthFailed (the secret never shown)
// and no workload runs; the right one connects, and every pod signs as the
// activity's ACL user (env from the same Secret).
func TestWrongRocketMQCredentialsRunNothing(t *testing.T) {
	needsAPIServer(t)
	for name, path := range map[string]func(t *testing.T, a *seckillv1alpha1.SeckillActivity){
		"through the name server": func(t *testing.T, a *seckillv1alpha1.SeckillActivity) {
			nameServer(t, a.Name, testenv.Get(t, "SECKILL_RMQ_NAMESRV"))(a)
		},
		"with the proxy": func(_ *testing.T, a *seckillv1alpha1.SeckillActivity) {
			a.Spec.Connections.RocketMQEndpointSecret.Key = "rmq-endpoint-real"
		},
	} {
		t.Run(name, func(t *testing.T) {
			sale := "rmq-auth-" + strings.ReplaceAll(name, " ", "-")
			s := newSale(t, sale, func(a *seckillv1alpha1.SeckillActivity) {
				path(t, a)
				a.Spec.Connections.RocketMQCredentials.SecretKeySecret.Key = "rmq-wrong-secret"
			})
			var cs corev1.Secret
			key := types.NamespacedName{Namespace: "default", Name: sale + "-conn"}
			require.NoError(t, k8sClient.Get(testCtx, key, &cs))
			cs.Data["rmq-endpoint-real"] = []byte(testenv.Get(t, "SECKILL_RMQ_ENDPOINT"))
			cs.Data["rmq-wrong-secret"] = []byte("not-the-secret")
			require.NoError(t, k8sClient.Update(testCtx, &cs))
			a := s.eventually("degraded by the credentials", func(a *seckillv1alpha1.SeckillActivity) bool {
				c := condition(a, seckillv1alpha1.ConditionDegraded)
				return c.Status == metav1.ConditionTrue && c.Reason == ReasonRocketMQAuth
			})
			require.NotContains(t, condition(a, seckillv1alpha1.ConditionDegraded).Message, "not-the-secret")
			var d appsv1.Deployment
			gateway := types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentGateway)}
			require.True(t, apierrors.IsNotFound(k8sClient.Get(testCtx, gateway, &d)))

			require.NoError(t, k8sClient.Get(testCtx, key, &cs))
			cs.Data["rmq-wrong-secret"] = cs.Data["rmq-secret-key"]
			require.NoError(t, k8sClient.Update(testCtx, &cs))
			s.eventually("connected", func(a *seckillv1alpha1.SeckillActivity) bool {
				return condition(a, seckillv1alpha1.ConditionDegraded).Reason == "Connected"
			})
			require.Eventually(t, func() bool { return k8sClient.Get(testCtx, gateway, &d) == nil }, 30*time.Second, 200*time.Millisecond)
			env := map[string]*corev1.EnvVarSource{}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.ValueFrom
			}
			require.Equal(t, "rmq-access-key", env[names.EnvRMQAccessKey].SecretKeyRef.Key)
			require.Equal(t, "rmq-wrong-secret", env[names.EnvRMQSecretKey].SecretKeyRef.Key)
		})
	}
}

// A name server that does not answer: Degraded RocketMQAdminFailed and no
// workload (its consumers would have no group to read).
func TestUnreachableNameServerRunsNothing(t *testing.T) {
	needsAPIServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	s := newSale(t, "iso-down", nameServer(t, "iso-down", closed))
	a := s.eventually("degraded", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionDegraded)
		return c.Status == metav1.ConditionTrue && c.Reason == ReasonRocketMQAdmin && strings.Contains(c.Message, closed)
	})
	var d appsv1.Deployment
	require.True(t, apierrors.IsNotFound(k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentGateway)}, &d)))

	// Deleting waits for the topics and groups to be deleted too, and says
	// why; skipping the archive (the broker is gone for good) lets it go.
	require.NoError(t, k8sClient.Delete(testCtx, s.get()))
	s.eventually("deletion held by the name server", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionDegraded)
		return c.Reason == ReasonRocketMQAdmin && strings.Contains(c.Message, "deleting the activity's topics")
	})
	s.update(func(a *seckillv1alpha1.SeckillActivity) {
		a.Annotations = map[string]string{AnnotationSkipArchive: "true"}
	})
	s.gone()
}
