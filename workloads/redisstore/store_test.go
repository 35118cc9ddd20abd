package redisstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

var ttl = time.Hour

// fixture is one provisioned, active slot with a unique activity id.
type fixture struct {
	s    *redisstore.Store
	slot redisstore.Slot
	ring *ids.Keyring
	now  time.Time
}

func newFixture(t *testing.T, c redis.UniversalClient, stock int64, bucket int) *fixture {
	t.Helper()
	ctx := context.Background()
	ring, err := ids.NewKeyring(1, map[byte][]byte{1: []byte("0123456789abcdef0123456789abcdef")})
	require.NoError(t, err)
	s := redisstore.New(c)
	require.NoError(t, redisstore.LoadScripts(ctx, c))
	activity := time.Now().UnixNano() % 1_000_000_000_000
	slot := redisstore.BucketSlot(activity, 90001, bucket)
	if bucket < 0 {
		slot = redisstore.SKUSlot(activity, 90001)
	}
	res, initial, err := s.Provision(ctx, slot, stock, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Code)
	require.Equal(t, stock, initial)
	require.NoError(t, s.SetWindow(ctx, slot, redisstore.WindowActive))
	return &fixture{s: s, slot: slot, ring: ring, now: time.UnixMilli(1782360000000)}
}

func (f *fixture) request(user int64, req uuid.UUID) redisstore.ReserveRequest {
	rid := f.ring.ReservationID(ids.ReservationKey{ActivityID: f.slot.ActivityID, SKUID: f.slot.SKUID, UserID: user, RequestID: req})
	mid, _ := f.ring.MessageID(rid, 1)
	return redisstore.ReserveRequest{Slot: f.slot, ReservationID: rid, MessageID: mid, RequestID: req, UserID: user,
		Now: f.now, BusinessDeadline: f.now.Add(5 * time.Minute), SendDue: f.now.Add(5 * time.Second),
		RequestTTL: 10 * time.Minute, SchemaVersion: 1, KeyVersion: 1, TraceID: "trace"}
}

func (f *fixture) reserve(t *testing.T, user int64) redisstore.ReserveRequest {
	t.Helper()
	r := f.request(user, ids.NewRandom())
	res, err := f.s.Reserve(context.Background(), r)
	require.NoError(t, err)
	require.Equal(t, int64(redisstore.ReserveOK), res.Code, res.Reason)
	return r
}

func (f *fixture) counters(t *testing.T) redisstore.Counters {
	t.Helper()
	c, err := f.s.ReadCounters(context.Background(), f.slot)
	require.NoError(t, err)
	return c
}

func (f *fixture) setStatus(t *testing.T, rid uuid.UUID, status string) {
	t.Helper()
	require.NoError(t, f.s.Client().HSet(context.Background(), f.slot.Reservation(rid), "status", status).Err())
}

func eachRedis(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	for name, c := range testenv.Redises(t) {
		t.Run(name, func(t *testing.T) { fn(t, c) })
	}
}

func TestReserve(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 2, 3)

		r := f.reserve(t, 7)
		// Everything of design.md#send, design.md#redis-keys is there.
		h, err := f.s.Reservation(ctx, f.slot, r.ReservationID)
		require.NoError(t, err)
		for k, want := range map[string]string{"status": "RESERVED", "mq_state": "PENDING",
			"reservation_id": r.ReservationID.String(), "message_id": r.MessageID.String(),
			"request_id": r.RequestID.String(), "user_id": "7", "sku_id": "90001", "bucket": "3",
			"schema_version": "1", "key_version": "1", "reserved_at_ms": "1782360000000",
			"business_deadline_ms": "1782360300000", "send_attempts": "0", "trace_id": "trace"} {
			require.Equal(t, want, h[k], k)
		}
		ttl, err := c.PTTL(ctx, f.slot.Reservation(r.ReservationID)).Result()
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttl, "a non-terminal reservation must not expire")
		score, err := c.ZScore(ctx, f.slot.SendDue(), r.ReservationID.String()).Result()
		require.NoError(t, err)
		require.Equal(t, float64(r.SendDue.UnixMilli()), score)
		mapped, err := c.Get(ctx, f.slot.Request(7, r.RequestID)).Result()
		require.NoError(t, err)
		require.Equal(t, r.ReservationID.String(), mapped)
		require.Equal(t, redisstore.Counters{Initial: 2, Available: 1, OpenReserved: 1, Exists: true}, f.counters(t))

		// A replayed request returns the original reservation and writes nothing.
		res, err := f.s.Reserve(ctx, r)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.ReserveReplayed), res.Code)
		require.Equal(t, r.ReservationID.String(), res.ReservationID)
		require.Equal(t, "RESERVED", res.Status)
		require.Equal(t, int64(1), f.counters(t).Available)

		// One reservation per user: a new request id of the same user is refused.
		res, err = f.s.Reserve(ctx, f.request(7, ids.NewRandom()))
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.ReserveAlreadyPurchased), res.Code)
		require.Equal(t, r.ReservationID.String(), res.ReservationID)

		f.reserve(t, 8)
		// Sold out writes nothing.
		r9 := f.request(9, ids.NewRandom())
		res, err = f.s.Reserve(ctx, r9)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.ReserveSoldOut), res.Code)
		require.Equal(t, "SOLD_OUT", res.Reason)
		n, err := c.Exists(ctx, f.slot.Reservation(r9.ReservationID), f.slot.Request(9, r9.RequestID), f.slot.User(9)).Result()
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, redisstore.Counters{Initial: 2, Available: 0, OpenReserved: 2, Exists: true}, f.counters(t))
		require.Zero(t, f.counters(t).Delta())
	})
}

