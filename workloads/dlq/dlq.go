// Package dlq replays dead-lettered messages. A message that failed every
// delivery its group allows lands in the broker's %DLQ%<group>; once the
// cause is fixed, Replay sends each one back to the group's topic with its
// original business message id, key, tag and body, and only then
// acknowledges it in the DLQ. A replayed duplicate is harmless: every
// consumer deduplicates by the message id in its inbox.
package dlq

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill-operator/workloads/mq"
)

// Properties added to a replayed message, as evidence.
const (
	PropReplayedFrom     = "seckill_replayed_from"
	PropReplayedBrokerID = "seckill_replayed_broker_message_id"
	PropReplayedAttempts = "seckill_replayed_attempts"
)

// Replayer moves messages from one group's DLQ back to its topic.
type Replayer struct {
	// DLQ receives from %DLQ%<group> with the replayer group.
	DLQ *mq.Consumer
	// To sends to Topic.
	To    *mq.Producer
	Topic string
	// DeliverAfter makes replayed messages delayed (for a DELAY topic).
	DeliverAfter time.Duration
	// Only, when set, picks the messages to replay; the others stay in the
	// DLQ (they become visible again after the invisible time).
	Only     func(mq.Delivery) bool
	Replayed prometheus.Counter
	Log      *slog.Logger
}

// Report is what one Replay did.
type Report struct {
	Replayed   []string `json:"replayed"`
	Left       int      `json:"left_in_dlq"`
	SendErrors int      `json:"send_errors"`
}

// Replay replays up to max messages (0: no limit) and returns when the DLQ
// has been quiet for idle. A message whose send fails, or whose outcome is
// unknown, is not acknowledged: it stays in the DLQ for the next run.
func (r *Replayer) Replay(ctx context.Context, max int, idle time.Duration) (Report, error) {
	var rep Report
	quietSince := time.Now()
	for ctx.Err() == nil && (max == 0 || len(rep.Replayed) < max) {
		if time.Since(quietSince) >= idle {
			break
		}
		ds, err := r.DLQ.Receive(ctx, 16, time.Minute)
		if err != nil {
			return rep, fmt.Errorf("receiving from the DLQ: %w", err)
		}
		if len(ds) == 0 {
			continue
		}
		quietSince = time.Now()
		for _, d := range ds {
			if (r.Only != nil && !r.Only(d)) || (max > 0 && len(rep.Replayed) >= max) {
				rep.Left++
				continue
			}
			if err := r.replay(ctx, d); err != nil {
				rep.SendErrors++
				r.Log.Warn("replay not sent; the message stays in the DLQ", "message_id", d.MessageID, "error", err)
				continue
			}
			rep.Replayed = append(rep.Replayed, d.MessageID)
		}
	}
	return rep, nil
}

func (r *Replayer) replay(ctx context.Context, d mq.Delivery) error {
	if d.MessageID == "" {
		// Not ours: no business id to deduplicate by. Left for a person.
		return fmt.Errorf("broker message %s has no %s property", d.BrokerID, mq.PropMessageID)
	}
	m := mq.Message{Topic: r.Topic, MessageID: d.MessageID, Tag: d.Tag, Body: d.Body,
		Properties: map[string]string{}}
	for _, k := range d.Keys {
		if k != d.MessageID {
			m.Key = k
			break
		}
	}
	for k, v := range d.Properties {
		if k != mq.PropMessageID {
			m.Properties[k] = v
		}
	}
	m.Properties[PropReplayedFrom] = d.Topic
	m.Properties[PropReplayedBrokerID] = d.BrokerID
	m.Properties[PropReplayedAttempts] = fmt.Sprint(d.Attempt)
	if r.DeliverAfter > 0 {
		m.DeliverAt = time.Now().Add(r.DeliverAfter)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.To.Send(sctx, m); err != nil {
		return err
	}
	if r.Replayed != nil {
		r.Replayed.Inc()
	}
	// Sent: acknowledge in the DLQ. If the ack is lost the message is
	// replayed again later, which the consumers' inboxes absorb.
	if err := r.DLQ.Ack(ctx, d); err != nil {
		r.Log.Warn("replayed but not acknowledged in the DLQ; it may be replayed again", "message_id", d.MessageID, "error", err)
	}
	r.Log.Info("replayed", "message_id", d.MessageID, "from", d.Topic, "to", r.Topic, "attempts", d.Attempt)
	return nil
}
