package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Stock moves between the buckets of a SKU.
//
// A user's reservation always lives in the user's own bucket (BucketFor):
// the request mapping, the one-per-user mark and the reservation are written
// by one script on one slot. When that bucket is empty while a sibling still
// holds stock, stock moves to it instead: move_out.lua takes units from the
// sibling and records the move as pending, move_in.lua adds them to the
// destination once per move id, and the pending entry is deleted. A crash
// between the two halves leaves the units "in transit", visible in the
// counters (sum of moved_out - moved_in over the SKU) and in the source's
// pending hash, from which Settle finishes the move.

// Move codes (the scripts' headers list them all).
const (
	MoveOutDone       = 1
	MoveOutAlready    = 2
	MoveInAlready     = 2
	moveInvalidReason = "INVALID_ARGUMENT"
)

// MoveOut runs move_out.lua on the source slot: it takes up to max units
// (half the available stock, rounded up) for dst and records the move.
func (s *Store) MoveOut(ctx context.Context, src Slot, id uuid.UUID, dst, max int, now time.Time) (int64, Result, error) {
	v, err := scriptMoveOut.Run(ctx, s.c, []string{src.Stock(), src.Counter(), src.MovesOut()},
		id.String(), dst, max, ms(now)).Result()
	res, arr, err := result(v, err)
	if err != nil {
		return 0, Result{}, fmt.Errorf("running move_out on %s: %w", src.Tag(), err)
	}
	if res.Reason == moveInvalidReason {
		return 0, res, fmt.Errorf("move_out on %s: %s", src.Tag(), res.Reason)
	}
	amount, _ := arr[2].(int64)
	return amount, res, nil
}

// MoveIn runs move_in.lua on the destination slot (idempotent by move id).
func (s *Store) MoveIn(ctx context.Context, dst Slot, id uuid.UUID, amount int64) (Result, error) {
	v, err := scriptMoveIn.Run(ctx, s.c, []string{dst.Stock(), dst.Counter(), dst.MovesIn()}, id.String(), amount).Result()
	res, _, err := result(v, err)
	if err != nil {
		return Result{}, fmt.Errorf("running move_in on %s: %w", dst.Tag(), err)
	}
	if !res.OK() {
		return res, fmt.Errorf("move_in of %s on %s: %s", id, dst.Tag(), res.Reason)
	}
	return res, nil
}

// completeMove applies a recorded move to its destination (once, by id)
// and then deletes the source's pending entry: the second half of every
// move, made by its mover or by Settle.
func (s *Store) completeMove(ctx context.Context, src, dst Slot, id uuid.UUID, amount int64) error {
	if _, err := s.MoveIn(ctx, dst, id, amount); err != nil {
		return fmt.Errorf("%d units in transit from %s: %w", amount, src.Tag(), err)
	}
	if err := s.c.HDel(ctx, src.MovesOut(), id.String()).Err(); err != nil {
		return fmt.Errorf("finishing move %s on %s: %w", id, src.Tag(), err)
	}
	return nil
}

// MoveStock moves up to max units from src to dst (two buckets of one SKU)
// and returns how many moved: 0 when src is empty. An error after the units
// left src leaves the move pending; Settle finishes it.
func (s *Store) MoveStock(ctx context.Context, src, dst Slot, max int, now time.Time) (int64, error) {
	if src.ActivityID != dst.ActivityID || src.SKUID != dst.SKUID || src.Bucket < 0 || dst.Bucket < 0 || src.Bucket == dst.Bucket {
		return 0, fmt.Errorf("moving stock from %s to %s: not two buckets of one SKU", src.Tag(), dst.Tag())
	}
	id := uuid.New()
	amount, res, err := s.MoveOut(ctx, src, id, dst.Bucket, max, now)
	if err != nil || res.Code != MoveOutDone {
		return 0, err
	}
	if err := s.completeMove(ctx, src, dst, id, amount); err != nil {
		return 0, fmt.Errorf("moving stock (settled later): %w", err)
	}
	return amount, nil
}

// PendingMove is a move its source recorded and did not see finished.
type PendingMove struct {
	ID     uuid.UUID
	From   Slot
	To     Slot
	Amount int64
	At     time.Time
}

