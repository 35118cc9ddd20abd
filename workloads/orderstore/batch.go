package orderstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill-operator/workloads/events"
)

// Item is one received order-create message for ConsumeBatch: the parsed
// message and its body as received (the body's hash detects a reused id).
type Item struct {
	Msg events.OrderCreateRequested
	Raw []byte
	// Trace is the W3C context of the message's consume span ("":
	// untraced): the order row and the outbox rows carry it
	// (design.md#traces).
	Trace string
}

// Result is one message's outcome in a batch.
type Result struct {
	Outcome Outcome
	Err     error
}

// ConsumeBatch processes several order-create messages in one transaction,
// so a batch pays for one commit (and one wait for the hot SKU's row lock)
// instead of one per message. Every path runs the same order transaction
// (steps.go) — only how many messages go through it at once differs. A
// batch whose messages, reservations and users are all distinct is first
// run set-wise (batchFast: all of it through steps, a handful of pipelined
// round trips, the SKU row locked only at the end); if that meets a
// conflict or a failing statement, nothing of it is committed and the
// batch runs message by message, each through steps under its own
// savepoint:
//   - a message whose statements fail or conflict is rolled back to its
//     savepoint (nothing of it is kept) and, once the batch is committed,
//     run again alone through Consume, which classifies it (retry,
//     unknown commit, quarantine): a poison message never fails its batch;
//   - a commit whose outcome is unknown is verified message by message on a
//     fresh connection (design.md#commit-unknown), never assumed failed;
//   - a batch that cannot begin or commit for certain falls back to Consume
//     for every message.
//
// The results are in the order of items.
func (c *Consumer) ConsumeBatch(ctx context.Context, items []Item) []Result {
	res := make([]Result, len(items))
	if len(items) == 1 {
		res[0].Outcome, res[0].Err = c.consume(ctx, items[0])
		return res
	}
	hashes := make([][]byte, len(items))
	for i, it := range items {
		h := sha256.Sum256(it.Raw)
		hashes[i] = h[:]
	}
	if distinct(items) {
		fast, err := c.batchFast(ctx, items, hashes)
		if err == nil {
			c.countBatch(true)
			return fast
		}
		if errors.Is(err, errCommit) {
			for i, it := range items {
				res[i].Outcome, res[i].Err = c.resolveCommit(ctx, it.Msg, hashes[i], err)
			}
			return res
		}
		// Nothing committed: message by message, each under a savepoint.
	}
	c.countBatch(false)
	alone, err := c.batchTx(ctx, items, hashes, res)
	switch {
	case errors.Is(err, errCommit):
		for i, it := range items {
			if !alone[i] {
				res[i].Outcome, res[i].Err = c.resolveCommit(ctx, it.Msg, hashes[i], err)
			}
		}
	case err != nil:
		// Nothing of the batch is committed: every message alone.
		for i := range alone {
			alone[i] = true
		}
	}
	for i, it := range items {
		if alone[i] {
			res[i].Outcome, res[i].Err = c.consume(ctx, it)
		}
	}
	return res
}

// batchTx applies every item under a savepoint and commits. alone marks the
// items rolled back to their savepoint; res holds the others' outcomes,
// valid once the commit is known to have succeeded (err nil).
func (c *Consumer) batchTx(ctx context.Context, items []Item, hashes [][]byte, res []Result) (alone []bool, err error) {
	alone = make([]bool, len(items))
	tx, err := c.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return alone, fmt.Errorf("beginning order batch: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for i, it := range items {
		sp, err := tx.Begin(ctx) // SAVEPOINT
		if err != nil {
			return alone, fmt.Errorf("savepoint for message %s: %w", it.Msg.MessageID, err)
		}
		out, err := c.apply(ctx, sp, it, hashes[i])
		if err != nil {
			alone[i] = true
			if rerr := sp.Rollback(ctx); rerr != nil { // ROLLBACK TO SAVEPOINT
				return alone, fmt.Errorf("rolling back message %s to its savepoint: %w", it.Msg.MessageID, rerr)
			}
			continue
		}
		if err := sp.Commit(ctx); err != nil { // RELEASE SAVEPOINT
			return alone, fmt.Errorf("releasing the savepoint of message %s: %w", it.Msg.MessageID, err)
		}
		res[i] = Result{Outcome: out}
	}
	if err := tx.Commit(ctx); err != nil {
		return alone, fmt.Errorf("%w: %w", errCommit, err)
	}
	if err := c.afterCommit(); err != nil {
		for i := range res {
			if !alone[i] {
				res[i] = Result{Outcome: Outcome{Action: Retry}, Err: err}
			}
		}
	}
	return alone, nil
}
