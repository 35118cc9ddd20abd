// Package inbox is what a consumer group keeps of the messages it received
// (design.md#inbox): the order consumer's claim, outcome and dedupe (its
// statements, run inside the order transaction), the projector's record of
// applied events, and the quarantine every worker puts a message it refuses
// in, with its evidence.
package inbox

import (
	"context"
	"crypto/sha256"
	"embed"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// The order consumer's statements, run inside its order transaction
// (orderstore): the claim comes first, so a redelivery waits for, or
// finds, the transaction that owns the message.
var (
	// ClaimSQL claims a message for a group (sql/claim.sql): one row
	// returned, this transaction owns it; none, another one processed it.
	ClaimSQL = sqlfile.Must(sqlFiles, "claim")
	// GetSQL reads a message's recorded hash, outcome and order (sql/get.sql).
	GetSQL = sqlfile.Must(sqlFiles, "get")
	// FinishSQL records a claimed message's outcome (sql/finish.sql).
	FinishSQL = sqlfile.Must(sqlFiles, "finish")
)

var (
	qQuarantine = sqlfile.Must(sqlFiles, "quarantine")
	qProjection = sqlfile.Must(sqlFiles, "projection")
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
	if _, err := pool.Exec(ctx, qQuarantine, ids.NewRandom(), q.Group, q.Topic, q.BrokerMessageID, q.MessageID,
		q.Reason, q.Detail, q.Payload, h[:]); err != nil {
		return fmt.Errorf("quarantining message %s: %w", q.BrokerMessageID, err)
	}
	return nil
}

// Projected is one applied event for the group's inbox.
type Projected struct {
	Topic, EventType       string
	EventID, ReservationID uuid.UUID
	Payload                []byte
	Result                 string
}

// RecordProjections notes in the group's inbox that events were applied,
// all of them in one statement; an event recorded before keeps its row.
func RecordProjections(ctx context.Context, pool *pgxpool.Pool, group string, ps []Projected) error {
	if len(ps) == 0 {
		return nil
	}
	eventIDs, reservations := make([]uuid.UUID, len(ps)), make([]uuid.UUID, len(ps))
	topics, types, results := make([]string, len(ps)), make([]string, len(ps)), make([]string, len(ps))
	hashes := make([][]byte, len(ps))
	for i, p := range ps {
		h := sha256.Sum256(p.Payload)
		eventIDs[i], reservations[i], topics[i], types[i], results[i], hashes[i] = p.EventID, p.ReservationID, p.Topic, p.EventType, p.Result, h[:]
	}
	if _, err := pool.Exec(ctx, qProjection, group, eventIDs, topics, types, reservations, hashes, results); err != nil {
		return fmt.Errorf("recording the projection of %d events (first %s): %w", len(ps), ps[0].EventID, err)
	}
	return nil
}
