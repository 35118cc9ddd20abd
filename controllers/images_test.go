package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/names"
)

// Whoever may create a SeckillActivity cannot choose the code that runs
// with its Secrets: an image outside the operator's and its allowed
// prefixes runs nothing and says why; no image means the operator's.
func TestWorkloadImageIsTheOperatorsChoice(t *testing.T) {
	needsAPIServer(t)
	evil := newSale(t, "evil-image", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Workloads.Image = "evil.example/miner:latest" })
	a := evil.eventually("refused", func(a *seckillv1alpha1.SeckillActivity) bool {
		d := meta.FindStatusCondition(a.Status.Conditions, seckillv1alpha1.ConditionDegraded)
		return d != nil && d.Status == metav1.ConditionTrue && d.Reason == ReasonImageNotAllowed
	})
	require.Contains(t, meta.FindStatusCondition(a.Status.Conditions, seckillv1alpha1.ConditionDegraded).Message, "evil.example/miner:latest")
	var d appsv1.Deployment
	err := k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentGateway)}, &d)
	require.True(t, apierrors.IsNotFound(err), "nothing runs: %v", err)

	plain := newSale(t, "default-image", func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Workloads.Image = "" })
	a = plain.eventually("running", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentGateway)}, &d))
	require.Equal(t, "seckill/workloads:dev", d.Spec.Template.Spec.Containers[0].Image, "the operator's workload image")
	require.Empty(t, plain.get().Spec.Workloads.Image, "the manifest is not rewritten")
}

// Components removed from the spec are deleted: without paymentChannel no
// canceller, without paymentKeysSecret no payments Deployment or Service.
// withPayments turns on the payments workload and the canceller.
func withPayments(name string) func(*seckillv1alpha1.SeckillActivity) {
	return func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Connections.PaymentKeysSecret = &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name + "-conn"}, Key: "payment-keys"}
		a.Spec.PaymentChannel = &seckillv1alpha1.PaymentChannelSpec{URL: "http://payment-channel.example:8080"}
	}
}

func TestRemovedComponentsAreDeleted(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "prune", withPayments("prune"))
	a := s.eventually("running", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	get := func(name string, obj client.Object) error {
		return k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: name}, obj)
	}
	require.NoError(t, get(ObjectName(a, ComponentPayments), &appsv1.Deployment{}))
	require.NoError(t, get(ObjectName(a, ComponentPayments), &corev1.Service{}))
	require.NoError(t, get(ObjectName(a, ComponentCanceller), &appsv1.Deployment{}))

	s.update(func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.PaymentChannel = nil
		a.Spec.Connections.PaymentKeysSecret = nil
	})
	s.eventually("pruned", func(a *seckillv1alpha1.SeckillActivity) bool {
		for _, o := range []struct {
			c   string
			obj client.Object
		}{{ComponentPayments, &appsv1.Deployment{}}, {ComponentPayments, &corev1.Service{}}, {ComponentCanceller, &appsv1.Deployment{}}} {
			if err := get(ObjectName(a, o.c), o.obj); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	require.NoError(t, get(ObjectName(a, ComponentGateway), &appsv1.Deployment{}), "the others stay")
}

// Each component runs under its own ServiceAccount without an API token, a
// NetworkPolicy admits only what it serves, and metrics are never on the
// public Service.
func TestEachComponentIsIsolated(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "isolated", withPayments("isolated"))
	a := s.eventually("running", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	get := func(name string, obj client.Object) {
		t.Helper()
		require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: name}, obj), name)
	}
	ports := func(np *networkingv1.NetworkPolicy) []int32 {
		var out []int32
		for _, r := range np.Spec.Ingress {
			for _, p := range r.Ports {
				out = append(out, p.Port.IntVal)
			}
		}
		return out
	}
	for _, c := range []struct {
		component string
		ports     []int32
	}{
		{ComponentGateway, []int32{names.GatewayPort, names.MetricsPort}},
		{ComponentPayments, []int32{names.GatewayPort, names.MetricsPort}},
		{ComponentConsumer, []int32{names.MetricsPort}},
		{ComponentRelay, []int32{names.MetricsPort}},
		{ComponentReconcile, nil},
	} {
		name := ObjectName(a, c.component)
		var sa corev1.ServiceAccount
		get(name, &sa)
		require.False(t, *sa.AutomountServiceAccountToken, c.component)
		var np networkingv1.NetworkPolicy
		get(name, &np)
		require.Equal(t, c.component, np.Spec.PodSelector.MatchLabels[names.LabelComponent])
		require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
		require.Equal(t, c.ports, ports(&np), c.component)
		if c.component == ComponentReconcile {
			continue
		}
		var d appsv1.Deployment
		get(name, &d)
		require.Equal(t, name, d.Spec.Template.Spec.ServiceAccountName)
		require.False(t, *d.Spec.Template.Spec.AutomountServiceAccountToken, c.component)
	}
	var svc corev1.Service
	get(ObjectName(a, ComponentGateway), &svc)
	require.Len(t, svc.Spec.Ports, 1)
	require.Equal(t, "http", svc.Spec.Ports[0].TargetPort.StrVal, "the public Service never carries the metrics port")
	var d appsv1.Deployment
	get(ObjectName(a, ComponentGateway), &d)
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	require.Equal(t, ":9090", env[names.EnvMetricsAddr], "metrics on their own port")
}
