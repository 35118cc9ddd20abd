// Package cancel is the timeout canceller (design.md#payment-cancel): an expired,
// unpaid order goes to CANCEL_PENDING, the payment channel is asked to close
// the payment outside any transaction, and only then, in one transaction,
// the order is CANCELLED — guarded by the absence of a successful payment —
// with its PostgreSQL stock released, a ledger row and an ORDER_CANCELLED
// outbox event (the projector releases Redis once). A success the channel
// reports instead is applied as a payment. Duplicate, early and late timer
// messages are harmless.
package cancel

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/states"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qOrderGet      = sqlfile.Must(sqlFiles, "order_get")
	qCancelPending = sqlfile.Must(sqlFiles, "cancel_pending")
	qCancelFinal   = sqlfile.Must(sqlFiles, "cancel_final")
	qStockRelease  = sqlfile.Must(sqlFiles, "stock_release")
	qLedgerRelease = sqlfile.Must(sqlFiles, "ledger_release")
	qTimerRearm    = sqlfile.Must(sqlFiles, "timer_rearm")
	qPaused        = sqlfile.Must(sqlFiles, "paused")
)

// Results.
const (
	Cancelled   = "CANCELLED"    // this call cancelled the order
	PaidInstead = "PAID_INSTEAD" // the channel had a success: applied as a payment
	Finished    = "FINISHED"     // already PAID, CANCELLED or refunding: nothing to do
	Early       = "EARLY"        // not expired yet: try again at RetryAt
	Paused      = "PAUSED"       // the backlog guard pauses time-driven actions
	Frozen      = "FROZEN"       // the reservation is frozen for manual review (design.md#runbook): the timer waits
	Unknown     = "UNKNOWN"      // the channel did not answer: stays CANCEL_PENDING, try again
)

// ErrNoOrder: the timer names no order.
var ErrNoOrder = errors.New("cancel timer for an unknown order")

// Outcome of one attempt.
type Outcome struct {
	Result  string
	RetryAt time.Time
}

// Canceller cancels expired orders.
type Canceller struct {
	Pool     *pgxpool.Pool
	Channel  provider.Channel
	Payments *payment.Store
	// EventsTopic is where ORDER_CANCELLED goes (default names.TopicOrderEvents).
	EventsTopic string
	// Wait is how long a paused or frozen timer waits before it looks
	// again (default 1 min).
	Wait time.Duration
	// Failpoint, when set, is called at after_cancel_pending (design.md#failpoints:
	// the order committed CANCEL_PENDING, the channel not yet asked); an
	// error it returns ends the attempt there. The failpoints build exits
	// the process there.
	Failpoint func(name string) error
}

func (c *Canceller) wait() time.Duration {
	if c.Wait > 0 {
		return c.Wait
	}
	return time.Minute
}

// rearmSpace names the re-armed timers' ids.
var rearmSpace = uuid.MustParse("6f1d7c0e-2b8a-4c55-9a51-0c1f3e0d9b27")

// RearmID is the id of the timer that replaces the delivered timer messageID.
func RearmID(messageID string) uuid.UUID { return uuid.NewSHA1(rearmSpace, []byte(messageID)) }

// Rearm writes the order's timer again through the outbox as a new delayed
// message on topic, due at, under an id derived from the delivered one's
// (RearmID): it reports whether this call wrote it. The caller then
// acknowledges the delivered timer.
func (c *Canceller) Rearm(ctx context.Context, messageID, topic string, order uuid.UUID, at time.Time) (bool, error) {
	tag, err := c.Pool.Exec(ctx, qTimerRearm, RearmID(messageID), topic, order, at)
	if err != nil {
		return false, fmt.Errorf("re-arming the timer of order %s: %w", order, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Handle runs one timer for order.
func (c *Canceller) Handle(ctx context.Context, order uuid.UUID) (Outcome, error) {
	var (
		status        states.OrderStatus
		expires       time.Time
		activity, sku int64
		reservation   uuid.UUID
		bucket        int
		amount        int64
		resStatus     states.ReservationStatus
	)
	err := c.Pool.QueryRow(ctx, qOrderGet, order).Scan(&status, &expires, &activity, &sku, &reservation, &bucket, &amount, &resStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return Outcome{}, fmt.Errorf("%w: %s", ErrNoOrder, order)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("reading order %s: %w", order, err)
	}
	if status == states.OrderPaid || status.Ended() {
		return Outcome{Result: Finished}, nil
	}
	if resStatus == states.ReservationManualReview {
		return Outcome{Result: Frozen, RetryAt: time.Now().Add(c.wait())}, nil
	}
	if status != states.OrderCancelPending {
		if time.Now().Before(expires) {
			return Outcome{Result: Early, RetryAt: expires}, nil
		}
		var paused bool
		if err := c.Pool.QueryRow(ctx, qPaused, activity).Scan(&paused); err != nil {
			return Outcome{}, fmt.Errorf("reading the pause flag: %w", err)
		}
		if paused {
			return Outcome{Result: Paused, RetryAt: time.Now().Add(c.wait())}, nil
		}
		var id uuid.UUID
		err := c.Pool.QueryRow(ctx, qCancelPending, order).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			// Paid or cancelled meanwhile (or PostgreSQL's clock says not
			// expired yet): the next attempt finds out.
			return Outcome{Result: Early, RetryAt: time.Now().Add(time.Second)}, nil
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("marking order %s CANCEL_PENDING: %w", order, err)
		}
		if c.Failpoint != nil {
			if err := c.Failpoint("after_cancel_pending"); err != nil {
				return Outcome{}, err
			}
		}
	}
	// Outside any transaction: close the payment at the channel.
	paid, err := c.Channel.Close(ctx, order)
	if err != nil {
		// Unknown is not "not paid": the order stays CANCEL_PENDING (a
		// callback may still pay it) and the timer comes back.
		return Outcome{Result: Unknown, RetryAt: time.Now().Add(10 * time.Second)}, nil //nolint:nilerr // an answer, not a failure
	}
	if paid != nil {
		// The channel has a success: it wins (CANCEL_PENDING → PAID).
		if _, err := c.Payments.Apply(ctx, payment.Callback{Provider: c.Channel.Name(), TransactionID: paid.TransactionID,
			OrderID: order, AmountCents: paid.AmountCents, Currency: paid.Currency, PaidAt: paid.At}); err != nil {
			return Outcome{}, fmt.Errorf("applying the channel's payment of order %s: %w", order, err)
		}
		return Outcome{Result: PaidInstead}, nil
	}
	result := Finished
	err = pgx.BeginTxFunc(ctx, c.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var id uuid.UUID
		err := tx.QueryRow(ctx, qCancelFinal, order).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // a payment was recorded meanwhile, or another canceller finished
		}
		if err != nil {
			return fmt.Errorf("cancelling order %s: %w", order, err)
		}
		tag, err := tx.Exec(ctx, qStockRelease, activity, sku)
		if err != nil {
			return fmt.Errorf("releasing the stock of order %s: %w", order, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("releasing the stock of order %s: no occupied unit", order)
		}
		if _, err := tx.Exec(ctx, qLedgerRelease, activity, sku, reservation, order); err != nil {
			return fmt.Errorf("writing the RELEASE ledger row of order %s: %w", order, err)
		}
		topic := c.EventsTopic
		if topic == "" {
			topic = names.TopicOrderEvents
		}
		if err := outbox.Insert(ctx, tx, "ORDER", order, topic,
			events.NewOrderCancelled(order, reservation, activity, sku, bucket)); err != nil {
			return err
		}
		result = Cancelled
		return nil
	})
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Result: result}, nil
}
