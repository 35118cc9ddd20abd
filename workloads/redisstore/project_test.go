package redisstore_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// A received batch of order events goes to Redis in one pipeline and each
// event answers exactly as its single call does — applied, already
// applied, conflicting, missing — in the order given, also after Redis
// lost its scripts (each NOSCRIPT call runs alone, loading its script).
func TestProjectAnswersEachEventAsItsSingleCall(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		for _, flushed := range []bool{false, true} {
			ctx := context.Background()
			f := newFixture(t, c, 5, 1)
			a, b, r, x := f.reserve(t, 1), f.reserve(t, 2), f.reserve(t, 3), f.reserve(t, 4)
			orderA, orderB := ids.NewRandom(), ids.NewRandom()
			created := func(id, order uuid.UUID) redisstore.Projection {
				return redisstore.Projection{Kind: redisstore.ProjectCreated, Slot: f.slot, ReservationID: id, OrderID: order}
			}
			batch := []redisstore.Projection{
				created(a.ReservationID, orderA),
				created(a.ReservationID, orderA), // a redelivery in the same batch
				created(b.ReservationID, orderB),
				{Kind: redisstore.ProjectCancelled, Slot: f.slot, ReservationID: b.ReservationID, OrderID: orderB}, // after its creation, in order
				{Kind: redisstore.ProjectRejected, Slot: f.slot, ReservationID: r.ReservationID, Reason: "STOCK_EXHAUSTED"},
				{Kind: redisstore.ProjectRejected, Slot: f.slot, ReservationID: a.ReservationID, Reason: "STOCK_EXHAUSTED"}, // an order is never rejected
				created(ids.NewRandom(), ids.NewRandom()), // no hash: reported, never created
				{Kind: redisstore.ProjectionKind(99), Slot: f.slot, ReservationID: x.ReservationID},
			}
			if flushed {
				require.NoError(t, c.ScriptFlush(ctx).Err())
			}
			res, errs := f.s.Project(ctx, batch, f.now, ttl)
			want := []int64{1, 2, 1, 1, 1, -3, -1}
			for i, code := range want {
				require.NoError(t, errs[i], "event %d (flushed %v)", i, flushed)
				require.Equal(t, code, res[i].Code, "event %d (flushed %v): %s", i, flushed, res[i].Reason)
			}
			require.Error(t, errs[7], "an unknown kind is refused, not sent")
			// a ordered, b ordered then released, r rejected (open until
			// compensated), x open: 5 - 4 reserved + 1 released.
			require.Equal(t, redisstore.Counters{Initial: 5, Available: 2, OpenReserved: 2, Committed: 1, Exists: true}, f.counters(t))
			h, err := f.s.Reservation(ctx, f.slot, r.ReservationID)
			require.NoError(t, err)
			require.Equal(t, "ORDER_REJECTED", h["status"])
		}
	})
}

// A counter Redis holds as something other than an integer is an error for
// every reader (the invariant checker, the operator's deltas), never 0.
func TestUnreadableCounterIsAnError(t *testing.T) {
	c := testenv.RedisSingle(t)
	f := newFixture(t, c, 5, 1)
	ctx := context.Background()
	_, err := f.s.ReadCounters(ctx, f.slot)
	require.NoError(t, err)
	require.NoError(t, c.HSet(ctx, f.slot.Counter(), "committed", "many").Err())
	_, err = f.s.ReadCounters(ctx, f.slot)
	require.ErrorContains(t, err, "committed")
}
