package gateway

import (
	"sync"
	"time"
)

// Breaker is the entry circuit breaker of seed §11.1 row 2: after Threshold
// consecutive send failures it opens and new reservations are refused for
// Cooldown; then one trial request is let through (half-open), and a success
// closes it again, a failure opens it for another Cooldown.
//
// The trial is a lease, not a flag: a trial request that never reaches a
// send (sold out, a replay, a closed window, a Redis error, a client gone)
// gives it back with Release, and a trial nobody reports on expires after
// TrialLease. Either way the breaker half-opens again on its own schedule —
// it can never stay open because one request took another path.
type Breaker struct {
	Threshold int
	Cooldown  time.Duration
	// TrialLease bounds a half-open trial with no outcome (default: Cooldown).
	TrialLease time.Duration

	mu         sync.Mutex
	failures   int
	openUntil  time.Time
	trialUntil time.Time // zero: no trial in flight
	openSince  time.Time // zero while closed
}

// Ticket is what Allow hands out: whether the request is the half-open trial.
type Ticket struct{ trial bool }

// Allow reports whether a new reservation may start now, and its ticket.
func (b *Breaker) Allow(now time.Time) (bool, Ticket) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < b.Threshold {
		return true, Ticket{}
	}
	if now.Before(b.openUntil) || now.Before(b.trialUntil) {
		return false, Ticket{}
	}
	lease := b.TrialLease
	if lease <= 0 {
		lease = b.Cooldown
	}
	b.trialUntil = now.Add(lease) // half-open: one trial at a time
	return true, Ticket{trial: true}
}

// Release gives back a trial that did not send: the next request may try.
func (b *Breaker) Release(t Ticket) {
	if !t.trial {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trialUntil = time.Time{}
}

// Record notes the outcome of a send.
func (b *Breaker) Record(ok bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trialUntil = time.Time{}
	if ok {
		b.failures = 0
		b.openSince = time.Time{}
		return
	}
	b.failures++
	if b.failures >= b.Threshold {
		b.openUntil = now.Add(b.Cooldown)
		if b.openSince.IsZero() {
			b.openSince = now
		}
	}
}

// Open reports whether the breaker refuses new reservations now: open and
// cooling down, or half-open with a trial in flight.
func (b *Breaker) Open(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures >= b.Threshold && (now.Before(b.openUntil) || now.Before(b.trialUntil))
}

// OpenFor is how long the breaker has not been closed (0 while closed).
func (b *Breaker) OpenFor(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openSince.IsZero() {
		return 0
	}
	return now.Sub(b.openSince)
}
