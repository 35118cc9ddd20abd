package reconcile

import "github.com/seckill/seckill-operator/workloads/states"

// Rules of the per-reservation checks (design.md#auto-repair, design.md#reconcile). The automatic
// ones are exactly design.md#auto-repair's "yes" rows plus design.md#reconcile's timeout rejection (the
// deadline decision the order consumer itself would persist); everything
// else is recorded for a person with its evidence.
const (
	// Automatic.
	RuleRebuildProjection    = "REBUILD_ORDER_PROJECTION" // PG has the order, Redis still queued or lost the hash
	RuleEnsureCompensation   = "ENSURE_COMPENSATION_TASK" // PG rejected, Redis still reserved: the standard task
	RuleCompleteCompensation = "COMPLETE_COMPENSATION"    // Lua applied, PG not updated: confirm, then complete
	RuleOutboxReclaim        = "OUTBOX_LEASE_RECLAIM"     // SENDING with an expired lease: send again
	RuleTimeoutRejection     = "TIMEOUT_REJECTION"        // never reached PG, past the hard deadline

	// Manual.
	RuleProjectionConflict      = "PROJECTION_CONFLICT" // PG has the order, Redis says compensated (or released)
	RuleCompensatedMismatch     = "COMPENSATED_PROJECTION_MISMATCH"
	RuleRedisReservationMissing = "REDIS_RESERVATION_MISSING" // no Redis hash, PG has no order: activity-level recount
	RuleCompensationManual      = "COMPENSATION_TASK_MANUAL"
	RuleCancelNotProjected      = "CANCEL_RELEASE_NOT_PROJECTED"
	RuleStateConflict           = "STATE_CONFLICT"
	RuleOutboxManual            = "OUTBOX_MANUAL"
	RulePaidAfterCancel         = "PAID_AFTER_CANCEL"    // refund or fulfil: a business decision
	RulePaidCancelledGuard      = "PAID_ORDER_CANCELLED" // a successful payment on a CANCELLED order outside the refund flow
	RuleRepairDidNotHold        = "REPAIR_DID_NOT_HOLD"  // the same repair id was applied and the finding is back
	RuleFrozen                  = "FROZEN"               // under manual review: reported, never touched
)

// observed is what one reservation looks like across the two stores.
type observed struct {
	PG          states.ReservationStatus
	Order       states.OrderStatus // "" none
	Task        states.TaskStatus  // compensation task ("" none)
	TaskLive    bool               // the task is CLAIMED under a lease that has not expired
	RedisExists bool
	Redis       states.HashStatus // reservation hash status
	Marker      bool              // the compensation marker holds this reservation's compensation id
}

// decision is what the reconcile job does about it.
type decision struct {
	Rule     string // "" nothing to do
	Auto     bool
	Severity string
	// Target is the state the repair moves to: the reservation's (a
	// manual finding's MANUAL_REVIEW, a completed compensation's
	// COMPENSATED), the Redis hash's (a rebuilt projection's ORDER_CREATED),
	// or a new compensation task.
	Target string
	Freeze bool // stop every automatic action on it (design.md#auto-repair: PAID vs COMPENSATED)
}

// targetTask is the target of a decision that creates the standard compensation task.
const targetTask = "COMPENSATION_TASK"

func manual(rule, sev string) decision {
	return decision{Rule: rule, Severity: sev, Target: string(states.ReservationManualReview)}
}

// decide is the design.md#reconcile switch over PostgreSQL's reservation status.
func decide(o observed) decision {
	switch o.PG {
	case states.ReservationManualReview:
		return decision{Rule: RuleFrozen, Severity: Info}
	case states.ReservationOrderCreated:
		switch {
		case o.Order == "":
			return manual(RuleStateConflict, Critical)
		case o.Order.Ended():
			// Cancelled (refunding or refunded after a late payment): Redis
			// has released the unit (CANCELLED) or the terminal hash expired.
			if !o.RedisExists || o.Redis == states.HashCancelled {
				return decision{}
			}
			if o.Redis == states.HashReserved || o.Redis.HasOrder() {
				return manual(RuleCancelNotProjected, Critical)
			}
			return manual(RuleProjectionConflict, Critical)
		case !o.RedisExists || o.Redis == states.HashReserved:
			return decision{Rule: RuleRebuildProjection, Auto: true, Severity: Warning, Target: string(states.HashOrderCreated)}
		case o.Redis.HasOrder():
			return decision{}
		default: // COMPENSATED, CANCELLED, ORDER_REJECTED ... while the order lives
			d := manual(RuleProjectionConflict, Critical)
			d.Freeze = true
			return d
		}
	case states.ReservationOrderRejected, states.ReservationCompensating:
		if o.RedisExists && o.Redis.HasOrder() {
			return manual(RuleStateConflict, Critical)
		}
		applied := o.Marker || (o.RedisExists && o.Redis == states.HashCompensated)
		switch {
		case o.Task == "":
			return decision{Rule: RuleEnsureCompensation, Auto: true, Severity: Warning, Target: targetTask}
		case o.TaskLive:
			return decision{} // a compensator is on it now
		case applied && (o.PG == states.ReservationCompensating || o.Task == states.TaskManual):
			return decision{Rule: RuleCompleteCompensation, Auto: true, Severity: Warning, Target: string(states.ReservationCompensated)}
		case o.Task == states.TaskManual && !o.RedisExists:
			return manual(RuleRedisReservationMissing, Critical)
		case o.Task == states.TaskManual:
			return manual(RuleCompensationManual, Critical)
		case o.Task == states.TaskApplied || o.Task == states.TaskVerified:
			return manual(RuleStateConflict, Critical)
		}
		return decision{} // PENDING or RETRY: the compensator will run it
	case states.ReservationCompensated:
		if o.RedisExists && o.Redis != states.HashCompensated {
			return manual(RuleCompensatedMismatch, Critical)
		}
	}
	return decision{}
}
