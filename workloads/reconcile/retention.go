package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

var (
	qRetentionOutbox = sqlfile.Must(sqlFiles, "retention_outbox")
	qRetentionInbox  = sqlfile.Must(sqlFiles, "retention_inbox")
	qRetentionSince  = sqlfile.Must(sqlFiles, "retention_since")
)

// purgeSettings hold for a purge statement's transaction:
//   - a timeout: a job killed mid-statement leaves its statement running on
//     the server, and the next run's would pile up beside it;
//   - no nested loop: the activity's reservation rows are estimated at one
//     for a new activity (its statistics not yet gathered), and the planner
//     then scanned the whole inbox once per reservation — measured on the
//     local stack (1.1 M inbox rows, an activity of 6,480 reservations):
//     more than 10 minutes per statement, where the hash join of the same
//     statement takes 0.35 s.
const purgeSettings = "SET LOCAL statement_timeout = '60s'; SET LOCAL enable_nestloop = off"

// MinInboxRetention is the shortest inbox retention the job accepts: longer
// than the broker keeps a message (RocketMQ's fileReservedTime, 72 h by
// default), so that no delivery can come after its inbox row is gone.
const MinInboxRetention = 72 * time.Hour

// Retention says how long sent outbox events and finished inbox rows are
// kept (0: forever) and how many rows one statement deletes.
type Retention struct {
	Outbox time.Duration
	Inbox  time.Duration
	Batch  int
}

// Purged counts what Purge deleted.
type Purged struct {
	Outbox int64 `json:"outbox_events"`
	Inbox  int64 `json:"inbox_rows"`
}

// Purge deletes the activity's outbox events sent and inbox rows finished
// longer than the retention before now, a batch per statement (short
// transactions beside a running sale), until none is left or ctx ends.
//
// An activity younger than a retention has nothing that old: that step is
// skipped without scanning its table (retention_since.sql), so the job
// that runs every few minutes during a sale costs nothing here until the
// sale is older than its retention.
func (j *Job) Purge(ctx context.Context, activity int64, r Retention, now time.Time) (Purged, error) {
	var p Purged
	batch := r.Batch
	if batch < 1 {
		batch = 5000
	}
	var since *time.Time
	if err := j.Pool.QueryRow(ctx, qRetentionSince, activity).Scan(&since); err != nil {
		return p, fmt.Errorf("reading when activity %d was provisioned: %w", activity, err)
	}
	if since == nil {
		return p, nil // not provisioned: nothing of it exists
	}
	for _, step := range []struct {
		keep time.Duration
		q    string
		n    *int64
		what string
	}{{r.Outbox, qRetentionOutbox, &p.Outbox, "sent outbox events"}, {r.Inbox, qRetentionInbox, &p.Inbox, "finished inbox rows"}} {
		cutoff := now.Add(-step.keep)
		if step.keep <= 0 || !since.Before(cutoff) {
			continue
		}
		for {
			var tag pgconn.CommandTag
			err := pgx.BeginTxFunc(ctx, j.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, purgeSettings); err != nil {
					return err
				}
				var err error
				tag, err = tx.Exec(ctx, step.q, activity, cutoff, batch)
				return err
			})
			if err != nil {
				return p, fmt.Errorf("deleting %s: %w", step.what, err)
			}
			*step.n += tag.RowsAffected()
			if tag.RowsAffected() < int64(batch) {
				break
			}
		}
	}
	return p, nil
}
