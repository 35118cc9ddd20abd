package controllers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

func TestWindowState(t *testing.T) {
	start := time.Date(2026, 12, 12, 20, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	spec := func(paused bool) *seckillv1alpha1.SeckillActivitySpec {
		return &seckillv1alpha1.SeckillActivitySpec{Paused: paused,
			Schedule: seckillv1alpha1.Schedule{Start: metav1.NewTime(start), End: metav1.NewTime(end)}}
	}
	cases := []struct {
		name   string
		paused bool
		now    time.Time
		state  string
		next   time.Time
	}{
		{"before the start", false, start.Add(-time.Minute), redisstore.WindowNotStarted, start},
		{"at the start", false, start, redisstore.WindowActive, end},
		{"during", false, start.Add(30 * time.Minute), redisstore.WindowActive, end},
		{"paused during", true, start.Add(30 * time.Minute), redisstore.WindowPaused, end},
		{"paused before the start", true, start.Add(-time.Hour), redisstore.WindowPaused, end},
		{"at the end", false, end, redisstore.WindowEnded, time.Time{}},
		{"paused after the end", true, end.Add(time.Hour), redisstore.WindowEnded, time.Time{}},
	}
	for _, c := range cases {
		state, next := windowState(spec(c.paused), c.now)
		require.Equal(t, c.state, state, c.name)
		require.Equal(t, c.next, next, c.name)
	}
}
