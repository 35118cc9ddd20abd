package controllers

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
)

// kstatusOf is what Argo CD, Flux and kubectl's kstatus make of act.
func kstatusOf(t *testing.T, act *seckillv1alpha1.SeckillActivity) status.Status {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(act)
	require.NoError(t, err)
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	require.NoError(t, err)
	return res.Status
}

// What each pass's outcome reads as to GitOps tools: Current only when the
// judged generation is provisioned and running (or the sale is over),
// InProgress while the operator works toward it or has not judged the
// current generation, Failed when the pass ended on a failure.
func TestHealthReadsAsKstatus(t *testing.T) {
	provisioned := func(act *seckillv1alpha1.SeckillActivity, gen int64) {
		setCondition(act, seckillv1alpha1.ConditionStockProvisioned, true, "Provisioned", "")
		for i := range act.Status.Conditions {
			act.Status.Conditions[i].ObservedGeneration = gen
		}
	}
	for _, tc := range []struct {
		name    string
		phase   seckillv1alpha1.Phase
		prov    bool
		ready   bool // WorkloadsReady
		stalled error
		bump    bool // the spec changed after the pass
		want    status.Status
		isReady bool
	}{
		{name: "provisioning", phase: seckillv1alpha1.PhaseProvisioning, want: status.InProgressStatus},
		{name: "pods starting", phase: seckillv1alpha1.PhaseActive, prov: true, want: status.InProgressStatus},
		{name: "selling", phase: seckillv1alpha1.PhaseActive, prov: true, ready: true, want: status.CurrentStatus, isReady: true},
		{name: "scheduled", phase: seckillv1alpha1.PhaseScheduled, prov: true, ready: true, want: status.CurrentStatus, isReady: true},
		{name: "sale paused", phase: seckillv1alpha1.PhasePaused, prov: true, ready: true, want: status.CurrentStatus, isReady: true},
		{name: "draining", phase: seckillv1alpha1.PhaseDraining, prov: true, ready: true, want: status.InProgressStatus},
		{name: "final reconcile", phase: seckillv1alpha1.PhaseReconciling, prov: true, ready: true, want: status.InProgressStatus},
		{name: "completed", phase: seckillv1alpha1.PhaseCompleted, prov: true, want: status.CurrentStatus, isReady: true},
		{name: "broken secret", phase: seckillv1alpha1.PhaseActive, prov: true, ready: true,
			stalled: &connError{ReasonSecretMissing, errors.New("secret n/pg has no key dsn")}, want: status.FailedStatus},
		{name: "stock decrease refused", phase: seckillv1alpha1.PhaseFailed, prov: true, want: status.FailedStatus},
		{name: "spec changed since", phase: seckillv1alpha1.PhaseActive, prov: true, ready: true, bump: true, want: status.InProgressStatus, isReady: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act := stepActivity()
			act.Status.Phase = tc.phase
			if tc.prov {
				provisioned(act, act.Generation)
			}
			setCondition(act, seckillv1alpha1.ConditionWorkloadsReady, tc.ready, "x", "")
			health(act, tc.stalled)
			require.Equal(t, act.Generation, act.Status.ObservedGeneration)
			if tc.bump {
				act.Generation++
			}
			require.Equal(t, tc.want, kstatusOf(t, act))
			require.Equal(t, tc.isReady, conditionTrue(act, seckillv1alpha1.ConditionReady))
			for _, typ := range []string{seckillv1alpha1.ConditionReady, seckillv1alpha1.ConditionReconciling, seckillv1alpha1.ConditionStalled} {
				c := findCondition(act, typ)
				require.NotNil(t, c, typ)
				require.Equal(t, act.Status.ObservedGeneration, c.ObservedGeneration, "%s stamped when evaluated", typ)
			}
		})
	}
}

// A stock provisioned for an older generation is not this one's.
func TestProvisionedNowIsAboutTheCurrentGeneration(t *testing.T) {
	act := stepActivity()
	setCondition(act, seckillv1alpha1.ConditionStockProvisioned, true, "Provisioned", "")
	require.True(t, provisionedNow(act))
	act.Generation++
	require.False(t, provisionedNow(act))
}

func findCondition(act *seckillv1alpha1.SeckillActivity, typ string) *metav1.Condition {
	for i := range act.Status.Conditions {
		if act.Status.Conditions[i].Type == typ {
			return &act.Status.Conditions[i]
		}
	}
	return nil
}
