package reconcile

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
	PG          string // inventory_reservation.status
	Order       string // orders.status ("" none)
	Task        string // compensation task status ("" none)
	TaskLive    bool   // the task is CLAIMED under a lease that has not expired
	RedisExists bool
	Redis       string // reservation hash status
	Marker      bool   // the compensation marker holds this reservation's compensation id
}

// decision is what the reconcile job does about it.
type decision struct {
	Rule     string // "" nothing to do
	Auto     bool
	Severity string
	Target   string
	Freeze   bool // stop every automatic action on it (design.md#auto-repair: PAID vs COMPENSATED)
}

func orderFinal(s string) bool { return s == "CANCELLED" || s == "REFUNDING" || s == "REFUNDED" }

func redisHasOrder(s string) bool {
	return s == "ORDER_CREATED" || s == "PAID" || s == "CANCEL_PENDING"
}

func manual(rule, sev string) decision {
	return decision{Rule: rule, Severity: sev, Target: "MANUAL_REVIEW"}
}

// decide is the design.md#reconcile switch over PostgreSQL's reservation status.
func decide(o observed) decision {
	switch o.PG {
	case "MANUAL_REVIEW":
		return decision{Rule: RuleFrozen, Severity: Info}
	case "ORDER_CREATED":
		switch {
		case o.Order == "":
			return manual(RuleStateConflict, Critical)
		case orderFinal(o.Order):
			// Cancelled (refunding or refunded after a late payment): Redis
			// has released the unit (CANCELLED) or the terminal hash expired.
			if !o.RedisExists || o.Redis == "CANCELLED" {
				return decision{}
			}
			if o.Redis == "RESERVED" || redisHasOrder(o.Redis) {
				return manual(RuleCancelNotProjected, Critical)
			}
			return manual(RuleProjectionConflict, Critical)
		case !o.RedisExists || o.Redis == "RESERVED":
			return decision{Rule: RuleRebuildProjection, Auto: true, Severity: Warning, Target: "ORDER_CREATED"}
		case redisHasOrder(o.Redis):
			return decision{}
		default: // COMPENSATED, CANCELLED, ORDER_REJECTED ... while the order lives
			d := manual(RuleProjectionConflict, Critical)
			d.Freeze = true
			return d
		}
	case "ORDER_REJECTED", "COMPENSATING":
		if o.RedisExists && redisHasOrder(o.Redis) {
			return manual(RuleStateConflict, Critical)
		}
		applied := o.Marker || (o.RedisExists && o.Redis == "COMPENSATED")
		switch {
		case o.Task == "":
			return decision{Rule: RuleEnsureCompensation, Auto: true, Severity: Warning, Target: "COMPENSATION_TASK"}
		case o.TaskLive:
			return decision{} // a compensator is on it now
		case applied && (o.PG == "COMPENSATING" || o.Task == "MANUAL"):
			return decision{Rule: RuleCompleteCompensation, Auto: true, Severity: Warning, Target: "COMPENSATED"}
		case o.Task == "MANUAL" && !o.RedisExists:
			return manual(RuleRedisReservationMissing, Critical)
		case o.Task == "MANUAL":
			return manual(RuleCompensationManual, Critical)
		case o.Task == "APPLIED" || o.Task == "VERIFIED":
			return manual(RuleStateConflict, Critical)
		}
		return decision{} // PENDING or RETRY: the compensator will run it
	case "COMPENSATED":
		if o.RedisExists && o.Redis != "COMPENSATED" {
			return manual(RuleCompensatedMismatch, Critical)
		}
	}
	return decision{}
}