func TestReserveWindowIsCheckedBeforeStock(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 5, -1)
		for state, reason := range map[string]string{
			redisstore.WindowNotStarted: "ACTIVITY_NOT_STARTED",
			redisstore.WindowPaused:     "ACTIVITY_PAUSED",
			redisstore.WindowEnded:      "ACTIVITY_ENDED",
		} {
			require.NoError(t, f.s.SetWindow(ctx, f.slot, state))
			r := f.request(7, ids.NewRandom())
			res, err := f.s.Reserve(ctx, r)
			require.NoError(t, err)
			require.Equal(t, int64(redisstore.ReserveWindowClosed), res.Code)
			require.Equal(t, reason, res.Reason)
			require.Equal(t, int64(5), f.counters(t).Available, "a closed window writes nothing")
		}
		require.Error(t, f.s.SetWindow(ctx, f.slot, "OPEN"))
		require.NoError(t, c.Del(ctx, f.slot.Window()).Err())
		res, err := f.s.Reserve(ctx, f.request(7, ids.NewRandom()))
		require.NoError(t, err)
		require.Equal(t, "ACTIVITY_NOT_PROVISIONED", res.Reason)

		// Stock key missing is not "sold out" and never becomes stock.
		require.NoError(t, f.s.SetWindow(ctx, f.slot, redisstore.WindowActive))
		require.NoError(t, c.Del(ctx, f.slot.Stock()).Err())
		res, err = f.s.Reserve(ctx, f.request(7, ids.NewRandom()))
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.ReserveNotProvisioned), res.Code)
	})
}

