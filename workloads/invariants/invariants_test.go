package invariants_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testsale"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/repair"
)

// settledSale is a finished sale on the real PostgreSQL and Redis: 3 units
// in Redis, 2 in PostgreSQL, 3 buyers — two orders projected, one rejection
// compensated, every outbox event marked sent as the relay would.
func settledSale(t *testing.T) (*testsale.Sale, []string) {
	t.Helper()
	s := testsale.New(t, 2, 3)
	var rids []string
	for user := int64(1); user <= 3; user++ {
		msg, out := s.Buy(t, user)
		rids = append(rids, msg.ReservationID.String())
		if out.Result == orderstore.ResultOrderCreated {
			s.Project(t, msg, out.OrderID)
		}
	}
	s.CompensateAll(t)
	s.Exec(t, `UPDATE event_outbox SET status = 'SENT', sent_at = clock_timestamp() WHERE payload->>'activity_id' = $1::bigint::text`, s.Activity)
	return s, rids
}

func run(t *testing.T, s *testsale.Sale, exp invariants.Expect) invariants.Report {
	t.Helper()
	r, err := invariants.Run(context.Background(), invariants.Sources{Pool: s.Pool, Redis: s.Redis}, s.Activity, nil, exp)
	require.NoError(t, err)
	return r
}

func TestASettledSaleHoldsEveryInvariant(t *testing.T) {
	s, _ := settledSale(t)
	r := run(t, s, invariants.Expect{Settled: true})
	require.True(t, r.OK(), r.String())
	require.GreaterOrEqual(t, len(r.Checks), 20, r.String())
	// The buckets are found in Redis when the caller does not name them.
	named, err := invariants.Run(context.Background(), invariants.Sources{Pool: s.Pool, Redis: s.Redis}, s.Activity,
		[]invariants.SKU{{ID: testsale.SKUID, Buckets: 1}}, invariants.Expect{Settled: true})
	require.NoError(t, err)
	require.Equal(t, r.Checks, named.Checks)
}

// Each broken promise is seen by the check named for it, and only a settled
// sale is held to "nothing in flight".
func TestEachBrokenInvariantFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, s *testsale.Sale, rids []string)
		exp    invariants.Expect
		fails  []string
	}{
		{"a unit taken without an order or ledger entry", func(t *testing.T, s *testsale.Sale, _ []string) {
			s.Exec(t, `UPDATE sku_inventory SET available_stock = available_stock + 1, occupied_stock = occupied_stock - 1 WHERE activity_id = $1`, s.Activity)
		}, invariants.Expect{Settled: true}, []string{"ledger balanced", "orders agree with the stock", "Redis committed = PostgreSQL"}},
		{"Redis counts a unit twice", func(t *testing.T, s *testsale.Sale, _ []string) {
			require.NoError(t, s.Redis.Client().HIncrBy(context.Background(), s.Slot.Counter(), "committed", 1).Err())
		}, invariants.Expect{Settled: true}, []string{"Redis per bucket", "Redis committed = PostgreSQL"}},
		{"an outbox event never sent", func(t *testing.T, s *testsale.Sale, _ []string) {
			s.Exec(t, `UPDATE event_outbox SET status = 'PENDING' WHERE payload->>'activity_id' = $1::bigint::text AND event_type = 'ORDER_CREATED'`, s.Activity)
		}, invariants.Expect{Settled: true}, []string{"no orphan outbox event"}},
		{"an outbox event given up", func(t *testing.T, s *testsale.Sale, _ []string) {
			s.Exec(t, `UPDATE event_outbox SET status = 'MANUAL' WHERE payload->>'activity_id' = $1::bigint::text AND event_type = 'ORDER_CREATED'`, s.Activity)
		}, invariants.Expect{Within: time.Hour}, []string{"no orphan outbox event"}},
		{"a compensation never applied", func(t *testing.T, s *testsale.Sale, rids []string) {
			s.Exec(t, `UPDATE compensation_task SET status = 'PENDING' WHERE reservation_id = ANY($1::uuid[])`, rids)
		}, invariants.Expect{Settled: true}, []string{"no orphan compensation task"}},
		{"a reservation left open", func(t *testing.T, s *testsale.Sale, rids []string) {
			s.Exec(t, `UPDATE inventory_reservation SET status = 'ORDER_REJECTED' WHERE reservation_id = ANY($1::uuid[]) AND status = 'COMPENSATED'`, rids)
		}, invariants.Expect{Settled: true}, []string{"every accepted reservation terminal"}},
		{"a reservation left open, older than the bound", func(t *testing.T, s *testsale.Sale, rids []string) {
			s.Exec(t, `UPDATE inventory_reservation SET status = 'ORDER_REJECTED', created_at = created_at - interval '1 hour' WHERE reservation_id = ANY($1::uuid[]) AND status = 'COMPENSATED'`, rids)
		}, invariants.Expect{Within: time.Minute}, []string{"every accepted reservation terminal"}},
		{"an order whose reservation says otherwise", func(t *testing.T, s *testsale.Sale, rids []string) {
			s.Exec(t, `UPDATE inventory_reservation SET status = 'COMPENSATED' WHERE reservation_id = ANY($1::uuid[]) AND status = 'ORDER_CREATED'`, rids)
		}, invariants.Expect{Settled: true}, []string{"every order's reservation is ORDER_CREATED"}},
		{"a message quarantined nobody accounts for", func(t *testing.T, s *testsale.Sale, rids []string) {
			s.Exec(t, `INSERT INTO message_quarantine (quarantine_id, consumer_group, topic, broker_message_id, message_id, reason_code, detail, payload, payload_hash)
				SELECT $1::uuid, 'g', 't', 'b-' || $1::uuid::text, message_id, 'TEST', 'injected', '\x7b7d', sha256('\x7b7d') FROM inventory_reservation WHERE reservation_id = $2`,
				ids.NewRandom(), rids[0])
		}, invariants.Expect{Settled: true}, []string{"every quarantined message accounted for"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rids := settledSale(t)
			tc.break_(t, s, rids)
			r := run(t, s, tc.exp)
			failed := strings.Join(r.Failed(), "\n")
			for _, want := range tc.fails {
				require.Contains(t, failed, want, r.String())
			}
		})
	}
}

