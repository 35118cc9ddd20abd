package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/reconcile"
)

// Retention deletes only what can no longer be needed: the activity's own
// outbox events sent before the cut-off (not an open order's cancel timer,
// which a re-arm copies), its finished inbox rows before the cut-off (not
// one still PROCESSING) — never another activity's, never an unsent event.
func TestRetentionDeletesOnlyWhatIsDone(t *testing.T) {
	job, _, activity, _ := setup(t)
	other := activity + 1
	ctx := context.Background()
	pool := job.Pool
	now := time.Now()
	old, recent := now.Add(-8*24*time.Hour), now.Add(-24*time.Hour)

	order := func(status string) uuid.UUID {
		id := ids.NewRandom()
		_, err := pool.Exec(ctx, `INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, status, expires_at)
			VALUES ($1, $2, 1, $3, $4, $5, $6, now())`, id, activity, time.Now().UnixNano(), ids.NewRandom(), ids.NewRandom(), status)
		require.NoError(t, err)
		return id
	}
	event := func(act int64, typ, status string, sentAt time.Time, aggregate uuid.UUID) uuid.UUID {
		id := ids.NewRandom()
		var sent *time.Time
		if status == "SENT" {
			sent = &sentAt
		}
		_, err := pool.Exec(ctx, `INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload, status, sent_at, created_at)
			VALUES ($1, 'ORDER', $2, $3, 1, 'k', jsonb_build_object('activity_id', $4::bigint), $5, $6, $7)`, id, aggregate, typ, act, status, sent, sentAt)
		require.NoError(t, err)
		return id
	}
	reservation := func(act int64) uuid.UUID {
		id := ids.NewRandom()
		_, err := pool.Exec(ctx, `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
			VALUES ($1, $2, $3, 1, $4, $5, 'ORDER_CREATED', now(), now())`, id, ids.NewRandom(), act, time.Now().UnixNano(), ids.NewRandom())
		require.NoError(t, err)
		return id
	}
	inbox := func(reservation uuid.UUID, result string, at time.Time) uuid.UUID {
		id := ids.NewRandom()
		_, err := pool.Exec(ctx, `INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, payload_hash, result_code, processed_at)
			VALUES ('g', $1, 't', 'ORDER_CREATE_REQUESTED', $2, decode(repeat('00', 32), 'hex'), $3, $4)`, id, reservation, result, at)
		require.NoError(t, err)
		return id
	}

	gone := []uuid.UUID{
		event(activity, "ORDER_CREATED", "SENT", old, ids.NewRandom()),
		event(activity, "ORDER_CANCEL_TIMER", "SENT", old, order("CANCELLED")),
	}
	kept := []uuid.UUID{
		event(activity, "ORDER_CREATED", "SENT", recent, ids.NewRandom()),
		event(activity, "ORDER_CREATED", "PENDING", old, ids.NewRandom()),
		event(activity, "ORDER_CREATED", "MANUAL", old, ids.NewRandom()),
		event(other, "ORDER_CREATED", "SENT", old, ids.NewRandom()),
		event(activity, "ORDER_CANCEL_TIMER", "SENT", old, order("PAYING")),
	}
	mine, theirs := reservation(activity), reservation(other)
	inboxGone := []uuid.UUID{inbox(mine, "ORDER_CREATED", old), inbox(mine, "DUPLICATE", old)}
	inboxKept := []uuid.UUID{inbox(mine, "PROCESSING", old), inbox(mine, "ORDER_CREATED", recent), inbox(theirs, "ORDER_CREATED", old)}

	// While the activity is younger than the retention nothing of it can
	// be that old: the purge does not look (the rows above are older than
	// the activity, as no real row is).
	p, err := job.Purge(ctx, activity, reconcile.Retention{Outbox: 7 * 24 * time.Hour, Inbox: 7 * 24 * time.Hour, Batch: 1}, now)
	require.NoError(t, err)
	require.Equal(t, reconcile.Purged{}, p)
	_, err = pool.Exec(ctx, `UPDATE sku_inventory SET created_at = $2 WHERE activity_id = $1`, activity, now.Add(-9*24*time.Hour))
	require.NoError(t, err)

	p, err = job.Purge(ctx, activity, reconcile.Retention{Outbox: 7 * 24 * time.Hour, Inbox: 7 * 24 * time.Hour, Batch: 1}, now)
	require.NoError(t, err)
	require.Equal(t, reconcile.Purged{Outbox: 2, Inbox: 2}, p)
	count := func(q string, idList []uuid.UUID) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, q, idList).Scan(&n))
		return n
	}
	const outboxQ, inboxQ = `SELECT count(*) FROM event_outbox WHERE event_id = ANY($1)`, `SELECT count(*) FROM consumer_inbox WHERE message_id = ANY($1)`
	require.Zero(t, count(outboxQ, gone))
	require.Equal(t, len(kept), count(outboxQ, kept))
	require.Zero(t, count(inboxQ, inboxGone))
	require.Equal(t, len(inboxKept), count(inboxQ, inboxKept))

	// Again: nothing more; a retention of 0 keeps everything.
	p, err = job.Purge(ctx, activity, reconcile.Retention{Outbox: 7 * 24 * time.Hour, Inbox: 7 * 24 * time.Hour}, now)
	require.NoError(t, err)
	require.Equal(t, reconcile.Purged{}, p)
	p, err = job.Purge(ctx, activity, reconcile.Retention{}, now.Add(365*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, reconcile.Purged{}, p)
	// An activity never provisioned has nothing to purge.
	p, err = job.Purge(ctx, other+1_000_000, reconcile.Retention{Outbox: time.Hour, Inbox: reconcile.MinInboxRetention}, now)
	require.NoError(t, err)
	require.Equal(t, reconcile.Purged{}, p)
}
