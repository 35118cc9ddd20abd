package controllers

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
)

// versions are the resourceVersions of every object the activity's passes
// apply (Deployments, Services, PodDisruptionBudgets, CronJobs,
// ServiceAccounts, NetworkPolicies, the database roles' Secret), by kind and
// name.
func (s *sale) versions(a *seckillv1alpha1.SeckillActivity) map[string]string {
	s.t.Helper()
	out := map[string]string{}
	sel := client.MatchingLabels{"app.kubernetes.io/instance": a.Name}
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{},
		&batchv1.CronJobList{}, &corev1.ServiceAccountList{}, &networkingv1.NetworkPolicyList{}, &corev1.SecretList{}} {
		require.NoError(s.t, k8sClient.List(testCtx, list, client.InNamespace(a.Namespace), sel))
		items, err := meta.ExtractList(list)
		require.NoError(s.t, err)
		for _, it := range items {
			o := it.(client.Object)
			out[fmt.Sprintf("%T/%s", o, o.GetName())] = o.GetResourceVersion()
		}
	}
	return out
}

// A pass that changes nothing writes nothing: over several passes of an
// active sale (one a second here), no applied object's resourceVersion moves.
func TestPassesLeaveUnchangedObjectsUntouched(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "apply-unchanged", withPayments("apply-unchanged"))
	a := s.eventually("provisioned and active", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue && a.Status.Phase == seckillv1alpha1.PhaseActive
	})
	time.Sleep(2 * time.Second) // the first passes' writes (scaling, the secrets hash) are done
	before := s.versions(a)
	require.GreaterOrEqual(t, len(before), 20, "the activity's objects: %v", before)
	// Each pass samples PostgreSQL's commit counter into status: a new
	// sample time is a pass.
	seen := map[time.Time]bool{}
	require.Eventually(t, func() bool {
		if p := s.get().Status.Progress; p != nil && p.DatabaseCommits != nil {
			seen[p.DatabaseCommits.At.Time] = true
		}
		return len(seen) > 5
	}, 30*time.Second, 100*time.Millisecond, "five more passes")
	require.Equal(t, before, s.versions(a), "a pass that changes nothing must not write")
}
