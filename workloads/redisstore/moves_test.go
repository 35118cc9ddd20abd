package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// buckets provisions n buckets of one SKU with stock each, active.
func buckets(t *testing.T, s *redisstore.Store, n int, stock int64) []redisstore.Slot {
	t.Helper()
	ctx := context.Background()
	activity := time.Now().UnixNano() % 1_000_000_000_000
	slots := redisstore.Slots(activity, 90002, n)
	for _, sl := range slots {
		_, _, err := s.Provision(ctx, sl, stock, 1)
		require.NoError(t, err)
		require.NoError(t, s.SetWindow(ctx, sl, redisstore.WindowActive))
	}
	return slots
}

// skuCounters sums a SKU's buckets and checks every bucket conserves stock;
// the buckets read in one pipeline read as they do one by one.
func skuCounters(t *testing.T, s *redisstore.Store, slots []redisstore.Slot) redisstore.Counters {
	t.Helper()
	var total redisstore.Counters
	var each []redisstore.Counters
	for _, sl := range slots {
		c, err := s.ReadCounters(context.Background(), sl)
		require.NoError(t, err)
		require.Zero(t, c.Delta(), "bucket %s conserves stock: %+v", sl.Tag(), c)
		total = total.Add(c)
		each = append(each, c)
	}
	all, err := s.ReadCountersOf(context.Background(), slots)
	require.NoError(t, err)
	require.Equal(t, each, all)
	return total
}

func TestMoveStock(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := redisstore.New(c)
		require.NoError(t, redisstore.LoadScripts(ctx, c))
		now := time.Now()

		t.Run("half of the source, rounded up, at most max", func(t *testing.T) {
			sl := buckets(t, s, 3, 5)
			n, err := s.MoveStock(ctx, sl[1], sl[0], 100, now)
			require.NoError(t, err)
			require.Equal(t, int64(3), n) // ceil(5/2)
			n, err = s.MoveStock(ctx, sl[2], sl[0], 1, now)
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
			total := skuCounters(t, s, sl)
			require.Equal(t, int64(15), total.Available)
			require.Zero(t, total.InTransit())
			pending, err := s.PendingMoves(ctx, sl)
			require.NoError(t, err)
			require.Empty(t, pending)
			c0, _ := s.ReadCounters(ctx, sl[0])
			require.Equal(t, int64(9), c0.Available)
			require.Equal(t, int64(4), c0.MovedIn)
		})

		t.Run("an empty source moves nothing and writes nothing", func(t *testing.T) {
			sl := buckets(t, s, 2, 0)
			n, err := s.MoveStock(ctx, sl[1], sl[0], 10, now)
			require.NoError(t, err)
			require.Zero(t, n)
			require.Zero(t, c.Exists(ctx, sl[1].MovesOut()).Val())
			_, err = s.MoveStock(ctx, sl[1], sl[1], 10, now)
			require.Error(t, err, "a bucket cannot lend to itself")
		})

		t.Run("a crash between the halves is settled once", func(t *testing.T) {
			sl := buckets(t, s, 2, 4)
			id := uuid.New()
			amount, res, err := s.MoveOut(ctx, sl[1], id, 0, 10, now)
			require.NoError(t, err)
			require.Equal(t, int64(redisstore.MoveOutDone), res.Code)
			require.Equal(t, int64(2), amount)
			// The mover died here: the units are in transit, and said so.
			total := skuCounters(t, s, sl)
			require.Equal(t, int64(2), total.InTransit())
			require.Equal(t, int64(8), total.Available+total.InTransit())
			// The same move id again takes nothing more.
			again, res, err := s.MoveOut(ctx, sl[1], id, 0, 10, now)
			require.NoError(t, err)
			require.Equal(t, int64(redisstore.MoveOutAlready), res.Code)
			require.Equal(t, int64(2), again)

			// Too young: a live mover is most likely finishing it.
			done, err := s.Settle(ctx, sl, time.Minute, now)
			require.NoError(t, err)
			require.Zero(t, done)
			// Two settle passes racing each other add the units once.
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.Settle(ctx, sl, 0, now.Add(time.Second))
					require.NoError(t, err)
				}()
			}
			wg.Wait()
			total = skuCounters(t, s, sl)
			require.Zero(t, total.InTransit())
			require.Equal(t, int64(8), total.Available)
			// A stale copy of the move applied again adds nothing.
			res, err = s.MoveIn(ctx, sl[0], id, 2)
			require.NoError(t, err)
			require.Equal(t, int64(redisstore.MoveInAlready), res.Code)
			require.Equal(t, int64(8), skuCounters(t, s, sl).Available)
		})

		t.Run("a move into an unprovisioned bucket stays pending", func(t *testing.T) {
			sl := buckets(t, s, 2, 4)
			ghost := redisstore.BucketSlot(sl[0].ActivityID, sl[0].SKUID, 5)
			_, err := s.MoveStock(ctx, sl[1], ghost, 10, now)
			require.Error(t, err)
			pending, err := s.PendingMoves(ctx, sl)
			require.NoError(t, err)
			require.Len(t, pending, 1)
			require.Equal(t, ghost, pending[0].To)
			_, err = s.Settle(ctx, sl, 0, now)
			require.Error(t, err, "never dropped: it stays for a person")
		})

		t.Run("concurrent movers conserve stock", func(t *testing.T) {
			sl := buckets(t, s, 4, 25)
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 40 {
						src, dst := sl[(w+i)%4], sl[(w+i+1)%4]
						_, err := s.MoveStock(ctx, src, dst, 3, now)
						require.NoError(t, err)
					}
				}()
			}
			wg.Wait()
			total := skuCounters(t, s, sl)
			require.Zero(t, total.InTransit())
			require.Equal(t, int64(100), total.Available)
			require.Equal(t, total.MovedIn, total.MovedOut)
		})

		t.Run("recount keeps the moves", func(t *testing.T) {
			sl := buckets(t, s, 2, 6)
			_, err := s.MoveStock(ctx, sl[1], sl[0], 10, now)
			require.NoError(t, err)
			res, err := s.Recount(ctx, sl[0], 0, now)
			require.NoError(t, err)
			require.Equal(t, int64(redisstore.RecountUnchanged), res.Code, "%+v", res)
			require.Equal(t, int64(9), res.After.Available)
			require.Zero(t, res.After.Delta())
		})
	})
}

