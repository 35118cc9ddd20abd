package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/lease"
	"github.com/seckill/seckill-operator/workloads/outbox"
)

func insertEvents(t *testing.T, pool *pgxpool.Pool, n int) []uuid.UUID {
	t.Helper()
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = ids.NewRandom()
		agg := ids.NewRandom()
		_, err := pool.Exec(context.Background(), `INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload)
			VALUES ($1, 'ORDER', $2::uuid, 'ORDER_CREATED', 1, $2::uuid::text, '{"n":1}')`, out[i], agg)
		require.NoError(t, err)
	}
	return out
}

func status(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) (st string, attempts int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status, attempt_count FROM event_outbox WHERE event_id = $1`, id).Scan(&st, &attempts))
	return st, attempts
}

func TestClaimSendSettle(t *testing.T) {
	pool := testenv.Database(t)
	ctx := context.Background()
	evs := insertEvents(t, pool, 3)
	s := &outbox.Store{Pool: pool, Owner: "relay-a", Lease: 30 * time.Second, MaxAttempts: 3}
	claimed, err := s.Claim(ctx, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	require.Equal(t, 1, claimed[0].Attempt)
	require.False(t, claimed[0].LeaseExpired, "a PENDING event is no lease taken over")
	require.JSONEq(t, `{"n":1}`, string(claimed[0].Payload))
	again, err := s.Claim(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, again, "leased events are not claimed twice")

	require.NoError(t, s.MarkSent(ctx, evs[0]))
	st, _ := status(t, pool, evs[0])
	require.Equal(t, "SENT", st)

	other := &outbox.Store{Pool: pool, Owner: "relay-b", Lease: time.Second, MaxAttempts: 3}
	require.ErrorIs(t, other.MarkSent(ctx, evs[1]), lease.ErrLost, "only the lease owner settles")

	next, err := s.MarkRetry(ctx, evs[1], 1, errors.New("send timeout"))
	require.NoError(t, err)
	require.Equal(t, "RETRY", next)
	var lastErr string
	var due time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT last_error, next_retry_at FROM event_outbox WHERE event_id = $1`, evs[1]).Scan(&lastErr, &due))
	require.Equal(t, "send timeout", lastErr)
	require.True(t, due.After(time.Now()), "retried after a backoff")
}

func TestExpiredLeaseIsReclaimedAndCapGoesManual(t *testing.T) {
	pool := testenv.Database(t)
	ctx := context.Background()
	ev := insertEvents(t, pool, 1)[0]
	dead := &outbox.Store{Pool: pool, Owner: "relay-dead", Lease: 50 * time.Millisecond, MaxAttempts: 2}
	c, err := dead.Claim(ctx, 1)
	require.NoError(t, err)
	require.Len(t, c, 1)
	// The relay "died": a claim a minute later finds its lease run out.
	live := &outbox.Store{Pool: pool, Owner: "relay-live", Lease: 30 * time.Second, MaxAttempts: 2,
		DBNow: func() time.Time { return time.Now().Add(time.Minute) }}
	c, err = live.Claim(ctx, 1)
	require.NoError(t, err)
	require.Len(t, c, 1)
	require.Equal(t, 2, c[0].Attempt)
	require.True(t, c[0].LeaseExpired, "taken over from a lease that ran out (outbox_lease_expired_total)")
	require.ErrorIs(t, dead.MarkSent(ctx, ev), lease.ErrLost, "a stale relay cannot overwrite")
	next, err := live.MarkRetry(ctx, ev, c[0].Attempt, errors.New("broker down"))
	require.NoError(t, err)
	require.Equal(t, "MANUAL", next, "after the cap the event waits for a person, it is not dropped")
	st, attempts := status(t, pool, ev)
	require.Equal(t, "MANUAL", st)
	require.Equal(t, 2, attempts)
}

func TestConcurrentRelaysNeverShareAnEvent(t *testing.T) {
	pool := testenv.Database(t)
	ctx := context.Background()
	evs := insertEvents(t, pool, 500)
	var mu sync.Mutex
	seen := map[uuid.UUID]string{}
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			s := &outbox.Store{Pool: pool, Owner: owner, Lease: time.Minute, MaxAttempts: 5}
			for {
				batch, err := s.Claim(ctx, 16)
				if err != nil {
					t.Error(err)
					return
				}
				if len(batch) == 0 {
					return
				}
				for _, e := range batch {
					mu.Lock()
					prev, dup := seen[e.EventID]
					seen[e.EventID] = owner
					mu.Unlock()
					if dup {
						t.Errorf("event %s claimed by %s and %s", e.EventID, prev, owner)
					}
					if err := s.MarkSent(ctx, e.EventID); err != nil {
						t.Error(err)
					}
				}
			}
		}(string(rune('a' + r)))
	}
	wg.Wait()
	require.Len(t, seen, len(evs))
	var sent int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM event_outbox WHERE status = 'SENT'`).Scan(&sent))
	require.Equal(t, 500, sent)
}

// A batch's sent events are finished in one statement, only those whose
// lease this relay still holds.
func TestMarkSentManyKeepsLostLeases(t *testing.T) {
	pool := testenv.Database(t)
	ctx := context.Background()
	evs := insertEvents(t, pool, 4)
	s := &outbox.Store{Pool: pool, Owner: "relay-a", Lease: 30 * time.Second, MaxAttempts: 3}
	claimed, err := s.Claim(ctx, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 4)
	// Another relay took evs[3] over (its lease expired meanwhile).
	_, err = pool.Exec(ctx, `UPDATE event_outbox SET lease_owner = 'relay-b' WHERE event_id = $1`, evs[3])
	require.NoError(t, err)
	n, err := s.MarkSentMany(ctx, evs)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	for i, id := range evs {
		st, _ := status(t, pool, id)
		require.Equal(t, map[bool]string{true: "SENDING", false: "SENT"}[i == 3], st, "event %d", i)
	}
	n, err = s.MarkSentMany(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, n)
}
