package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

func TestGuardDecision(t *testing.T) {
	const threshold = 10 * time.Second
	cases := []struct {
		name      string
		age       time.Duration
		wasPaused bool
		want      bool
	}{
		{"young backlog", 3 * time.Second, false, false},
		{"at the threshold", threshold, false, false},
		{"past the threshold", threshold + time.Second, false, true},
		{"paused, still past half", 6 * time.Second, true, true},
		{"paused, at half", 5 * time.Second, true, false},
		{"paused, drained", 0, true, false},
		{"not paused, past half only", 6 * time.Second, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reason := control.GuardDecision(control.Backlog{Open: 7, OldestAge: c.age}, threshold, c.wasPaused)
			require.Equal(t, c.want, got)
			require.Contains(t, reason, "7 open")
		})
	}
}

// The guard without Kubernetes on the real stores: an old undecided
// reservation pauses, its decision resumes, and the flag moves only then.
func TestGuardPausesOnAnOldReservationAndResumes(t *testing.T) {
	ctx := context.Background()
	s, activity := newStore(t, testenv.RedisSingle(t))
	sku := control.SKU{ID: 1, Buckets: 1}
	slot := sku.Slots(activity)[0]
	_, _, err := s.Redis.Provision(ctx, slot, 10, 1)
	require.NoError(t, err)
	require.NoError(t, s.SetWindow(ctx, activity, []control.SKU{sku}, control.Settings{Window: redisstore.WindowActive,
		BusinessDeadline: time.Hour, PaymentWindow: time.Hour, Generation: 1}))
	_, err = s.SetCompensationPaused(ctx, activity, false, "start")
	require.NoError(t, err)

	now := time.Now()
	pause, changed, _, err := s.Guard(ctx, activity, []control.SKU{sku}, time.Minute, now)
	require.NoError(t, err)
	require.False(t, pause)
	require.False(t, changed)

	id := reserveAt(t, s, slot, now.Add(-2*time.Minute))
	pause, changed, reason, err := s.Guard(ctx, activity, []control.SKU{sku}, time.Minute, now)
	require.NoError(t, err)
	require.True(t, pause, reason)
	require.True(t, changed)
	paused, err := s.CompensationPaused(ctx, activity)
	require.NoError(t, err)
	require.True(t, paused)
	_, changed, _, err = s.Guard(ctx, activity, []control.SKU{sku}, time.Minute, now)
	require.NoError(t, err)
	require.False(t, changed, "still paused: no move")

	decide(t, s, slot, id, now)
	pause, changed, _, err = s.Guard(ctx, activity, []control.SKU{sku}, time.Minute, now)
	require.NoError(t, err)
	require.False(t, pause)
	require.True(t, changed)
}

// reserveAt reserves one unit in Redis as the gateway would, at reservedAt.
func reserveAt(t *testing.T, s *control.Store, slot redisstore.Slot, reservedAt time.Time) uuid.UUID {
	t.Helper()
	ring, err := ids.NewKeyring(1, map[byte][]byte{1: make([]byte, 32)})
	require.NoError(t, err)
	req := ids.NewRandom()
	rid := ring.ReservationID(ids.ReservationKey{ActivityID: slot.ActivityID, SKUID: slot.SKUID, UserID: 42, RequestID: req})
	mid, _ := ring.MessageID(rid, 1)
	res, err := s.Redis.Reserve(context.Background(), redisstore.ReserveRequest{Slot: slot, ReservationID: rid, MessageID: mid,
		RequestID: req, UserID: 42, Now: reservedAt, BusinessDeadline: reservedAt.Add(time.Hour), SendDue: reservedAt.Add(time.Hour),
		RequestTTL: time.Hour, SchemaVersion: 1, KeyVersion: 1, TraceID: "t"})
	require.NoError(t, err)
	require.Equal(t, int64(redisstore.ReserveOK), res.Code, res.Reason)
	return rid
}

// decide applies the reservation's order to Redis, as the projector does.
func decide(t *testing.T, s *control.Store, slot redisstore.Slot, rid uuid.UUID, now time.Time) {
	t.Helper()
	res, err := s.Redis.ProjectOrderCreated(context.Background(), slot, rid, ids.NewRandom(), now)
	require.NoError(t, err)
	require.True(t, res.OK(), res.Reason)
}
