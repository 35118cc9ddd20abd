package redisstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// reserveAll runs one reservation per request concurrently through b.
func reserveAll(b *redisstore.ReserveBatcher, reqs []redisstore.ReserveRequest) ([]redisstore.ReserveResult, []error) {
	res := make([]redisstore.ReserveResult, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = b.Reserve(context.Background(), r)
		}()
	}
	wg.Wait()
	return res, errs
}

// Batched reservations answer exactly as one by one: the stock sold once,
// one reservation per user, a replay gives the same reservation — and the
// calls really travel together.
func TestReserveBatcher(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		f := newFixture(t, c, 50, -1)
		b := redisstore.NewReserveBatcher(f.s, 2, 16)
		defer b.Close()
		reqs := make([]redisstore.ReserveRequest, 400)
		for i := range reqs {
			user := int64(1000 + i%200) // each user twice, with two request ids
			reqs[i] = f.request(user, ids.NewRandom())
		}
		res, errs := reserveAll(b, reqs)
		codes := map[int64]int{}
		holder := map[int64]string{}
		for i, r := range res {
			require.NoError(t, errs[i])
			codes[r.Code]++
			if r.Code == redisstore.ReserveOK {
				require.Empty(t, holder[reqs[i].UserID], "user %d reserved twice", reqs[i].UserID)
				holder[reqs[i].UserID] = reqs[i].ReservationID.String()
			}
		}
		require.Equal(t, 50, codes[redisstore.ReserveOK], "codes %v", codes)
		require.Equal(t, redisstore.Counters{Initial: 50, Available: 0, OpenReserved: 50, Exists: true}, f.counters(t))

		// Every request again: the winners replay their reservation.
		again, errs := reserveAll(b, reqs)
		for i, r := range again {
			require.NoError(t, errs[i])
			if res[i].Code == redisstore.ReserveOK {
				require.Equal(t, int64(redisstore.ReserveReplayed), r.Code)
				require.Equal(t, reqs[i].ReservationID.String(), r.ReservationID)
			} else {
				require.NotEqual(t, int64(redisstore.ReserveOK), r.Code)
			}
		}
		require.Equal(t, int64(0), f.counters(t).Available)

		trips, calls := b.Stats()
		require.Equal(t, int64(800), calls)
		require.Less(t, trips, calls, "800 concurrent calls went one round trip each")
	})
}

// A server that lost its scripts (restart, failover) answers NOSCRIPT to
// every call of a batch: each is loaded and run, none lost or doubled.
func TestReserveBatcherReloadsFlushedScripts(t *testing.T) {
	c := testenv.RedisSingle(t)
	f := newFixture(t, c, 30, -1)
	b := redisstore.NewReserveBatcher(f.s, 1, 64)
	defer b.Close()
	require.NoError(t, c.ScriptFlush(context.Background()).Err())
	reqs := make([]redisstore.ReserveRequest, 100)
	for i := range reqs {
		reqs[i] = f.request(int64(2000+i), ids.NewRandom())
	}
	res, errs := reserveAll(b, reqs)
	ok := 0
	for i, r := range res {
		require.NoError(t, errs[i])
		if r.Code == redisstore.ReserveOK {
			ok++
		}
	}
	require.Equal(t, 30, ok)
	require.Equal(t, redisstore.Counters{Initial: 30, Available: 0, OpenReserved: 30, Exists: true}, f.counters(t))
}

// After Close a call runs alone; a caller that gave up is told so.
func TestReserveBatcherAfterCloseAndCancel(t *testing.T) {
	c := testenv.RedisSingle(t)
	f := newFixture(t, c, 5, -1)
	b := redisstore.NewReserveBatcher(f.s, 1, 8)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Reserve(ctx, f.request(1, ids.NewRandom()))
	require.ErrorIs(t, err, context.Canceled)
	b.Close()
	res, err := b.Reserve(context.Background(), f.request(2, ids.NewRandom()))
	require.NoError(t, err)
	require.Equal(t, int64(redisstore.ReserveOK), res.Code)
}

// Batched send acknowledgements answer as AckSend does: each reservation
// marked PUBLISHED and its send_due entry gone, a lost lease left alone,
// a second ack answered "already" — and they travel together.
func TestAckBatcher(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 200, 2)
		b := redisstore.NewAckBatcher(f.s, 1, 32)
		defer b.Close()
		reqs := make([]redisstore.ReserveRequest, 150)
		for i := range reqs {
			reqs[i] = f.reserve(t, int64(5000+i))
		}
		ackAll := func(owned func(redisstore.ReserveRequest) int64) []int64 {
			codes := make([]int64, len(reqs))
			var wg sync.WaitGroup
			for i, r := range reqs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := b.AckSend(ctx, redisstore.SendAck{Slot: f.slot, ReservationID: r.ReservationID, Owned: owned(r), Now: f.now})
					require.NoError(t, err)
					codes[i] = res.Code
				}()
			}
			wg.Wait()
			return codes
		}
		// A stale owner (a lease it no longer holds) changes nothing.
		for _, code := range ackAll(func(r redisstore.ReserveRequest) int64 { return r.SendDue.UnixMilli() - 1 }) {
			require.Equal(t, int64(2), code, "lost lease")
		}
		for _, code := range ackAll(func(r redisstore.ReserveRequest) int64 { return r.SendDue.UnixMilli() }) {
			require.Equal(t, int64(1), code)
		}
		for _, r := range reqs {
			h, err := f.s.Reservation(ctx, f.slot, r.ReservationID)
			require.NoError(t, err)
			require.Equal(t, "PUBLISHED", h["mq_state"])
		}
		n, err := c.ZCard(ctx, f.slot.SendDue()).Result()
		require.NoError(t, err)
		require.Zero(t, n)
		for _, code := range ackAll(func(r redisstore.ReserveRequest) int64 { return r.SendDue.UnixMilli() }) {
			require.Equal(t, int64(3), code, "already acknowledged")
		}
		trips, calls := b.Stats()
		require.Equal(t, int64(3*len(reqs)), calls)
		require.Less(t, trips, calls, "acknowledgements travel together")
		t.Logf("%d acknowledgements in %d round trips", calls, trips)
	})
}
