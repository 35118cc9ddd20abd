package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/states"
)

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

// Every transition a decision asks for is one its machine allows, over every
// combination of the two stores' states: a manual finding or a freeze moves
// the reservation to MANUAL_REVIEW, a completed compensation moves it to
// COMPENSATED, a rebuilt projection moves the Redis hash (or creates it) to
// ORDER_CREATED, the standard task is created only where none exists.
func TestDecisionsMoveOnlyAlongTheMachines(t *testing.T) {
	orders := append([]states.OrderStatus{""}, states.Order.States()...)
	tasks := append([]states.TaskStatus{""}, states.CompensationTask.States()...)
	hashes := states.RedisHash.States()
	decided := 0
	for _, pg := range states.Reservation.States() {
		for _, order := range orders {
			for _, task := range tasks {
				for _, hash := range append(hashes, "") {
					for _, flags := range []int{0, 1, 2, 3} {
						o := observed{PG: pg, Order: order, Task: task, RedisExists: hash != "", Redis: hash,
							TaskLive: flags&1 != 0 && task == states.TaskClaimed, Marker: flags&2 != 0}
						d := decide(o)
						if d.Rule == "" || d.Rule == RuleFrozen {
							continue
						}
						decided++
						switch {
						case d.Rule == RuleRebuildProjection:
							if o.RedisExists {
								require.NoError(t, states.RedisHash.Check(o.Redis, states.HashStatus(d.Target)), "%+v", o)
							} else {
								require.Contains(t, states.RedisHash.Initial, states.HashStatus(d.Target), "%+v", o)
							}
						case d.Rule == RuleEnsureCompensation:
							require.Empty(t, o.Task, "%+v: a second compensation task", o)
							require.Equal(t, targetTask, d.Target)
						case d.Rule == RuleCompleteCompensation:
							require.NoError(t, states.Reservation.Check(o.PG, states.ReservationStatus(d.Target)), "%+v", o)
						case !d.Auto:
							require.NoError(t, states.Reservation.Check(o.PG, states.ReservationStatus(d.Target)), "%+v", o)
						default:
							t.Fatalf("%+v: an automatic rule %s this test does not know", o, d.Rule)
						}
					}
				}
			}
		}
	}
	require.Greater(t, decided, 1000)
}