// A move that reserves sells the mover a unit in the same transaction as
// the units' arrival; an empty source moves and reserves nothing.
func TestMoveStockAndReserve(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		s := redisstore.New(c)
		require.NoError(t, redisstore.LoadScripts(ctx, c))
		now := time.UnixMilli(1782360000000)
		sl := buckets(t, s, 3, 0)
		_, _, err := s.Provision(ctx, sl[1], 5, 2) // a sibling with units, the buyer's bucket empty
		require.NoError(t, err)
		req := func(user int64) redisstore.ReserveRequest {
			return redisstore.ReserveRequest{Slot: sl[0], ReservationID: uuid.New(), MessageID: uuid.New(), RequestID: uuid.New(), UserID: user,
				Now: now, BusinessDeadline: now.Add(5 * time.Minute), SendDue: now.Add(5 * time.Second),
				RequestTTL: 10 * time.Minute, SchemaVersion: 1, KeyVersion: 1}
		}
		r := req(7)
		n, res, err := s.MoveStockAndReserve(ctx, sl[2], 64, now, r)
		require.NoError(t, err)
		require.Zero(t, n, "an empty source")
		require.Zero(t, res.Code, "nothing reserved")
		n, res, err = s.MoveStockAndReserve(ctx, sl[1], 64, now, r)
		require.NoError(t, err)
		require.Equal(t, int64(3), n) // ceil(5/2)
		require.Equal(t, int64(redisstore.ReserveOK), res.Code)
		c0, err := s.ReadCounters(ctx, sl[0])
		require.NoError(t, err)
		require.Equal(t, int64(2), c0.Available, "the mover's unit is reserved, the rest wait")
		require.Equal(t, int64(1), c0.OpenReserved)
		total := skuCounters(t, s, sl)
		require.Zero(t, total.InTransit())
		pending, err := s.PendingMoves(ctx, sl)
		require.NoError(t, err)
		require.Empty(t, pending)
		again, err := s.Reserve(ctx, r)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.ReserveReplayed), again.Code, "the request id maps to the reservation the move made")
		require.Equal(t, r.ReservationID.String(), again.ReservationID)
	})
}
