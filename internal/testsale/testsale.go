// Package testsale builds flash-sale state for tests through the real code
// paths: a SKU of a fresh activity provisioned in PostgreSQL and Redis,
// reservations taken by reserve.lua, messages consumed by the order
// consumer's transaction, projections and compensations by their scripts.
// Tests then inject the one fault they are about.
package testsale

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// SKUID is the sale's one SKU.
const SKUID = 1

// Sale is one SKU of a fresh activity on the real PostgreSQL and Redis.
type Sale struct {
	Pool     *pgxpool.Pool
	Redis    *redisstore.Store
	Activity int64
	SKU      control.SKU
	Slot     redisstore.Slot
	Consumer *orderstore.Consumer
	Ring     *ids.Keyring
}

// New provisions the SKU with pgStock units in PostgreSQL and redisStock in
// Redis (more in Redis when a test wants rejections), window open.
func New(t testing.TB, pgStock, redisStock int64) *Sale {
	t.Helper()
	return NewOn(t, testenv.RedisSingle(t), pgStock, redisStock)
}

// NewOn is New on a Redis of the test's choosing (a failover pair, say).
func NewOn(t testing.TB, c redis.UniversalClient, pgStock, redisStock int64) *Sale {
	t.Helper()
	ctx := context.Background()
	pool := testenv.Database(t)
	require.NoError(t, redisstore.LoadScripts(ctx, c))
	rs := redisstore.New(c)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	sku := control.SKU{ID: SKUID, Stock: redisStock, Buckets: 1}
	slot := sku.Slots(activity)[0]
	_, _, err := rs.Provision(ctx, slot, redisStock, 1)
	require.NoError(t, err)
	require.NoError(t, rs.SetWindow(ctx, slot, redisstore.WindowActive))
	_, err = pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, $3, $3)`,
		activity, SKUID, pgStock)
	require.NoError(t, err)
	ring, _ := ids.NewKeyring(1, map[byte][]byte{1: []byte("testsale-key-0123456789abcdefghij")})
	return &Sale{Pool: pool, Redis: rs, Activity: activity, SKU: sku, Slot: slot, Ring: ring,
		Consumer: &orderstore.Consumer{Pool: pool, Group: "g", PaymentWindow: time.Hour}}
}

// Reserve takes a Redis reservation as the gateway does, two seconds in the
// past (older than a watermark of now). deadline is the business deadline
// from now; sent says whether the message left (send_due acknowledged) or
// is still to be sent.
func (s *Sale) Reserve(t testing.TB, user int64, deadline time.Duration, sent bool) events.OrderCreateRequested {
	t.Helper()
	ctx := context.Background()
	now := time.Now().Add(-2 * time.Second)
	req := ids.NewRandom()
	rid := s.Ring.ReservationID(ids.ReservationKey{ActivityID: s.Activity, SKUID: SKUID, UserID: user, RequestID: req})
	mid, _ := s.Ring.MessageID(rid, 1)
	res, err := s.Redis.Reserve(ctx, redisstore.ReserveRequest{Slot: s.Slot, ReservationID: rid, MessageID: mid, RequestID: req,
		UserID: user, Now: now, BusinessDeadline: time.Now().Add(deadline), SendDue: now,
		RequestTTL: time.Minute, SchemaVersion: 1, KeyVersion: 1})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Code, res.Reason)
	h, err := s.Redis.Reservation(ctx, s.Slot, rid)
	require.NoError(t, err)
	msg, err := events.FromReservationHash(h)
	require.NoError(t, err)
	if sent {
		claims, err := s.Redis.ClaimDue(ctx, s.Slot, time.Now(), time.Minute, 1000)
		require.NoError(t, err)
		for _, c := range claims {
			if c.ReservationID == rid {
				_, err := s.Redis.AckSend(ctx, s.Slot, rid, c.Lease, time.Now(), 0)
				require.NoError(t, err)
			}
		}
	}
	return msg
}

// Buy reserves and consumes the message in PostgreSQL (no projection yet).
func (s *Sale) Buy(t testing.TB, user int64) (events.OrderCreateRequested, orderstore.Outcome) {
	t.Helper()
	msg := s.Reserve(t, user, time.Hour, true)
	raw, _ := msg.Marshal()
	out, err := s.Consumer.Consume(context.Background(), msg, raw)
	require.NoError(t, err)
	return msg, out
}

// Project is the projector's step for a created order.
func (s *Sale) Project(t testing.TB, msg events.OrderCreateRequested, order uuid.UUID) {
	t.Helper()
	res, err := s.Redis.ProjectOrderCreated(context.Background(), s.Slot, msg.ReservationID, order, time.Now())
	require.NoError(t, err)
	require.True(t, res.OK(), res.Reason)
}

// Compensator is a compensation worker of the sale.
func (s *Sale) Compensator(owner string) *compensation.Worker {
	return &compensation.Worker{Pool: s.Pool, Redis: s.Redis, Owner: owner, Lease: 30 * time.Second, MaxAttempts: 5, TerminalTTL: time.Hour}
}

// CompensateAll runs every due compensation task once.
func (s *Sale) CompensateAll(t testing.TB) {
	t.Helper()
	w := s.Compensator("testsale")
	tasks, err := w.Claim(context.Background(), 100)
	require.NoError(t, err)
	for _, task := range tasks {
		_, _, err := w.Run(context.Background(), task)
		require.NoError(t, err)
	}
}

// Exec runs a statement (a test's injected fault).
func (s *Sale) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	_, err := s.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// One reads one value as text.
func (s *Sale) One(t testing.TB, sql string, args ...any) string {
	t.Helper()
	var v string
	require.NoError(t, s.Pool.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

// RedisStatus is the reservation hash's status ("" when gone).
func (s *Sale) RedisStatus(t testing.TB, rid uuid.UUID) string {
	t.Helper()
	h, err := s.Redis.Reservation(context.Background(), s.Slot, rid)
	require.NoError(t, err)
	return h["status"]
}

// Counters are the slot's conservation counters.
func (s *Sale) Counters(t testing.TB) redisstore.Counters {
	t.Helper()
	c, err := s.Redis.ReadCounters(context.Background(), s.Slot)
	require.NoError(t, err)
	return c
}
