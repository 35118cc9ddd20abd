package controllers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
)

func TestCreateAndReadWithDefaults(t *testing.T) {
	needsAPIServer(t)
	act := validActivity("create-read")
	require.NoError(t, k8sClient.Create(testCtx, act))
	t.Cleanup(func() { _ = k8sClient.Delete(testCtx, act) })

	var got seckillv1alpha1.SeckillActivity
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: "create-read"}, &got))
	require.Equal(t, int64(1001), got.Spec.ActivityID)
	require.Equal(t, int32(4), got.Spec.SKUs[0].Buckets)
	require.Equal(t, int32(1), got.Spec.SKUs[1].Buckets, "defaulted by the API server")
	require.Equal(t, 5*time.Minute, got.Spec.BusinessDeadline.Duration)
	require.Equal(t, 15*time.Minute, got.Spec.PaymentWindow.Duration)
	require.Equal(t, "single", got.Spec.Connections.Redis.Mode)
	require.Equal(t, int32(1), got.Spec.Scaling.MinConsumers)
	require.Equal(t, int32(8), got.Spec.Scaling.MaxConsumers)
	require.Equal(t, "*/10 * * * *", got.Spec.Reconcile.Schedule)
	require.Equal(t, 168*time.Hour, got.Spec.Retention.Duration)

	// The reconciler observes the manifest into status.
	require.Eventually(t, func() bool {
		if err := k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: "create-read"}, &got); err != nil {
			return false
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.Phase == seckillv1alpha1.PhasePending
	}, 20*time.Second, 100*time.Millisecond)
	require.Equal(t, "0/120", got.Status.Sold)
	require.Len(t, got.Status.SKUs, 2)
	require.Equal(t, int64(100), got.Status.SKUs[0].Remaining)
	c := meta.FindStatusCondition(got.Status.Conditions, seckillv1alpha1.ConditionStockProvisioned)
	require.NotNil(t, c)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, got.Generation, c.ObservedGeneration)
	// Its Secret does not exist: a condition with the reason, not a crash loop.
	require.Eventually(t, func() bool {
		_ = k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: "create-read"}, &got)
		d := meta.FindStatusCondition(got.Status.Conditions, seckillv1alpha1.ConditionDegraded)
		return d != nil && d.Status == metav1.ConditionTrue && d.Reason == ReasonSecretMissing
	}, 20*time.Second, 100*time.Millisecond)
	require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, seckillv1alpha1.ConditionDegraded).Message, "secret default/seckill-conn not found")
}

func TestInvalidManifestsAreRefusedNamingTheField(t *testing.T) {
	needsAPIServer(t)
	cases := []struct {
		name   string
		mutate func(a *seckillv1alpha1.SeckillActivity)
		want   string
	}{
		{"end before start", func(a *seckillv1alpha1.SeckillActivity) {
			a.Spec.Schedule.End = metav1.NewTime(a.Spec.Schedule.Start.Add(-time.Minute))
		}, "schedule.end must be after schedule.start"},
		{"negative stock", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[0].Stock = -1 }, "spec.skus[0].stock"},
		{"activity id zero", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.ActivityID = 0 }, "spec.activityID"},
		{"no SKUs", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs = nil }, "spec.skus"},
		{"duplicate SKU ids", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[1].ID = a.Spec.SKUs[0].ID }, "spec.skus[1]"},
		{"too many buckets", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[0].Buckets = 65 }, "spec.skus[0].buckets"},
		{"no price", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[0].PriceCents = 0 }, "spec.skus[0].priceCents"},
		{"no token key", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Connections.TokenKeySecret = nil }, "tokenKeySecret or tokenKeysSecret is required"},
		{"negative price", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[1].PriceCents = -5 }, "spec.skus[1].priceCents"},
		{"currency not ISO 4217", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Currency = "euro" }, "spec.currency"},
		{"min above max", func(a *seckillv1alpha1.SeckillActivity) {
			a.Spec.Scaling.MinConsumers, a.Spec.Scaling.MaxConsumers = 5, 2
		}, "scaling.maxConsumers must be at least scaling.minConsumers"},
		{"unknown redis mode", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Connections.Redis.Mode = "ring" }, "spec.connections.redis.mode"},
		{"payment channel not a URL", func(a *seckillv1alpha1.SeckillActivity) {
			a.Spec.PaymentChannel = &seckillv1alpha1.PaymentChannelSpec{URL: "ftp://x"}
		}, "spec.paymentChannel.url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := validActivity("invalid")
			c.mutate(a)
			err := k8sClient.Create(testCtx, a)
			require.Error(t, err)
			require.True(t, apierrors.IsInvalid(err), err.Error())
			require.Contains(t, err.Error(), c.want)
		})
	}
}

func TestImmutableFieldsAndStockOnlyGrows(t *testing.T) {
	needsAPIServer(t)
	act := validActivity("immutable")
	require.NoError(t, k8sClient.Create(testCtx, act))
	t.Cleanup(func() { _ = k8sClient.Delete(testCtx, act) })
	key := types.NamespacedName{Namespace: "default", Name: "immutable"}

	update := func(mutate func(a *seckillv1alpha1.SeckillActivity)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur seckillv1alpha1.SeckillActivity
			if err := k8sClient.Get(testCtx, key, &cur); err != nil {
				return err
			}
			mutate(&cur)
			return k8sClient.Update(testCtx, &cur)
		})
	}
	err := update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.ActivityID = 2002 })
	require.Error(t, err)
	require.Contains(t, err.Error(), "activityID is immutable")

	err = update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[0].Stock = 99 })
	require.Error(t, err)
	require.Contains(t, err.Error(), "stock may only grow")

	err = update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[0].Buckets = 8 })
	require.Error(t, err)
	require.Contains(t, err.Error(), "buckets is immutable")

	// Growing stock and pausing are accepted.
	require.NoError(t, update(func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.SKUs[0].Stock = 150
		a.Spec.Paused = true
	}))
	var got seckillv1alpha1.SeckillActivity
	require.Eventually(t, func() bool {
		return k8sClient.Get(testCtx, key, &got) == nil && got.Status.ObservedGeneration == got.Generation && got.Status.Sold == "0/170"
	}, 20*time.Second, 100*time.Millisecond)
}