// design.md#compensation: every row of the compensation Lua table, plus every return code.
func TestCompensateTable(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		cases := []struct {
			name      string
			setup     func(f *fixture, rid uuid.UUID)
			rid       func(rid uuid.UUID) uuid.UUID
			compID    string
			wantCode  int64
			wantStock int64 // available after the call (stock 3, one reserved → 2 before)
		}{
			{name: "RESERVED first compensation", wantCode: 1, wantStock: 3},
			{name: "COMPENSATED repeated", setup: func(f *fixture, rid uuid.UUID) {
				res, err := f.s.Compensate(ctx, f.slot, rid, "comp-1", f.now, ttl)
				require.NoError(t, err)
				require.Equal(t, int64(1), res.Code)
			}, wantCode: 2, wantStock: 3},
			{name: "ORDER_CREATED refused", setup: func(f *fixture, rid uuid.UUID) { f.setStatus(t, rid, "ORDER_CREATED") }, wantCode: -3, wantStock: 2},
			{name: "PAID refused", setup: func(f *fixture, rid uuid.UUID) { f.setStatus(t, rid, "PAID") }, wantCode: -3, wantStock: 2},
			{name: "key missing", setup: func(f *fixture, rid uuid.UUID) {
				require.NoError(t, c.Del(ctx, f.slot.Reservation(rid)).Err())
			}, wantCode: -1, wantStock: 2},
			{name: "different compensation id", setup: func(f *fixture, rid uuid.UUID) {
				_, err := f.s.Compensate(ctx, f.slot, rid, "comp-other", f.now, ttl)
				require.NoError(t, err)
			}, wantCode: -5, wantStock: 3},
			{name: "COMPENSATING retry", setup: func(f *fixture, rid uuid.UUID) { f.setStatus(t, rid, "COMPENSATING") }, wantCode: 1, wantStock: 3},
			{name: "ORDER_REJECTED", setup: func(f *fixture, rid uuid.UUID) { f.setStatus(t, rid, "ORDER_REJECTED") }, wantCode: 1, wantStock: 3},
			{name: "reservation id mismatch", setup: func(f *fixture, rid uuid.UUID) {
				require.NoError(t, c.HSet(ctx, f.slot.Reservation(rid), "reservation_id", "someone-else").Err())
			}, wantCode: -2, wantStock: 2},
			{name: "invalid status", setup: func(f *fixture, rid uuid.UUID) { f.setStatus(t, rid, "MANUAL_REVIEW") }, wantCode: -4, wantStock: 2},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				f := newFixture(t, c, 3, 0)
				r := f.reserve(t, 7)
				if tc.setup != nil {
					tc.setup(f, r.ReservationID)
				}
				res, err := f.s.Compensate(ctx, f.slot, r.ReservationID, "comp-1", f.now, ttl)
				require.NoError(t, err)
				require.Equal(t, tc.wantCode, res.Code, res.Reason)
				cn := f.counters(t)
				require.Equal(t, tc.wantStock, cn.Available)
				if res.Code == 1 {
					require.Zero(t, cn.OpenReserved)
					require.Zero(t, cn.Delta())
					h, _ := f.s.Reservation(ctx, f.slot, r.ReservationID)
					require.Equal(t, "COMPENSATED", h["status"])
					n, _ := c.Exists(ctx, f.slot.Compensation(r.ReservationID)).Result()
					require.Equal(t, int64(1), n)
					pttl, _ := c.PTTL(ctx, f.slot.Reservation(r.ReservationID)).Result()
					require.Greater(t, pttl, time.Duration(0), "a terminal reservation gets its GC TTL")
					_, err := c.ZScore(ctx, f.slot.SendDue(), r.ReservationID.String()).Result()
					require.ErrorIs(t, err, redis.Nil, "nothing left to send")
				}
			})
		}
	})
}

// design.md#invariants at the Lua level: one compensation run 10,000 times at once.
func TestCompensateConcurrentOnce(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 1, 1)
		r := f.reserve(t, 7)
		var applied, already, other atomic.Int64
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		for range 10000 {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				res, err := f.s.Compensate(ctx, f.slot, r.ReservationID, "RELEASE_REDIS_RESERVATION:"+r.ReservationID.String(), f.now, ttl)
				switch {
				case err != nil:
					other.Add(1)
				case res.Code == 1:
					applied.Add(1)
				case res.Code == 2:
					already.Add(1)
				default:
					other.Add(1)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, int64(1), applied.Load())
		require.Equal(t, int64(9999), already.Load())
		require.Zero(t, other.Load())
		require.Equal(t, redisstore.Counters{Initial: 1, Available: 1, Exists: true}, f.counters(t))
	})
}

// 1,000 requests of one user with different request ids → one reservation.
func TestReserveOnePerUserUnderConcurrency(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 100, -1)
		var ok, dup atomic.Int64
		var wg sync.WaitGroup
		for range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := f.s.Reserve(ctx, f.request(42, ids.NewRandom()))
				if err == nil && res.Code == redisstore.ReserveOK {
					ok.Add(1)
				} else if err == nil && res.Code == redisstore.ReserveAlreadyPurchased {
					dup.Add(1)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, int64(1), ok.Load())
		require.Equal(t, int64(999), dup.Load())
		require.Equal(t, redisstore.Counters{Initial: 100, Available: 99, OpenReserved: 1, Exists: true}, f.counters(t))
	})
}

