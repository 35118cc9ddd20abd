package kubectlseckill

import (
	"bytes"
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
)

func TestParseAndCheckArgs(t *testing.T) {
	for name, tc := range map[string]struct {
		args      []string
		cmd, rest []string
		ns        string
		bad       string
	}{
		"flags after":          {args: []string{"status", "flash", "-n", "shop"}, cmd: []string{"status", "flash"}, ns: "shop"},
		"flags before":         {args: []string{"--namespace=shop", "pause", "flash"}, cmd: []string{"pause", "flash"}, ns: "shop"},
		"add-stock":            {args: []string{"add-stock", "flash", "1", "50"}, cmd: []string{"add-stock", "flash", "1", "50"}},
		"runbook keeps flags":  {args: []string{"-n", "shop", "runbook", "flash", "verify", "-settled", "-n", "x"}, cmd: []string{"runbook", "flash", "verify"}, rest: []string{"-settled", "-n", "x"}, ns: "shop"},
		"unknown":              {args: []string{"sell", "flash"}, bad: `unknown command "sell"`},
		"no name":              {args: []string{"status"}, bad: "status: want 1 argument(s), got 0"},
		"zero units":           {args: []string{"add-stock", "flash", "1", "0"}, bad: "positive number of units"},
		"negative units":       {args: []string{"add-stock", "flash", "1", "--", "-5"}, bad: "positive number of units"},
		"sku not a number":     {args: []string{"add-stock", "flash", "one", "5"}, bad: `SKU "one" is not an id`},
		"runbook without verb": {args: []string{"runbook", "flash"}, bad: "runbook: want 2 argument(s), got 1"},
	} {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			ns := fs.String("n", "", "")
			fs.StringVar(ns, "namespace", "", "")
			cmd, rest, err := parseInterspersed(fs, tc.args)
			require.NoError(t, err)
			err = checkArgs(cmd, rest)
			if tc.bad != "" {
				require.ErrorContains(t, err, tc.bad)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.cmd, cmd)
			require.Equal(t, tc.rest, rest)
			require.Equal(t, tc.ns, *ns)
		})
	}
}

func activity(now time.Time) *seckillv1alpha1.SeckillActivity {
	return &seckillv1alpha1.SeckillActivity{
		ObjectMeta: metav1.ObjectMeta{Name: "flash", Namespace: "shop", Generation: 3},
		Spec: seckillv1alpha1.SeckillActivitySpec{ActivityID: 42,
			SKUs:     []seckillv1alpha1.SKUSpec{{ID: 1, Stock: 100}, {ID: 2, Stock: 10}},
			Schedule: seckillv1alpha1.Schedule{Start: metav1.NewTime(now.Add(-time.Minute)), End: metav1.NewTime(now.Add(9 * time.Minute))}},
		Status: seckillv1alpha1.SeckillActivityStatus{Phase: seckillv1alpha1.PhaseActive, ObservedGeneration: 3, Sold: "61/110",
			SKUs:             []seckillv1alpha1.SKUStatus{{ID: 1, Stock: 100, Sold: 60, Remaining: 33, OpenReservations: 7}, {ID: 2, Stock: 10, Sold: 1, Remaining: 9}},
			OpenReservations: 7, OldestBacklogAgeSeconds: 2, DesiredConsumers: 3, ReadyConsumers: 2, ScalingReason: "backlog 7 needs 3",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Selling", ObservedGeneration: 3},
				{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AsExpected", ObservedGeneration: 2}},
			LastReconcile: &seckillv1alpha1.ReconcileSummary{Result: "ANOMALIES", FinishedAt: metav1.NewTime(now.Add(-30 * time.Second)), Anomalies: 2, AutoRepaired: 1, Manual: 1}},
	}
}

func TestStatusReadsAsAPersonNeedsIt(t *testing.T) {
	now := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	warn := func(reason string, ago time.Duration) corev1.Event {
		return corev1.Event{Type: corev1.EventTypeWarning, Reason: reason, Message: reason + " happened", LastTimestamp: metav1.NewTime(now.Add(-ago))}
	}
	var events []corev1.Event
	for i := range 7 {
		events = append(events, warn("W"+string(rune('a'+i)), time.Duration(i)*time.Minute))
	}
	require.NoError(t, WriteStatus(&out, activity(now), events, now))
	s := out.String()
	for _, want := range []string{
		"shop/flash  activity 42  Active  generation 3, observed 3",
		"(ends in 9m0s)",
		"SKU  STOCK  SOLD  AVAILABLE  RESERVED\n1    100    60    33         7\n2    10     1     9          0",
		"backlog    7 open reservations, oldest 2s",
		"consumers  3 desired, 2 ready — backlog 7 needs 3",
		"reconcile  ANOMALIES at 2026-12-07T19:59:30Z: 2 anomalies, 1 repaired, 1 for a person",
		"Degraded  False  AsExpected (stale)",
		"0s ago\tWa", "4m0s ago\tWe",
	} {
		require.Contains(t, s, want)
	}
	require.NotContains(t, s, "Wf", "the five latest warnings only")
}

func plugin(t *testing.T, now time.Time, objs ...client.Object) (*Plugin, *bytes.Buffer) {
	scheme := runtime.NewScheme()
	require.NoError(t, seckillv1alpha1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	var out bytes.Buffer
	return &Plugin{Client: c, Namespace: "shop", Out: &out, Now: func() time.Time { return now }}, &out
}

func TestSwitchesChangeOnlyTheirField(t *testing.T) {
	now := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	ctx := context.Background()
	p, out := plugin(t, now, activity(now))
	read := func() *seckillv1alpha1.SeckillActivity {
		a, err := p.get(ctx, "flash")
		require.NoError(t, err)
		return a
	}
	require.NoError(t, p.AddStock(ctx, "flash", 2, 15))
	require.Equal(t, int64(25), read().Spec.SKUs[1].Stock)
	require.Equal(t, int64(100), read().Spec.SKUs[0].Stock)
	require.Contains(t, out.String(), "SKU 2 stock 10 → 25")
	var usage UsageError
	require.ErrorAs(t, p.AddStock(ctx, "flash", 9, 1), &usage, "no SKU 9")

	require.NoError(t, p.setPaused(ctx, "flash", true))
	require.True(t, read().Spec.Paused)
	require.NoError(t, p.setPaused(ctx, "flash", false))
	require.False(t, read().Spec.Paused)

	require.NoError(t, p.End(ctx, "flash"))
	require.True(t, read().Spec.Schedule.End.Equal(&metav1.Time{Time: now}))
	require.ErrorAs(t, p.End(ctx, "flash"), &usage, "already ended")
	require.True(t, strings.Contains(p.End(ctx, "flash").Error(), "already ended"))
	require.Error(t, p.AddStock(ctx, "nosuch", 1, 1))
}
