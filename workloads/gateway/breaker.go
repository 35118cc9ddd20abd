package gateway

import (
	"sync"
	"time"
)

// Breaker is the entry circuit breaker of seed §11.1 row 2: after Threshold
// consecutive send failures it opens and new reservations are refused for
// Cooldown; then one trial request is let through (half-open), and a success
// closes it again.
type Breaker struct {
	Threshold int
	Cooldown  time.Duration

	mu        sync.Mutex
	failures  int
	openUntil time.Time
	trial     bool
}

// Allow reports whether a new reservation may start now.
func (b *Breaker) Allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < b.Threshold {
		return true
	}
	if now.Before(b.openUntil) || b.trial {
		return false
	}
	b.trial = true // half-open: exactly one trial
	return true
}

// Record notes the outcome of a send.
func (b *Breaker) Record(ok bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
	if ok {
		b.failures = 0
		return
	}
	b.failures++
	if b.failures >= b.Threshold {
		b.openUntil = now.Add(b.Cooldown)
	}
}

// Open reports whether the breaker refuses new reservations.
func (b *Breaker) Open(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures >= b.Threshold && now.Before(b.openUntil)
}