// A sale still running is not held to "nothing in flight": a reservation
// taken just now, not yet consumed, passes within the bound.
func TestARunningSaleIsJudgedWithinItsBound(t *testing.T) {
	s, _ := settledSale(t)
	require.NoError(t, s.Redis.Client().HIncrBy(context.Background(), s.Slot.Counter(), "initial", 1).Err())
	require.NoError(t, s.Redis.Client().IncrBy(context.Background(), s.Slot.Stock(), 1).Err())
	s.Exec(t, `UPDATE sku_inventory SET initial_stock = initial_stock + 1, available_stock = available_stock + 1 WHERE activity_id = $1`, s.Activity)
	s.Reserve(t, 99, time.Hour, true)
	require.True(t, run(t, s, invariants.Expect{Within: time.Minute}).OK())
	settled := run(t, s, invariants.Expect{Settled: true})
	require.Contains(t, strings.Join(settled.Failed(), "\n"), "nothing open")
}

// A query that fails fails the check: no zero read as clean.
func TestAQueryErrorFailsTheCheck(t *testing.T) {
	s, _ := settledSale(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := invariants.Run(ctx, invariants.Sources{Pool: s.Pool, Redis: s.Redis}, s.Activity, nil, invariants.Expect{Settled: true})
	require.Error(t, err)
	_, err = invariants.Run(context.Background(), invariants.Sources{Pool: s.Pool}, s.Activity, nil, invariants.Expect{})
	require.Error(t, err)
}

// A reservation frozen for review keeps its order: the freeze remembers it
// was ORDER_CREATED, and the caller says how many it froze.
func TestAFrozenOrderedReservationIsExpected(t *testing.T) {
	s, rids := settledSale(t)
	var ordered uuid.UUID
	for _, id := range rids {
		if s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, id) == "ORDER_CREATED" {
			ordered = uuid.MustParse(id)
		}
	}
	_, err := (&repair.Store{Pool: s.Pool}).Freeze(context.Background(), ordered, repair.Audit{Operator: "t", Reason: "review"}, nil, nil)
	require.NoError(t, err)
	r := run(t, s, invariants.Expect{Settled: true, ManualReview: 1})
	require.True(t, r.OK(), r.String())
	require.False(t, run(t, s, invariants.Expect{Settled: true}).OK(), "an unexpected freeze is reported")
}
