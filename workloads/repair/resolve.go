package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// The standard steps a person resolves a MANUAL repair task with
// (design.md#runbook; `seckill runbook resolve -step`).
const (
	StepRebuildProjection = "rebuild-projection"
	StepCompensate        = "compensate"
	StepReleaseCancelled  = "release-cancelled"
	StepResendOutbox      = "resend-outbox"
	StepRecount           = "recount"
	StepCloseByRecount    = "close-by-recount"
	StepUnfreeze          = "unfreeze"
	StepNone              = "none"   // reviewed: nothing to do, APPLIED
	StepReject            = "reject" // reviewed: refused, REJECTED
)

// StandardSteps lists them in the runbook's order.
var StandardSteps = []string{StepRebuildProjection, StepCompensate, StepReleaseCancelled, StepResendOutbox, StepRecount,
	StepCloseByRecount, StepUnfreeze, StepNone, StepReject}

// ErrStepMisfit: the step is unknown, does not act on the task's object, or
// lacks what it needs (the person's input is wrong; nothing was written).
var ErrStepMisfit = errors.New("the step does not fit the repair task")

// onObject is a standard step that acts on one object of the task's type.
type onObject struct {
	object string
	step   func(s *Store, st *Steps, object uuid.UUID, a Audit) Step
}

// objectSteps are the standard steps that act on the task's object, by name.
var objectSteps = map[string]onObject{
	StepRebuildProjection: {ObjectReservation, func(_ *Store, st *Steps, o uuid.UUID, _ Audit) Step { return st.RebuildProjection(o) }},
	StepCompensate:        {ObjectReservation, func(_ *Store, st *Steps, o uuid.UUID, _ Audit) Step { return st.Compensate(o, true) }},
	StepReleaseCancelled:  {ObjectReservation, func(_ *Store, st *Steps, o uuid.UUID, _ Audit) Step { return st.ReleaseCancelled(o) }},
	StepCloseByRecount:    {ObjectReservation, func(_ *Store, st *Steps, o uuid.UUID, _ Audit) Step { return st.CloseByRecount(o) }},
	StepResendOutbox:      {ObjectOutbox, func(_ *Store, st *Steps, o uuid.UUID, _ Audit) Step { return st.ResendOutbox(o) }},
	StepUnfreeze: {ObjectReservation, func(s *Store, _ *Steps, o uuid.UUID, a Audit) Step {
		return func(ctx context.Context) (any, string, error) {
			u, err := s.Unfreeze(ctx, o, a)
			if err != nil {
				return nil, "repair.Unfreeze", err
			}
			return u.After, "repair.Unfreeze " + u.IDHex, nil
		}
	}},
}

// ResolveWith closes the MANUAL repair task id through the named standard
// step, which must fit the task's object; a recount needs the slots of the
// task's SKU (slots answers them, false when it does not know the SKU).
func (s *Store) ResolveWith(ctx context.Context, steps *Steps, id []byte, step string, a Audit,
	slots func(activity, sku int64) ([]redisstore.Slot, bool)) (Task, error) {
	if !slices.Contains(StandardSteps, step) {
		return Task{}, fmt.Errorf("%w: step %q: want one of %v", ErrStepMisfit, step, StandardSteps)
	}
	t, err := s.Get(ctx, id)
	if err != nil {
		return t, err
	}
	switch step {
	case StepReject:
		return s.Resolve(ctx, id, Rejected, a, nil)
	case StepNone:
		return s.Resolve(ctx, id, Applied, a, nil)
	case StepRecount:
		if t.ObjectType != ObjectSKU {
			return t, fmt.Errorf("%w: %s acts on a %s; repair task %s is about a %s", ErrStepMisfit, step, ObjectSKU, t.IDHex, t.ObjectType)
		}
		sku, err := strconv.ParseInt(t.ObjectID, 10, 64)
		if err != nil {
			return t, fmt.Errorf("repair task %s names SKU object %q: %w", t.IDHex, t.ObjectID, err)
		}
		sl, ok := slots(t.Activity, sku)
		if !ok {
			return t, fmt.Errorf("%w: the SKUs given do not name SKU %d of repair task %s", ErrStepMisfit, sku, t.IDHex)
		}
		return s.Resolve(ctx, id, Applied, a, steps.RecountRedis(sl))
	}
	std := objectSteps[step]
	if t.ObjectType != std.object {
		return t, fmt.Errorf("%w: %s acts on a %s; repair task %s is about a %s", ErrStepMisfit, step, std.object, t.IDHex, t.ObjectType)
	}
	object, err := uuid.Parse(t.ObjectID)
	if err != nil {
		return t, fmt.Errorf("repair task %s names object %q: %w", t.IDHex, t.ObjectID, err)
	}
	return s.Resolve(ctx, id, Applied, a, std.step(s, steps, object, a))
}