func TestProjectionAndRelease(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 3, 2)
		order := ids.NewRandom()

		a := f.reserve(t, 1)
		for i, want := range []int64{1, 2, 2} { // project is idempotent
			res, err := f.s.ProjectOrderCreated(ctx, f.slot, a.ReservationID, order, f.now)
			require.NoError(t, err)
			require.Equal(t, want, res.Code, "call %d", i)
		}
		require.Equal(t, redisstore.Counters{Initial: 3, Available: 2, OpenReserved: 0, Committed: 1, Exists: true}, f.counters(t))
		res, err := f.s.Compensate(ctx, f.slot, a.ReservationID, "c", f.now, ttl)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.CompensateOrderExists), res.Code, "an order is never compensated")

		for i, want := range []int64{1, 2, 2} { // release is idempotent
			res, err := f.s.ReleaseAfterCancel(ctx, f.slot, a.ReservationID, order, f.now, ttl)
			require.NoError(t, err)
			require.Equal(t, want, res.Code, "call %d", i)
		}
		require.Equal(t, redisstore.Counters{Initial: 3, Available: 3, Exists: true}, f.counters(t))

		// A cancel that overtakes the ORDER_CREATED projection: released from
		// open_reserved, and the late projection changes nothing.
		b := f.reserve(t, 2)
		res, err = f.s.ReleaseAfterCancel(ctx, f.slot, b.ReservationID, order, f.now, ttl)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Code)
		res, err = f.s.ProjectOrderCreated(ctx, f.slot, b.ReservationID, order, f.now)
		require.NoError(t, err)
		require.Equal(t, int64(2), res.Code)
		require.Equal(t, redisstore.Counters{Initial: 3, Available: 3, Exists: true}, f.counters(t))

		// A compensated reservation conflicts with a later projection or release.
		d := f.reserve(t, 3)
		_, err = f.s.Compensate(ctx, f.slot, d.ReservationID, "c", f.now, ttl)
		require.NoError(t, err)
		res, err = f.s.ProjectOrderCreated(ctx, f.slot, d.ReservationID, order, f.now)
		require.NoError(t, err)
		require.Equal(t, int64(-3), res.Code)
		res, err = f.s.ReleaseAfterCancel(ctx, f.slot, d.ReservationID, order, f.now, ttl)
		require.NoError(t, err)
		require.Equal(t, int64(-3), res.Code)

		// Missing keys are reported, never turned into counter changes.
		missing := ids.NewRandom()
		before := f.counters(t)
		res, err = f.s.ProjectOrderCreated(ctx, f.slot, missing, order, f.now)
		require.NoError(t, err)
		require.Equal(t, int64(-1), res.Code)
		res, err = f.s.ReleaseAfterCancel(ctx, f.slot, missing, order, f.now, ttl)
		require.NoError(t, err)
		require.Equal(t, int64(-1), res.Code)
		require.Equal(t, before, f.counters(t))
		require.Zero(t, before.Delta())
	})
}

// ORDER_REJECTED is shown in the projection (GET answers it with its
// reason) without touching stock or counters; the compensator then takes it
// to COMPENSATED with the unit back, once. An order's hash is never marked
// rejected, and a missing hash is reported, never created.
func TestProjectRejection(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 3, 2)
		a := f.reserve(t, 1)
		before := f.counters(t)
		for i, want := range []int64{1, 2} {
			res, err := f.s.ProjectOrderRejected(ctx, f.slot, a.ReservationID, "STOCK_EXHAUSTED", f.now)
			require.NoError(t, err)
			require.Equal(t, want, res.Code, "call %d", i)
		}
		h, err := f.s.Reservation(ctx, f.slot, a.ReservationID)
		require.NoError(t, err)
		require.Equal(t, "ORDER_REJECTED", h["status"])
		require.Equal(t, "STOCK_EXHAUSTED", h["reason_code"])
		require.Equal(t, before, f.counters(t), "stock and counters untouched")
		res, err := f.s.Compensate(ctx, f.slot, a.ReservationID, "c", f.now, ttl)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Code, "a rejected reservation is compensated")
		require.Equal(t, redisstore.Counters{Initial: 3, Available: 3, Exists: true}, f.counters(t))
		res, err = f.s.ProjectOrderRejected(ctx, f.slot, a.ReservationID, "STOCK_EXHAUSTED", f.now)
		require.NoError(t, err)
		require.Equal(t, int64(2), res.Code, "a late rejection after compensation changes nothing")

		b := f.reserve(t, 2)
		_, err = f.s.ProjectOrderCreated(ctx, f.slot, b.ReservationID, ids.NewRandom(), f.now)
		require.NoError(t, err)
		res, err = f.s.ProjectOrderRejected(ctx, f.slot, b.ReservationID, "STOCK_EXHAUSTED", f.now)
		require.NoError(t, err)
		require.Equal(t, int64(-3), res.Code)

		before = f.counters(t)
		res, err = f.s.ProjectOrderRejected(ctx, f.slot, ids.NewRandom(), "STOCK_EXHAUSTED", f.now)
		require.NoError(t, err)
		require.Equal(t, int64(-1), res.Code)
		require.Equal(t, before, f.counters(t))
	})
}

