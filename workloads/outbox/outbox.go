// Package outbox is the transactional outbox (design.md#outbox), both sides:
// the writer (write.go: an event, or an order's cancel timer, inserted in the
// business transaction that decides it — the order consumer's, payment's,
// the canceller's) and the relay (leased claims with SKIP LOCKED, sends
// outside any transaction, SENT or RETRY with exponential backoff, reclaim of
// expired leases, MANUAL after a cap).
package outbox

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/lease"

	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qBacklog  = sqlfile.Must(sqlFiles, "backlog")
	qClaim    = sqlfile.Must(sqlFiles, "claim")
	qSent     = sqlfile.Must(sqlFiles, "sent")
	qSentMany = sqlfile.Must(sqlFiles, "sent_many")
	qRetry    = sqlfile.Must(sqlFiles, "retry")
)

// Event is one claimed outbox row.
type Event struct {
	EventID       uuid.UUID
	AggregateType string
	AggregateID   uuid.UUID
	EventType     string
	SchemaVersion int
	Topic         string
	MessageKey    string
	Payload       json.RawMessage
	DeliverAt     *time.Time
	Attempt       int
	// LeaseExpired: claimed from another relay's lease that ran out.
	LeaseExpired bool
	// Traceparent is the W3C context of the step that wrote the event
	// ("" untraced): the parent of the relay's send (design.md#traces).
	Traceparent string
}

// Store claims and settles outbox events for one relay (its lease owner id).
type Store struct {
	Pool  *pgxpool.Pool
	Owner string
	Lease time.Duration
	// MaxAttempts is the cap after which an event goes MANUAL.
	MaxAttempts int
	// DBNow is the claim's clock for tests (a lease made to run out
	// without a sleep); nil, as in production: PostgreSQL's.
	DBNow func() time.Time
}

// dbNow is DBNow's time, or nil (NULL: the database's clock).
func (s *Store) dbNow() *time.Time {
	if s.DBNow == nil {
		return nil
	}
	t := s.DBNow()
	return &t
}

func interval(d time.Duration) string { return fmt.Sprintf("%d milliseconds", d.Milliseconds()) }

// Claim leases up to limit due events.
func (s *Store) Claim(ctx context.Context, limit int) ([]Event, error) {
	rows, err := s.Pool.Query(ctx, qClaim, limit, s.Owner, interval(s.Lease), s.dbNow())
	if err != nil {
		return nil, fmt.Errorf("claiming outbox batch: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.EventID, &e.AggregateType, &e.AggregateID, &e.EventType, &e.SchemaVersion, &e.Topic,
			&e.MessageKey, &e.Payload, &e.DeliverAt, &e.Attempt, &e.LeaseExpired, &e.Traceparent)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("claiming outbox batch: %w", err)
	}
	return out, nil
}

// MarkSent settles a successful send.
func (s *Store) MarkSent(ctx context.Context, id uuid.UUID) error {
	tag, err := s.Pool.Exec(ctx, qSent, id, s.Owner)
	if err != nil {
		return fmt.Errorf("marking outbox event %s sent: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("marking outbox event %s sent: %w", id, lease.ErrLost)
	}
	return nil
}

// MarkSentMany finishes the sent events of a batch in one round trip; an
// event whose lease was lost meanwhile stays with its new owner. It returns
// how many it finished.
func (s *Store) MarkSentMany(ctx context.Context, ids []uuid.UUID) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := s.Pool.Exec(ctx, qSentMany, ids, s.Owner)
	if err != nil {
		return 0, fmt.Errorf("marking %d outbox events sent: %w", len(ids), err)
	}
	return tag.RowsAffected(), nil
}

// MarkRetry settles a failed or unknown send; it returns the new status
// (RETRY, or MANUAL past the cap).
func (s *Store) MarkRetry(ctx context.Context, id uuid.UUID, attempt int, sendErr error) (string, error) {
	var status string
	err := s.Pool.QueryRow(ctx, qRetry, id, s.Owner, interval(lease.Backoff(attempt)), sendErr.Error(), s.MaxAttempts).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("scheduling retry of outbox event %s: %w", id, lease.ErrLost)
	}
	if err != nil {
		return "", fmt.Errorf("scheduling retry of outbox event %s: %w", id, err)
	}
	return status, nil
}

// Backlog counts the outbox events still to be done and the age of the oldest.
func (s *Store) Backlog(ctx context.Context) (int64, time.Duration, error) {
	var n int64
	var age float64
	if err := s.Pool.QueryRow(ctx, qBacklog).Scan(&n, &age); err != nil {
		return 0, 0, fmt.Errorf("measuring the outbox events backlog: %w", err)
	}
	return n, time.Duration(age * float64(time.Second)), nil
}

var qReclaim = sqlfile.Must(sqlFiles, "reclaim")

// Reclaim makes a SENDING event whose lease expired before expiredBefore due
// again at once; false when it is no longer in that state.
func Reclaim(ctx context.Context, pool *pgxpool.Pool, eventID uuid.UUID, expiredBefore time.Time) (bool, error) {
	rows, err := pool.Query(ctx, qReclaim, eventID, expiredBefore)
	if err != nil {
		return false, fmt.Errorf("reclaiming outbox event %s: %w", eventID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return false, fmt.Errorf("reclaiming outbox event %s: %w", eventID, err)
	}
	return len(ids) == 1, nil
}
