package controllers

import (
	"time"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// windowState is the window flag the gateway must obey now, and when it
// next changes by itself (zero: it does not).
func windowState(spec *seckillv1alpha1.SeckillActivitySpec, now time.Time) (string, time.Time) {
	start, end := spec.Schedule.Start.Time, spec.Schedule.End.Time
	switch {
	case !now.Before(end):
		return redisstore.WindowEnded, time.Time{}
	case spec.Paused:
		return redisstore.WindowPaused, end
	case now.Before(start):
		return redisstore.WindowNotStarted, start
	default:
		return redisstore.WindowActive, end
	}
}