func TestSendDueLeases(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 10, 4)
		a := f.reserve(t, 1)
		b := f.reserve(t, 2)
		due := f.now.Add(5 * time.Second)

		// Nothing is due before the first due time (the gateway's own send window).
		claims, err := f.s.ClaimDue(ctx, f.slot, f.now, time.Second, 10)
		require.NoError(t, err)
		require.Empty(t, claims)

		// The gateway's immediate send acks with the first due time.
		res, err := f.s.AckSend(ctx, f.slot, a.ReservationID, due.UnixMilli(), f.now, 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Code)
		h, _ := f.s.Reservation(ctx, f.slot, a.ReservationID)
		require.Equal(t, "PUBLISHED", h["mq_state"])

		// b is due: two scanners claim at once, only one gets it for the lease.
		t1 := due.Add(time.Millisecond)
		var got [2][]redisstore.Claim
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				got[i], _ = f.s.ClaimDue(ctx, f.slot, t1, 30*time.Second, 10)
			}(i)
		}
		wg.Wait()
		require.Equal(t, 1, len(got[0])+len(got[1]), "one entry, one owner per lease")
		claim := append(got[0], got[1]...)[0]
		require.Equal(t, b.ReservationID, claim.ReservationID)
		// The entry survives the claim (never ZPOPMIN): its score is the lease.
		score, err := c.ZScore(ctx, f.slot.SendDue(), b.ReservationID.String()).Result()
		require.NoError(t, err)
		require.Equal(t, float64(claim.Lease), score)

		// Unknown outcome: rescheduled with backoff, state UNKNOWN, same message id.
		next := t1.Add(2 * time.Second)
		res, err = f.s.RescheduleSend(ctx, f.slot, b.ReservationID, claim.Lease, next, redisstore.MQUnknown, "send timeout")
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Code)
		h, _ = f.s.Reservation(ctx, f.slot, b.ReservationID)
		require.Equal(t, "UNKNOWN", h["mq_state"])
		require.Equal(t, "1", h["send_attempts"])
		require.Equal(t, b.MessageID.String(), h["message_id"])
		res, err = f.s.RescheduleSend(ctx, f.slot, b.ReservationID, claim.Lease, next, "LOST", "x")
		require.NoError(t, err)
		require.Equal(t, int64(-2), res.Code)

		// A scanner that dies after claiming: the lease expires, another claims it.
		c1, err := f.s.ClaimDue(ctx, f.slot, next, time.Second, 10)
		require.NoError(t, err)
		require.Len(t, c1, 1)
		c2, err := f.s.ClaimDue(ctx, f.slot, next.Add(1500*time.Millisecond), time.Second, 10)
		require.NoError(t, err)
		require.Len(t, c2, 1)
		// The first owner's late ack sees it lost the lease and leaves the entry.
		res, err = f.s.AckSend(ctx, f.slot, b.ReservationID, c1[0].Lease, next, 0)
		require.NoError(t, err)
		require.Equal(t, int64(2), res.Code)
		res, err = f.s.RescheduleSend(ctx, f.slot, b.ReservationID, c1[0].Lease, next, redisstore.MQPending, "late")
		require.NoError(t, err)
		require.Equal(t, int64(2), res.Code)
		// The current owner acks; the entry is gone.
		res, err = f.s.AckSend(ctx, f.slot, b.ReservationID, c2[0].Lease, next, 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Code)
		n, err := c.ZCard(ctx, f.slot.SendDue()).Result()
		require.NoError(t, err)
		require.Zero(t, n)
		res, err = f.s.AckSend(ctx, f.slot, b.ReservationID, c2[0].Lease, next, 0)
		require.NoError(t, err)
		require.Equal(t, int64(3), res.Code)
	})
}

