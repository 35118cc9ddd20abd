package reconcile

import "testing"

// The design.md#reconcile switch, row by row; design.md#auto-repair decides which are automatic.
func TestDecide(t *testing.T) {
	cases := []struct {
		name string
		o    observed
		rule string
		auto bool
	}{
		{"projection lags", observed{PG: "ORDER_CREATED", Order: "CREATED", RedisExists: true, Redis: "RESERVED"}, RuleRebuildProjection, true},
		{"projection hash lost", observed{PG: "ORDER_CREATED", Order: "PAID"}, RuleRebuildProjection, true},
		{"projection fine", observed{PG: "ORDER_CREATED", Order: "PAID", RedisExists: true, Redis: "ORDER_CREATED"}, "", false},
		{"paid vs compensated", observed{PG: "ORDER_CREATED", Order: "PAID", RedisExists: true, Redis: "COMPENSATED"}, RuleProjectionConflict, false},
		{"live order released in Redis", observed{PG: "ORDER_CREATED", Order: "CREATED", RedisExists: true, Redis: "CANCELLED"}, RuleProjectionConflict, false},
		{"cancelled and released", observed{PG: "ORDER_CREATED", Order: "CANCELLED", RedisExists: true, Redis: "CANCELLED"}, "", false},
		{"cancelled, hash expired", observed{PG: "ORDER_CREATED", Order: "REFUNDED"}, "", false},
		{"cancel not projected", observed{PG: "ORDER_CREATED", Order: "CANCELLED", RedisExists: true, Redis: "ORDER_CREATED"}, RuleCancelNotProjected, false},
		{"order row missing", observed{PG: "ORDER_CREATED", RedisExists: true, Redis: "ORDER_CREATED"}, RuleStateConflict, false},
		{"rejected without task", observed{PG: "ORDER_REJECTED", RedisExists: true, Redis: "RESERVED"}, RuleEnsureCompensation, true},
		{"rejected, task pending", observed{PG: "ORDER_REJECTED", Task: "PENDING", RedisExists: true, Redis: "RESERVED"}, "", false},
		{"compensating without task", observed{PG: "COMPENSATING", RedisExists: true, Redis: "RESERVED"}, RuleEnsureCompensation, true},
		{"lua applied, pg not", observed{PG: "COMPENSATING", Task: "CLAIMED", RedisExists: true, Redis: "COMPENSATED", Marker: true}, RuleCompleteCompensation, true},
		{"lua applied, worker on it", observed{PG: "COMPENSATING", Task: "CLAIMED", TaskLive: true, RedisExists: true, Redis: "COMPENSATED", Marker: true}, "", false},
		{"lua applied, task gave up", observed{PG: "ORDER_REJECTED", Task: "MANUAL", Marker: true}, RuleCompleteCompensation, true},
		{"redis lost the reservation", observed{PG: "ORDER_REJECTED", Task: "MANUAL"}, RuleRedisReservationMissing, false},
		{"task manual for another reason", observed{PG: "COMPENSATING", Task: "MANUAL", RedisExists: true, Redis: "RESERVED"}, RuleCompensationManual, false},
		{"rejected but Redis has an order", observed{PG: "ORDER_REJECTED", Task: "PENDING", RedisExists: true, Redis: "ORDER_CREATED"}, RuleStateConflict, false},
		{"compensated everywhere", observed{PG: "COMPENSATED", Task: "APPLIED", RedisExists: true, Redis: "COMPENSATED"}, "", false},
		{"compensated, hash expired", observed{PG: "COMPENSATED", Task: "APPLIED"}, "", false},
		{"compensated vs live Redis", observed{PG: "COMPENSATED", Task: "APPLIED", RedisExists: true, Redis: "RESERVED"}, RuleCompensatedMismatch, false},
		{"frozen", observed{PG: "MANUAL_REVIEW", RedisExists: true, Redis: "COMPENSATED"}, RuleFrozen, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decide(c.o)
			if d.Rule != c.rule || d.Auto != c.auto {
				t.Fatalf("decide(%+v) = %+v, want rule %q auto %v", c.o, d, c.rule, c.auto)
			}
			if d.Rule != "" && d.Rule != RuleFrozen && !d.Auto && d.Severity != Critical {
				t.Fatalf("a manual finding of the reservation pass is critical: %+v", d)
			}
		})
	}
	if d := decide(observed{PG: "ORDER_CREATED", Order: "PAID", RedisExists: true, Redis: "COMPENSATED"}); !d.Freeze {
		t.Fatal("PAID vs COMPENSATED is frozen (design.md#auto-repair)")
	}
}
