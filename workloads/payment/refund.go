package payment

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill-operator/workloads/provider"
)

var (
	qRefundsDue = mustSQL("refunds_due")
	qRefundDone = mustSQL("refund_done")
)

// Refund asks the channel to refund the payments in the refund flow (a
// success reported for a cancelled order) and records each confirmed one as
// REFUNDED. The channel's refund is keyed by its transaction id, so asking
// twice (two workers, a crash before the update) refunds once. A refund the
// channel does not confirm stays REFUNDING for the next round.
func (s *Store) Refund(ctx context.Context, ch provider.Channel, limit int) (int, error) {
	rows, err := s.Pool.Query(ctx, qRefundsDue, ch.Name(), limit)
	if err != nil {
		return 0, fmt.Errorf("reading due refunds: %w", err)
	}
	type due struct {
		id uuid.UUID
		tx string
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (due, error) {
		var d due
		return d, r.Scan(&d.id, &d.tx)
	})
	if err != nil {
		return 0, fmt.Errorf("reading due refunds: %w", err)
	}
	n := 0
	for _, d := range list {
		if err := ch.Refund(ctx, d.tx); err != nil {
			continue // unknown: asked again next round
		}
		if _, err := s.Pool.Exec(ctx, qRefundDone, d.id); err != nil {
			return n, fmt.Errorf("recording the refund of payment %s: %w", d.id, err)
		}
		n++
	}
	return n, nil
}
