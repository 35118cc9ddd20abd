// Package lease holds what every leased worker shares (outbox relay,
// compensator, send-scanner): the lost-lease error and the retry backoff.
package lease

import (
	"errors"
	"math/rand/v2"
	"time"
)

// ErrLost means another worker owns the item now; the caller drops it (the
// owner finishes it, and every step is idempotent).
var ErrLost = errors.New("lease lost")

// Backoff is the delay before attempt+1: exponential from 200 ms, capped at
// one minute, with ±20 % jitter so workers do not retry in step.
//
// Why not cenkalti/backoff: its ExponentialBackOff is an iterator whose
// state is the attempts made so far, in one process. Here the attempt
// count is a column of the row being retried (outbox event, compensation
// task, send_due entry): the next try is scheduled in PostgreSQL or Redis
// and made by whichever worker claims it, possibly after a restart. A pure
// function of that count is what fits; an iterator would have to be
// rebuilt and stepped n times per call to give the same answer.
func Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := 200 * time.Millisecond
	for i := 1; i < attempt && d < time.Minute; i++ {
		d *= 2
	}
	d = min(d, time.Minute)
	jitter := 0.8 + 0.4*rand.Float64() //nolint:gosec // jitter, not a secret
	return time.Duration(float64(d) * jitter)
}