// A broker's acknowledgement does not promise a delivery: with a resend
// bound the acked entry stays, due again after the bound (doubled with each
// send), so the scanner sends an undecided reservation again with the same
// id; the reservation's projection removes it, and then nothing is resent.
func TestSentReservationsAreVerified(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 10, 4)
		a := f.reserve(t, 1)
		first := f.now.Add(5 * time.Second) // the gateway's send window
		res, err := f.s.AckSend(ctx, f.slot, a.ReservationID, first.UnixMilli(), f.now, time.Minute)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Code)
		score := func() float64 {
			v, err := c.ZScore(ctx, f.slot.SendDue(), a.ReservationID.String()).Result()
			require.NoError(t, err)
			return v
		}
		require.Equal(t, float64(f.now.Add(time.Minute).UnixMilli()), score(), "kept, due after the bound")

		claims, err := f.s.ClaimDue(ctx, f.slot, f.now.Add(59*time.Second), time.Second, 10)
		require.NoError(t, err)
		require.Empty(t, claims, "not before the bound")
		at := f.now.Add(61 * time.Second)
		claims, err = f.s.ClaimDue(ctx, f.slot, at, time.Second, 10)
		require.NoError(t, err)
		require.Len(t, claims, 1, "undecided after the bound: due to be sent again")
		res, err = f.s.AckSend(ctx, f.slot, a.ReservationID, claims[0].Lease, at, time.Minute)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Code)
		require.Equal(t, float64(at.Add(2*time.Minute).UnixMilli()), score(), "the second send waits twice as long")

		// The order's projection ends the verification.
		pr, err := f.s.ProjectOrderCreated(ctx, f.slot, a.ReservationID, uuid.New(), at)
		require.NoError(t, err)
		require.True(t, pr.OK(), pr.Reason)
		n, err := c.ZCard(ctx, f.slot.SendDue()).Result()
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

func TestProvisionOncePerGeneration(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 10, 5) // generation 1, 10 units
		f.reserve(t, 1)
		res, initial, err := f.s.Provision(ctx, f.slot, 10, 1)
		require.NoError(t, err)
		require.Equal(t, int64(2), res.Code)
		require.Equal(t, int64(10), initial)
		// Stock increase in generation 2, applied once however often it is retried.
		for i, want := range []int64{1, 2, 2} {
			res, _, err = f.s.Provision(ctx, f.slot, 15, 2)
			require.NoError(t, err)
			require.Equal(t, want, res.Code, "call %d", i)
		}
		require.Equal(t, redisstore.Counters{Initial: 15, Available: 14, OpenReserved: 1, Exists: true}, f.counters(t))
		res, _, err = f.s.Provision(ctx, f.slot, 12, 3)
		require.NoError(t, err)
		require.Equal(t, int64(-1), res.Code, "stock only grows")
		res, _, err = f.s.Provision(ctx, f.slot, -5, 4)
		require.NoError(t, err)
		require.Equal(t, int64(-2), res.Code)
		require.Zero(t, f.counters(t).Delta())
	})
}

// A script flushed from the server (restart, failover) is reloaded through
// the EVAL fallback.
func TestNoScriptFallback(t *testing.T) {
	c := testenv.RedisSingle(t)
	ctx := context.Background()
	f := newFixture(t, c, 1, -1)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	f.reserve(t, 1)
}

// The open set is the order-create backlog: a reservation enters it when
// reserved and leaves it once PostgreSQL's decision is applied (projected,
// compensated or released); its oldest entry gives the backlog's age.
func TestBacklogFollowsOpenReservations(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 5, 1)
		backlog := func(now time.Time) (int64, time.Duration) {
			n, age, err := f.s.Backlog(ctx, []redisstore.Slot{f.slot}, now)
			require.NoError(t, err)
			return n, age
		}
		n, age := backlog(f.now)
		require.Equal(t, []any{int64(0), time.Duration(0)}, []any{n, age})
		a := f.reserve(t, 1)
		f.now = f.now.Add(10 * time.Second)
		b := f.reserve(t, 2)
		d := f.reserve(t, 3)
		n, age = backlog(f.now.Add(5 * time.Second))
		require.Equal(t, int64(3), n)
		require.Equal(t, 15*time.Second, age, "the oldest open reservation")

		_, err := f.s.ProjectOrderCreated(ctx, f.slot, a.ReservationID, ids.NewRandom(), f.now)
		require.NoError(t, err)
		n, age = backlog(f.now.Add(5 * time.Second))
		require.Equal(t, int64(2), n)
		require.Equal(t, 5*time.Second, age)
		_, err = f.s.Compensate(ctx, f.slot, b.ReservationID, "c", f.now, ttl)
		require.NoError(t, err)
		_, err = f.s.ReleaseAfterCancel(ctx, f.slot, d.ReservationID, ids.NewRandom(), f.now, ttl)
		require.NoError(t, err)
		n, _ = backlog(f.now)
		require.Zero(t, n)
		require.Equal(t, f.counters(t).OpenReserved, n, "the set and the counter agree")
	})
}

