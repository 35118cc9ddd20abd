package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// ProjectionKind names which order event a Projection applies.
type ProjectionKind int

// The order events the projector applies to the reservation hashes.
const (
	// ProjectCreated is ORDER_CREATED (project_order_created.lua).
	ProjectCreated ProjectionKind = iota + 1
	// ProjectRejected is the order's refusal (project_order_rejected.lua).
	ProjectRejected
	// ProjectCancelled is ORDER_CANCELLED (release_after_cancel.lua).
	ProjectCancelled
)

// Projection is one order event to apply to the Redis projection.
type Projection struct {
	Kind          ProjectionKind
	Slot          Slot
	ReservationID uuid.UUID
	// OrderID for ProjectCreated and ProjectCancelled.
	OrderID uuid.UUID
	// Reason for ProjectRejected.
	Reason string
}

// call is the script, keys and arguments that apply p.
func (p Projection) call(now time.Time, terminalTTL time.Duration) (*redis.Script, string, []string, []any, error) {
	sl, id := p.Slot, p.ReservationID
	switch p.Kind {
	case ProjectCreated:
		return scriptProjectOrderCreated, "project-order-created",
			[]string{sl.Reservation(id), sl.Counter(), sl.SendDue(), sl.Open()},
			[]any{id.String(), p.OrderID.String(), ms(now)}, nil
	case ProjectRejected:
		return scriptProjectRejected, "project-order-rejected",
			[]string{sl.Reservation(id), sl.SendDue()},
			[]any{id.String(), p.Reason, ms(now)}, nil
	case ProjectCancelled:
		return scriptReleaseAfterCancel, "release-after-cancel",
			[]string{sl.Reservation(id), sl.Stock(), sl.Counter(), sl.SendDue(), sl.Open()},
			[]any{id.String(), p.OrderID.String(), ms(now), terminalTTL.Milliseconds()}, nil
	}
	return nil, "", nil, nil, fmt.Errorf("projection of %s: unknown kind %d", id, p.Kind)
}

// project runs one projection alone (Run loads its script when Redis lost it).
func (s *Store) project(ctx context.Context, p Projection, now time.Time, terminalTTL time.Duration) (Result, error) {
	script, name, keys, args, err := p.call(now, terminalTTL)
	if err != nil {
		return Result{}, err
	}
	res, _, err := result(script.Run(ctx, s.c, keys, args...).Result())
	if err != nil {
		return Result{}, fmt.Errorf("running %s script: %w", name, err)
	}
	return res, nil
}

// Project applies ps in order in one pipeline — one round trip for a
// received batch of events instead of one per event — and answers each
// one's outcome as the single calls do (ProjectOrderCreated,
// ProjectOrderRejected, ReleaseAfterCancel). Each script still runs alone
// and atomically; a pipeline cut half-way leaves the calls it did not
// answer with an error, and their scripts answer a retry idempotently.
func (s *Store) Project(ctx context.Context, ps []Projection, now time.Time, terminalTTL time.Duration) ([]Result, []error) {
	res, errs := make([]Result, len(ps)), make([]error, len(ps))
	if len(ps) == 1 {
		res[0], errs[0] = s.project(ctx, ps[0], now, terminalTTL)
		return res, errs
	}
	calls := make([]scriptCall, 0, len(ps))
	at := make([]int, 0, len(ps)) // calls[j] is ps[at[j]]
	names := make([]string, len(ps))
	for i, p := range ps {
		script, name, keys, args, err := p.call(now, terminalTTL)
		if err != nil {
			errs[i] = err
			continue
		}
		names[i] = name
		calls = append(calls, scriptCall{script, keys, args})
		at = append(at, i)
	}
	vals, cerrs := s.evalPipelined(ctx, calls)
	for j, i := range at {
		var err error
		if res[i], _, err = result(vals[j], cerrs[j]); err != nil {
			errs[i] = fmt.Errorf("running %s script: %w", names[i], err)
		}
	}
	return res, errs
}

// ProjectOrderCreated runs project_order_created.lua.
func (s *Store) ProjectOrderCreated(ctx context.Context, sl Slot, reservationID, orderID uuid.UUID, now time.Time) (Result, error) {
	return s.project(ctx, Projection{Kind: ProjectCreated, Slot: sl, ReservationID: reservationID, OrderID: orderID}, now, 0)
}

// ProjectOrderRejected runs project_order_rejected.lua: the hash shows
// PostgreSQL's refusal and its reason until the unit is compensated.
func (s *Store) ProjectOrderRejected(ctx context.Context, sl Slot, reservationID uuid.UUID, reason string, now time.Time) (Result, error) {
	return s.project(ctx, Projection{Kind: ProjectRejected, Slot: sl, ReservationID: reservationID, Reason: reason}, now, 0)
}

// ReleaseAfterCancel runs release_after_cancel.lua.
func (s *Store) ReleaseAfterCancel(ctx context.Context, sl Slot, reservationID, orderID uuid.UUID, now time.Time, terminalTTL time.Duration) (Result, error) {
	return s.project(ctx, Projection{Kind: ProjectCancelled, Slot: sl, ReservationID: reservationID, OrderID: orderID}, now, terminalTTL)
}
