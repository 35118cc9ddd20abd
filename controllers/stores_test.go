package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
)

// memStore is an ActivityStore in memory: the steps' table tests run
// without PostgreSQL or Redis (make test-unit).
type memStore struct {
	ActivityStore // a method the test did not expect panics
	provisionErr  error
	provisioned   map[int64]int64 // SKU → stock applied
	paused        bool
}

func (m *memStore) Provision(_ context.Context, _ int64, sku control.SKU, _ int64) (control.Provisioned, error) {
	if m.provisionErr != nil {
		return control.Provisioned{}, m.provisionErr
	}
	if m.provisioned[sku.ID] == sku.Stock {
		return control.Provisioned{Postgres: "UNCHANGED"}, nil
	}
	m.provisioned[sku.ID] = sku.Stock
	return control.Provisioned{Postgres: control.Applied}, nil
}

func (m *memStore) SetCompensationPaused(_ context.Context, _ int64, paused bool, _ string) (bool, error) {
	changed := m.paused != paused
	m.paused = paused
	return changed, nil
}

func stepActivity() *seckillv1alpha1.SeckillActivity {
	return &seckillv1alpha1.SeckillActivity{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n", Generation: 3},
		Spec:       seckillv1alpha1.SeckillActivitySpec{ActivityID: 7, SKUs: []seckillv1alpha1.SKUSpec{{ID: 1, Stock: 10}}},
	}
}

func drained(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The provision step: stock applied once per generation (an event when it
// changed anything), a store failure recorded in the condition and returned.
func TestProvisionStep(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		applied   map[int64]int64
		status    metav1.ConditionStatus
		reason    string
		events    int
		wantError bool
	}{
		{name: "first time", applied: map[int64]int64{}, status: metav1.ConditionTrue, reason: "Provisioned", events: 1},
		{name: "already applied", applied: map[int64]int64{1: 10}, status: metav1.ConditionTrue, reason: "Provisioned"},
		{name: "store fails", err: errors.New("redis down"), applied: map[int64]int64{}, status: metav1.ConditionFalse,
			reason: "ProvisioningFailed", wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(8)
			r := &SeckillActivityReconciler{Recorder: rec}
			act := stepActivity()
			err := r.provision(context.Background(), act, &memStore{provisionErr: tc.err, provisioned: tc.applied})
			require.Equal(t, tc.wantError, err != nil, "%v", err)
			c := meta.FindStatusCondition(act.Status.Conditions, seckillv1alpha1.ConditionStockProvisioned)
			require.NotNil(t, c)
			require.Equal(t, tc.status, c.Status)
			require.Equal(t, tc.reason, c.Reason)
			require.Equal(t, int64(3), c.ObservedGeneration, "stamped when evaluated")
			require.Len(t, drained(rec), tc.events)
		})
	}
}

// The backlog guard step over a backlog growing old and young again: it
// pauses past the threshold, holds down to half of it (hysteresis), then
// resumes — the flag, both conditions and one event per move.
func TestBacklogGuardStep(t *testing.T) {
	rec := events.NewFakeRecorder(8)
	r := &SeckillActivityReconciler{Recorder: rec}
	act := stepActivity()
	act.Spec.Scaling.CompensationPauseAfter = &metav1.Duration{Duration: time.Minute}
	store := &memStore{}
	for i, tc := range []struct {
		age    time.Duration
		paused bool
		events int
	}{
		{10 * time.Second, false, 0},
		{90 * time.Second, true, 1},
		{40 * time.Second, true, 0}, // above half the threshold: still paused
		{20 * time.Second, false, 1},
		{20 * time.Second, false, 0},
	} {
		require.NoError(t, r.guardBacklog(context.Background(), act, store, control.Backlog{Open: 5, OldestAge: tc.age}))
		require.Equal(t, tc.paused, store.paused, "step %d", i)
		require.Equal(t, tc.paused, conditionTrue(act, seckillv1alpha1.ConditionCompensationPaused), "step %d", i)
		require.Equal(t, !tc.paused, conditionTrue(act, seckillv1alpha1.ConditionBacklogHealthy), "step %d", i)
		require.Len(t, drained(rec), tc.events, "step %d", i)
	}
}