// recount.lua, every return code: counters set from PostgreSQL's committed
// units and the open set, idempotently; an oversubscribed bucket and an
// unprovisioned one are left alone.
func TestRecount(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 10, 2)
		a := f.reserve(t, 1)
		f.reserve(t, 2)
		_, err := f.s.ProjectOrderCreated(ctx, f.slot, a.ReservationID, ids.NewRandom(), f.now)
		require.NoError(t, err)
		require.Equal(t, redisstore.Counters{Initial: 10, Available: 8, OpenReserved: 1, Committed: 1, Exists: true}, f.counters(t))

		// Redis lost two committed units' writes: PostgreSQL says 3.
		res, err := f.s.Recount(ctx, f.slot, 3, f.now)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.RecountApplied), res.Code, res.Reason)
		require.Equal(t, redisstore.Counters{Initial: 10, Available: 8, OpenReserved: 1, Committed: 1, Exists: true}, res.Before)
		want := redisstore.Counters{Initial: 10, Available: 6, OpenReserved: 1, Committed: 3, Exists: true}
		require.Equal(t, want, res.After)
		require.Equal(t, want, f.counters(t))
		// Again: the same counters, nothing written.
		res, err = f.s.Recount(ctx, f.slot, 3, f.now)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.RecountUnchanged), res.Code)
		require.Equal(t, want, f.counters(t))

		res, err = f.s.Recount(ctx, f.slot, 10, f.now)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.RecountOversubscribed), res.Code)
		require.Equal(t, want, f.counters(t), "nothing changed")
		res, err = f.s.Recount(ctx, f.slot, -1, f.now)
		require.NoError(t, err)
		require.Equal(t, int64(-3), res.Code)

		res, err = f.s.Recount(ctx, redisstore.BucketSlot(f.slot.ActivityID, f.slot.SKUID, 7), 0, f.now)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.RecountNotProvisioned), res.Code)
		require.False(t, res.After.Exists)
	})
}

// The per-user limit is counted in Redis, so two gateways (two clients)
// share it: past the limit a request — a replay included — is refused and
// writes nothing but the counter; the next window admits the user again.
func TestReserveUserLimitAcrossGateways(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		f := newFixture(t, c, 10, 2)
		other := redisstore.New(c) // a second gateway
		limited := func(r redisstore.ReserveRequest) redisstore.ReserveRequest {
			r.UserLimit, r.UserWindow = 3, 300*time.Millisecond
			return r
		}
		first := limited(f.request(7, ids.NewRandom()))
		for i, s := range []*redisstore.Store{f.s, other, f.s} {
			res, err := s.Reserve(ctx, first)
			require.NoError(t, err)
			require.Contains(t, []int64{redisstore.ReserveOK, redisstore.ReserveReplayed}, res.Code, "request %d", i)
		}
		fresh := limited(f.request(7, ids.NewRandom()))
		for _, r := range []redisstore.ReserveRequest{first, fresh} {
			res, err := other.Reserve(ctx, r)
			require.NoError(t, err)
			require.Equal(t, int64(redisstore.ReserveRateLimited), res.Code)
			require.Equal(t, "RATE_LIMITED", res.Reason)
		}
		n, err := c.Exists(ctx, f.slot.Request(7, fresh.RequestID), f.slot.Reservation(fresh.ReservationID)).Result()
		require.NoError(t, err)
		require.Zero(t, n, "a limited request writes nothing")
		require.Equal(t, int64(9), f.counters(t).Available)
		// Another user is not limited by user 7.
		res, err := f.s.Reserve(ctx, limited(f.request(8, ids.NewRandom())))
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.ReserveOK), res.Code)
		// The next window.
		time.Sleep(400 * time.Millisecond)
		res, err = other.Reserve(ctx, first)
		require.NoError(t, err)
		require.Equal(t, int64(redisstore.ReserveReplayed), res.Code)
	})
}
