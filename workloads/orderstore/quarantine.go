package orderstore

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

var (
	qQuarantineInsert = sqlfile.Must(sqlFiles, "quarantine_insert")
	qProjectionInbox  = sqlfile.Must(sqlFiles, "projection_inbox")
)

// Quarantined is a message kept for review.
type Quarantined struct {
	Group, Topic, BrokerMessageID string
	MessageID                     *uuid.UUID
	Reason, Detail                string
	Payload                       []byte
}

// Quarantine stores a message with its evidence; storing the same broker
// message twice keeps the first.
func Quarantine(ctx context.Context, pool *pgxpool.Pool, q Quarantined) error {
	h := sha256.Sum256(q.Payload)
	if _, err := pool.Exec(ctx, qQuarantineInsert, ids.NewRandom(), q.Group, q.Topic, q.BrokerMessageID, q.MessageID,
		q.Reason, q.Detail, q.Payload, h[:]); err != nil {
		return fmt.Errorf("quarantining message %s: %w", q.BrokerMessageID, err)
	}
	return nil
}

// RecordProjection notes in the group's inbox that an event was applied.
func RecordProjection(ctx context.Context, pool *pgxpool.Pool, group, topic, eventType string, eventID, reservationID uuid.UUID, payload []byte, result string) error {
	h := sha256.Sum256(payload)
	if _, err := pool.Exec(ctx, qProjectionInbox, group, eventID, topic, eventType, reservationID, h[:], result); err != nil {
		return fmt.Errorf("recording projection of %s: %w", eventID, err)
	}
	return nil
}