// PendingMoves lists the moves the buckets of slots still hold as pending.
// An entry that cannot be parsed is an error, never skipped.
func (s *Store) PendingMoves(ctx context.Context, slots []Slot) ([]PendingMove, error) {
	var out []PendingMove
	for _, src := range slots {
		m, err := s.c.HGetAll(ctx, src.MovesOut()).Result()
		if err != nil {
			return nil, fmt.Errorf("reading pending moves of %s: %w", src.Tag(), err)
		}
		for k, v := range m {
			p, err := parsePendingMove(src, k, v)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func parsePendingMove(src Slot, k, v string) (PendingMove, error) {
	id, err := uuid.Parse(k)
	parts := strings.Split(v, ":")
	if err != nil || len(parts) != 3 {
		return PendingMove{}, fmt.Errorf("pending move %q=%q on %s: malformed", k, v, src.Tag())
	}
	dst, err1 := strconv.Atoi(parts[0])
	amount, err2 := strconv.ParseInt(parts[1], 10, 64)
	at, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || dst < 0 || dst == src.Bucket || amount < 1 {
		return PendingMove{}, fmt.Errorf("pending move %q=%q on %s: malformed", k, v, src.Tag())
	}
	return PendingMove{ID: id, From: src, To: BucketSlot(src.ActivityID, src.SKUID, dst), Amount: amount, At: time.UnixMilli(at)}, nil
}

// Settle finishes every pending move of slots older than minAge (a move
// younger than that is most likely still being made by its mover; finishing
// it twice would still add nothing twice). It returns the moves finished.
func (s *Store) Settle(ctx context.Context, slots []Slot, minAge time.Duration, now time.Time) (int, error) {
	pending, err := s.PendingMoves(ctx, slots)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pending {
		if now.Sub(p.At) < minAge {
			continue
		}
		if err := s.completeMove(ctx, p.From, p.To, p.ID, p.Amount); err != nil {
			return n, fmt.Errorf("settling move %s: %w", p.ID, err)
		}
		n++
	}
	return n, nil
}

// MoveStockAndReserve moves up to max units from src to r's bucket, as
// MoveStock does, and runs r's reservation in the same transaction as the
// units' arrival: nobody can take the mover's unit, or move it on, between
// the two. Every move then sells a unit, so buyers contending for a SKU's
// last units make progress instead of passing them from bucket to bucket.
// moved is 0 (and nothing reserved) when src is empty. An error after the
// units left src leaves the outcome unknown: the move is settled later
// (Settle, once by id) and the reservation, if it ran, is replayed by its
// request id.
func (s *Store) MoveStockAndReserve(ctx context.Context, src Slot, max int, now time.Time, r ReserveRequest) (int64, ReserveResult, error) {
	dst := r.Slot
	if src.ActivityID != dst.ActivityID || src.SKUID != dst.SKUID || src.Bucket < 0 || dst.Bucket < 0 || src.Bucket == dst.Bucket {
		return 0, ReserveResult{}, fmt.Errorf("moving stock from %s to %s: not two buckets of one SKU", src.Tag(), dst.Tag())
	}
	id := uuid.New()
	amount, res, err := s.MoveOut(ctx, src, id, dst.Bucket, max, now)
	if err != nil || res.Code != MoveOutDone {
		return 0, ReserveResult{}, err
	}
	keys, args := reserveArgs(r)
	pipe := s.c.TxPipeline() // one slot: dst's keys share its hash tag
	in := scriptMoveIn.Eval(ctx, pipe, []string{dst.Stock(), dst.Counter(), dst.MovesIn()}, id.String(), amount)
	rv := scriptReserve.Eval(ctx, pipe, keys, args...)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, ReserveResult{}, fmt.Errorf("%d units in transit from %s, reservation on %s unknown (settled later): %w", amount, src.Tag(), dst.Tag(), err)
	}
	ires, _, err := result(in.Result())
	if err == nil && !ires.OK() {
		err = errors.New(ires.Reason)
	}
	if err != nil {
		return 0, ReserveResult{}, fmt.Errorf("move_in of %s on %s: %w", id, dst.Tag(), err)
	}
	out, err := reserveResult(rv.Result())
	if err != nil {
		return amount, ReserveResult{}, err
	}
	// The pending entry goes last; left behind, Settle deletes it (its
	// move_in is already applied, by id).
	_ = s.c.HDel(ctx, src.MovesOut(), id.String()).Err()
	return amount, out, nil
}
