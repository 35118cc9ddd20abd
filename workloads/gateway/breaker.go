package gateway

import (
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Breaker is the entry circuit breaker of design.md#faults row 2, on
// sony/gobreaker's two-step breaker: after threshold consecutive send
// failures it opens and new reservations are refused for cooldown; then
// one trial request is let through (half-open), and a success closes it
// again, a failure opens it for another cooldown.
//
// Every Allow that lets a request through hands out a Ticket that is
// answered exactly once: Record with the send's outcome, or Release when
// the request never reached a send (sold out, a replay, a closed window, a
// Redis error, a client gone). A released ticket is excluded from the
// counts, so a half-open trial that took another path gives its place
// back at once — the breaker can never stay half-open because one request
// did not send (the "503 forever" defect of the hand-written breaker this
// replaced). The gateway releases in a defer, so no path forgets.
type Breaker struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]

	mu        sync.Mutex
	openSince time.Time // zero while closed
}

// errNotSent marks a released ticket: neither a success nor a failure.
var errNotSent = errors.New("the request did not send")

// errSendFailed is a failed send's outcome.
var errSendFailed = errors.New("send failed")

// NewBreaker opens after threshold consecutive failures, for cooldown.
func NewBreaker(threshold int, cooldown time.Duration) *Breaker {
	b := &Breaker{}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "entry",
		MaxRequests: 1,           // one half-open trial at a time
		Interval:    time.Minute, // the closed state's counts start afresh (consecutive failures are what trips it)
		Timeout:     cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(max(threshold, 1)) }, //nolint:gosec // a small positive count
		IsExcluded:  func(err error) bool { return errors.Is(err, errNotSent) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			b.mu.Lock()
			defer b.mu.Unlock()
			switch {
			case to == gobreaker.StateClosed:
				b.openSince = time.Time{}
			case b.openSince.IsZero():
				b.openSince = time.Now()
			}
		},
	})
	return b
}

// Ticket is what Allow hands out; answer it once (Record or Release).
type Ticket struct {
	once *sync.Once
	done func(error)
}

func (t Ticket) answer(err error) {
	if t.once != nil {
		t.once.Do(func() { t.done(err) })
	}
}

// Allow reports whether a new reservation may start now, and its ticket.
func (b *Breaker) Allow() (bool, Ticket) {
	done, err := b.cb.Allow()
	if err != nil {
		return false, Ticket{}
	}
	return true, Ticket{once: &sync.Once{}, done: done}
}

// Release answers a ticket whose request did not send: not counted.
func (b *Breaker) Release(t Ticket) { t.answer(errNotSent) }

// Record answers a ticket with its send's outcome.
func (b *Breaker) Record(t Ticket, ok bool) {
	if ok {
		t.answer(nil)
		return
	}
	t.answer(errSendFailed)
}

// Open reports whether the breaker refuses new reservations now: open and
// cooling down, or half-open with its trial in flight.
func (b *Breaker) Open() bool {
	switch b.cb.State() {
	case gobreaker.StateOpen:
		return true
	case gobreaker.StateHalfOpen:
		c := b.cb.Counts()
		return c.Requests > c.TotalExclusions
	}
	return false
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
