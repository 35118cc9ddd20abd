package outbox

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// The writer's side: an event is written inside the business transaction
// that decides it (design.md#outbox), by the same package that relays it.
var (
	// InsertSQL writes one event (sql/insert.sql); its arguments are
	// InsertArgs'. For a caller that queues its statements in a batch.
	InsertSQL = sqlfile.Must(sqlFiles, "insert")
	// TimerSQL writes an order's timeout-cancel timer, a delayed message due
	// at the order's expires_at (sql/timer_insert.sql); its arguments are
	// TimerArgs'.
	TimerSQL = sqlfile.Must(sqlFiles, "timer_insert")
)

// InsertArgs are InsertSQL's arguments for ev about the aggregate, to topic
// (a new event id; the aggregate id is the message key), written by the
// step whose W3C context is traceparent ("": untraced).
func InsertArgs(aggregateType string, aggregateID uuid.UUID, topic string, ev events.Event, traceparent string) ([]any, error) {
	payload, err := ev.Marshal()
	if err != nil {
		return nil, err
	}
	return []any{ids.NewRandom(), aggregateType, aggregateID, ev.Type(), topic, payload, traceparent}, nil
}

// TimerArgs are TimerSQL's arguments for the timer of order, to topic,
// written by the step whose W3C context is traceparent.
func TimerArgs(topic string, order uuid.UUID, timer events.CancelTimer, traceparent string) ([]any, error) {
	payload, err := timer.Marshal()
	if err != nil {
		return nil, err
	}
	return []any{ids.NewRandom(), topic, order, payload, traceparent}, nil
}

// Insert writes an event inside the caller's business transaction; the
// relay sends it, in the trace of ctx's span.
func Insert(ctx context.Context, tx pgx.Tx, aggregateType string, aggregateID uuid.UUID, topic string, ev events.Event) error {
	args, err := InsertArgs(aggregateType, aggregateID, topic, ev, tracing.Traceparent(ctx))
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, InsertSQL, args...); err != nil {
		return fmt.Errorf("writing %s outbox event: %w", ev.Type(), err)
	}
	return nil
}
