package gateway

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
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
//
// A breaker opened by a broker that went away waits for it to come back:
// OnOpen is told when it opens (the gateway then has the producer start a
// fresh client, retrying each second), and Reset closes it at once when
// that client is in — instead of a trial every cooldown on the client the
// restart broke.
type Breaker struct {
	cb       atomic.Pointer[gobreaker.TwoStepCircuitBreaker[struct{}]]
	settings func(name string) gobreaker.Settings
	gen      atomic.Int64 // the current breaker's generation (its name)

	mu        sync.Mutex
	openSince time.Time // zero while closed
	onOpen    func()
}

// errNotSent marks a released ticket: neither a success nor a failure.
var errNotSent = errors.New("the request did not send")

// errSendFailed is a failed send's outcome.
var errSendFailed = errors.New("send failed")

// NewBreaker opens after threshold consecutive failures, for cooldown.
func NewBreaker(threshold int, cooldown time.Duration) *Breaker {
	b := &Breaker{}
	b.settings = func(name string) gobreaker.Settings {
		return gobreaker.Settings{
			Name:        name,
			MaxRequests: 1,           // one half-open trial at a time
			Interval:    time.Minute, // the closed state's counts start afresh (consecutive failures are what trips it)
			Timeout:     cooldown,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(max(threshold, 1)) }, //nolint:gosec // a small positive count
			IsExcluded:  func(err error) bool { return errors.Is(err, errNotSent) },
			OnStateChange: func(name string, _, to gobreaker.State) {
				if name != b.name(b.gen.Load()) {
					return // a breaker Reset replaced: its late tickets change nothing
				}
				b.mu.Lock()
				opened := false
				switch {
				case to == gobreaker.StateClosed:
					b.openSince = time.Time{}
				case b.openSince.IsZero():
					b.openSince, opened = time.Now(), true
				}
				onOpen := b.onOpen
				b.mu.Unlock()
				if opened && onOpen != nil {
					go onOpen()
				}
			},
		}
	}
	b.cb.Store(gobreaker.NewTwoStepCircuitBreaker[struct{}](b.settings(b.name(0))))
	return b
}

func (b *Breaker) name(gen int64) string { return "entry-" + strconv.FormatInt(gen, 10) }

// OnOpen sets what runs (in its own goroutine) each time the breaker
// opens from closed.
func (b *Breaker) OnOpen(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onOpen = f
}

// Reset closes the breaker now, with fresh counts: the cause it opened
// for is known to be gone (a fresh producer client started). Tickets of
// the breaker it replaces still answer, without effect.
func (b *Breaker) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	gen := b.gen.Add(1)
	b.cb.Store(gobreaker.NewTwoStepCircuitBreaker[struct{}](b.settings(b.name(gen))))
	b.openSince = time.Time{}
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
	done, err := b.cb.Load().Allow()
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
	cb := b.cb.Load()
	switch cb.State() {
	case gobreaker.StateOpen:
		return true
	case gobreaker.StateHalfOpen:
		c := cb.Counts()
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
