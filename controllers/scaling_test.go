package controllers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecideScale(t *testing.T) {
	base := ScaleInput{Current: 2, Min: 1, Max: 10, TargetDrain: time.Minute, Live: 2, P50: 10 * time.Millisecond,
		LatencyBudget: 100 * time.Millisecond, SinceLastScale: time.Hour}
	cases := []struct {
		name   string
		change func(*ScaleInput)
		want   int32
		reason string
	}{
		{"no backlog shrinks by one after the hysteresis", func(*ScaleInput) {}, 1, "shrinking by one"},
		{"no backlog right after a resize holds", func(in *ScaleInput) { in.SinceLastScale = time.Minute }, 2, "holding at 2"},
		{"a shorter stabilization shrinks sooner", func(in *ScaleInput) { in.SinceLastScale, in.ScaleDownAfter = time.Minute, 30*time.Second }, 1, "shrinking by one"},
		{"a longer stabilization holds longer", func(in *ScaleInput) { in.SinceLastScale, in.ScaleDownAfter = time.Hour, 2*time.Hour }, 2, "shrinks after 2h0m0s"},
		{"never below min", func(in *ScaleInput) { in.Current = 1 }, 1, ""},
		// 100/s per consumer, 60 s drain: 6000 per consumer.
		{"backlog within reach of the current consumers", func(in *ScaleInput) { in.Backlog = 12000 }, 2, "needs 2"},
		{"a larger backlog scales up", func(in *ScaleInput) { in.Backlog = 24000 }, 4, "needs 4"},
		{"growth waits until the last resize took effect", func(in *ScaleInput) { in.Backlog, in.SinceLastScale = 24000, 2*time.Second }, 2, "grows again after 10s"},
		{"an old backlog adds one only once per interval", func(in *ScaleInput) {
			in.Backlog, in.OldestAge, in.SinceLastScale = 10, 2*time.Minute, time.Second
		}, 2, "grows again after"},
		{"growth at most doubles per step", func(in *ScaleInput) { in.Backlog = 60000 }, 5, "at most doubling"},
		{"never above max", func(in *ScaleInput) { in.Current = 8; in.Backlog = 600000 }, 10, "limited by maxConsumers"},
		{"capped by PostgreSQL's capacity", func(in *ScaleInput) { in.Backlog = 24000; in.Capacity = 300 }, 3, "PostgreSQL sustains 300"},
		{"saturated PostgreSQL: no growth", func(in *ScaleInput) { in.Backlog = 24000; in.P99 = 150 * time.Millisecond }, 2, "saturated"},
		{"overloaded PostgreSQL: one fewer at once", func(in *ScaleInput) {
			in.Backlog = 24000
			in.Current = 4
			in.P99 = 250 * time.Millisecond
			in.SinceLastScale = 11 * time.Second
		}, 3, "overloaded"},
		{"overloaded right after a resize: one step at a time", func(in *ScaleInput) {
			in.Backlog = 24000
			in.Current = 4
			in.P99 = 250 * time.Millisecond
			in.SinceLastScale = time.Second
		}, 4, "needs 4"},
		{"old backlog adds one", func(in *ScaleInput) { in.Backlog = 10; in.OldestAge = 2 * time.Minute }, 3, "needs 3"},
		{"batching consumers: their committed rate, above 1/p50", func(in *ScaleInput) { in.Rate, in.Backlog = 2000, 240000 }, 4, "1000 orders/s per consumer needs 4"},
		{"a trickle: 1/p50, above the committed rate", func(in *ScaleInput) { in.Rate, in.Backlog = 20, 12000 }, 2, "100 orders/s per consumer needs 2"},
		{"no heartbeat yet: assumed rate", func(in *ScaleInput) { in.Live, in.P50, in.Backlog = 0, 0, 6000 }, 2, "50 orders/s per consumer needs 2"},
		{"from zero replicas", func(in *ScaleInput) { in.Current, in.Backlog = 0, 60000 }, 10, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := base
			c.change(&in)
			d := DecideScale(in)
			require.Equal(t, c.want, d.Desired, d.Reason)
			require.Contains(t, d.Reason, c.reason)
		})
	}
}

// Fed the same situation again and again, the decision does not flap.
func TestDecideScaleDoesNotFlap(t *testing.T) {
	in := ScaleInput{Current: 4, Min: 1, Max: 10, TargetDrain: time.Minute, Live: 4, P50: 10 * time.Millisecond,
		LatencyBudget: 100 * time.Millisecond, Backlog: 20000}
	var seen []int32
	for i := 0; i < 20; i++ {
		d := DecideScale(in)
		if d.Desired != in.Current {
			in.SinceLastScale = 0
		} else {
			in.SinceLastScale += 30 * time.Second
		}
		in.Current = d.Desired
		seen = append(seen, d.Desired)
	}
	for _, n := range seen {
		require.Equal(t, int32(4), n, "%v", seen)
	}
}
