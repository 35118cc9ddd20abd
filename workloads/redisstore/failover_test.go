package redisstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// Reserve keeps working through a real Sentinel failover under load: eight
// buyers reserve through the Sentinel client while the primary is killed.
// The promoted replica holds a consistent prefix of what was acknowledged
// (its counters conserve stock and match its reservation hashes), every
// reservation acknowledged before a WAIT checkpoint survived, and the
// buyers go on reserving on the new primary (the scripts are reloaded
// through the NOSCRIPT fallback).
func TestReserveThroughASentinelFailoverUnderLoad(t *testing.T) {
	fo := testenv.RedisFailover(t)
	c := fo.Client(t)
	f := newFixture(t, c, 1_000_000, 0)
	ctx := context.Background()

	type acked struct {
		id uuid.UUID
		at time.Time
	}
	var (
		mu            sync.Mutex
		ok            []acked
		unknown       []uuid.UUID // calls that failed: the script may still have run
		failed, after atomic.Int64
		user          atomic.Int64
		failedOver    atomic.Bool
		stop          = make(chan struct{})
		wg            sync.WaitGroup
		checkpoint    time.Time
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := f.request(user.Add(1), uuid.New())
				r.Now = time.Now()
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				res, err := f.s.Reserve(rctx, r)
				cancel()
				if err != nil || res.Code != redisstore.ReserveOK {
					failed.Add(1)
					mu.Lock()
					unknown = append(unknown, r.ReservationID)
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				ok = append(ok, acked{r.ReservationID, time.Now()})
				mu.Unlock()
				if failedOver.Load() {
					after.Add(1)
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	checkpoint = time.Now()
	fo.Replicated(t) // everything acknowledged before the checkpoint is on the replica
	time.Sleep(300 * time.Millisecond)
	fo.LosePrimary(t)
	failedOver.Store(true)
	require.Eventually(t, func() bool { return after.Load() >= 100 }, 30*time.Second, 50*time.Millisecond,
		"the buyers reserve again on the promoted replica")
	close(stop)
	wg.Wait()

	counters := f.counters(t)
	require.Zero(t, counters.Delta(), "the promoted replica conserves stock: %+v", counters)
	mu.Lock()
	defer mu.Unlock()
	var before, lost int
	for _, a := range ok {
		h, err := f.s.Reservation(ctx, f.slot, a.id)
		require.NoError(t, err)
		if a.at.Before(checkpoint) {
			before++
			require.NotNil(t, h, "a reservation acknowledged before the WAIT checkpoint survived the failover")
		}
		if h == nil {
			lost++
		}
	}
	// A call that failed (a timeout, a connection cut by the failover) has
	// an unknown outcome: the script may have run. Those found on the new
	// primary are counted too, so the counters must equal exactly the
	// reservation hashes it holds among everything that was attempted.
	var ranAnyway int
	for _, id := range unknown {
		h, err := f.s.Reservation(ctx, f.slot, id)
		require.NoError(t, err)
		if h != nil {
			ranAnyway++
		}
	}
	held := int(counters.Initial - counters.Available)
	require.Equal(t, int64(held), counters.OpenReserved, "every unit taken is an open reservation")
	require.Equal(t, len(ok)-lost+ranAnyway, held, "the counters count exactly the reservations the new primary holds")
	t.Logf("acknowledged %d (%d before the checkpoint), lost in the failover %d, failed calls %d (%d of them ran anyway), reserved after it %d",
		len(ok), before, lost, failed.Load(), ranAnyway, after.Load())
}
