package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

var (
	qRetentionOutbox = sqlfile.Must(sqlFiles, "retention_outbox")
	qRetentionInbox  = sqlfile.Must(sqlFiles, "retention_inbox")
)

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
func (j *Job) Purge(ctx context.Context, activity int64, r Retention, now time.Time) (Purged, error) {
	var p Purged
	batch := r.Batch
	if batch < 1 {
		batch = 5000
	}
	for _, step := range []struct {
		keep time.Duration
		q    string
		n    *int64
		what string
	}{{r.Outbox, qRetentionOutbox, &p.Outbox, "sent outbox events"}, {r.Inbox, qRetentionInbox, &p.Inbox, "finished inbox rows"}} {
		if step.keep <= 0 {
			continue
		}
		for {
			tag, err := j.Pool.Exec(ctx, step.q, activity, now.Add(-step.keep), batch)
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
