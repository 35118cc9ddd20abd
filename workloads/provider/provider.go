// Package provider is the payment channel as the canceller sees it, and a
// simulated channel for the tests and the demo: pay, query, close, refund,
// with knobs to delay or duplicate its success callbacks and to report a
// success after a close (design.md#payment-cancel).
package provider

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill-operator/workloads/ids"
)

// Paid is a success the channel knows of.
type Paid struct {
	TransactionID string
	AmountCents   int64
	Currency      string
	At            time.Time
}

// Channel is what the canceller asks, outside any transaction.
type Channel interface {
	// Name is the provider's name in payment_record.
	Name() string
	// Close closes the order's payment: afterwards the channel accepts no
	// payment for it. If it was paid already, Close returns the success.
	Close(ctx context.Context, order uuid.UUID) (*Paid, error)
	// Query reports the order's success, if any.
	Query(ctx context.Context, order uuid.UUID) (*Paid, error)
	// Refund returns a payment.
	Refund(ctx context.Context, transactionID string) error
}

// ErrClosed: the channel refuses a payment for a closed order.
var ErrClosed = errors.New("payment refused: the order's payment is closed")

// Sim is the simulated channel. Callbacks go to Deliver (the callback
// endpoint or the payment store directly).
type Sim struct {
	ProviderName string
	// Deliver receives each success callback (possibly late, possibly twice).
	Deliver func(ctx context.Context, order uuid.UUID, p Paid) error
	// CallbackDelay delays each callback; Duplicates sends this many extra copies.
	CallbackDelay time.Duration
	Duplicates    int
	// SuccessAfterClose makes Pay succeed even after Close (the channel's
	// own race: a success reported for an order the merchant closed).
	SuccessAfterClose bool

	mu       sync.Mutex
	paid     map[uuid.UUID]Paid
	closed   map[uuid.UUID]bool
	refunded map[string]bool
}

// Name implements Channel.
func (s *Sim) Name() string { return s.ProviderName }

// Pay charges the order amount in currency (what the merchant asked for)
// and sends the success callback (after the delay, with duplicates).
// Paying twice answers the first payment.
func (s *Sim) Pay(ctx context.Context, order uuid.UUID, amount int64, currency string) (Paid, error) {
	s.mu.Lock()
	if s.paid == nil {
		s.paid, s.closed, s.refunded = map[uuid.UUID]Paid{}, map[uuid.UUID]bool{}, map[string]bool{}
	}
	if p, ok := s.paid[order]; ok {
		s.mu.Unlock()
		return p, nil
	}
	if s.closed[order] && !s.SuccessAfterClose {
		s.mu.Unlock()
		return Paid{}, ErrClosed
	}
	// Unique across runs, like a real channel's: a rerun against the same
	// database must not reuse a recorded (provider, transaction) pair.
	p := Paid{TransactionID: s.ProviderName + "-" + ids.NewRandom().String(), AmountCents: amount, Currency: currency, At: time.Now()}
	s.paid[order] = p
	s.mu.Unlock()
	if s.Deliver == nil {
		return p, nil
	}
	if s.CallbackDelay > 0 {
		time.Sleep(s.CallbackDelay)
	}
	var firstErr error
	for i := 0; i <= s.Duplicates; i++ {
		if err := s.Deliver(ctx, order, p); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return p, firstErr
}

// Close implements Channel.
func (s *Sim) Close(_ context.Context, order uuid.UUID) (*Paid, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paid == nil {
		s.paid, s.closed, s.refunded = map[uuid.UUID]Paid{}, map[uuid.UUID]bool{}, map[string]bool{}
	}
	if p, ok := s.paid[order]; ok {
		return &p, nil
	}
	s.closed[order] = true
	return nil, nil
}

// Query implements Channel.
func (s *Sim) Query(_ context.Context, order uuid.UUID) (*Paid, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.paid[order]; ok {
		return &p, nil
	}
	return nil, nil
}

// Refund implements Channel.
func (s *Sim) Refund(_ context.Context, transactionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refunded == nil {
		s.refunded = map[string]bool{}
	}
	s.refunded[transactionID] = true
	return nil
}

// Refunded reports whether a transaction was refunded.
func (s *Sim) Refunded(transactionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refunded[transactionID]
}
