package redisstore_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/states"
)

// Every script that writes a reservation hash moves it only along
// states.RedisHash: each script is run on a hash in every state the scripts
// know (the machine's, and the PostgreSQL-only ones they name), and every
// change of status it makes must be a transition of the machine; a script
// that creates a hash creates it in an initial state.
func TestScriptsMoveOnlyAlongTheHashMachine(t *testing.T) {
	eachRedis(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		scripts := map[string]func(f *fixture, r redisstore.ReserveRequest) (redisstore.Result, error){
			"project_order_created": func(f *fixture, r redisstore.ReserveRequest) (redisstore.Result, error) {
				return f.s.ProjectOrderCreated(ctx, f.slot, r.ReservationID, ids.NewRandom(), f.now)
			},
			"project_order_rejected": func(f *fixture, r redisstore.ReserveRequest) (redisstore.Result, error) {
				return f.s.ProjectOrderRejected(ctx, f.slot, r.ReservationID, "STOCK_NOT_ENOUGH", f.now)
			},
			"compensate": func(f *fixture, r redisstore.ReserveRequest) (redisstore.Result, error) {
				return f.s.Compensate(ctx, f.slot, r.ReservationID, "comp-1", f.now, ttl)
			},
			"release_after_cancel": func(f *fixture, r redisstore.ReserveRequest) (redisstore.Result, error) {
				return f.s.ReleaseAfterCancel(ctx, f.slot, r.ReservationID, ids.NewRandom(), f.now, ttl)
			},
			"rebuild_projection": func(f *fixture, r redisstore.ReserveRequest) (redisstore.Result, error) {
				return f.s.RebuildProjection(ctx, f.slot, rebuild(r), f.now)
			},
		}
		priors := append([]states.HashStatus{}, states.RedisHash.States()...)
		priors = append(priors, "PAID", "CANCEL_PENDING", "MANUAL_REVIEW")
		moves := 0
		for name, run := range scripts {
			for _, prior := range priors {
				f := newFixture(t, c, 3, 0)
				r := f.reserve(t, 7)
				f.setStatus(t, r.ReservationID, string(prior))
				res, err := run(f, r)
				require.NoError(t, err, "%s on %s", name, prior)
				h, err := f.s.Reservation(ctx, f.slot, r.ReservationID)
				require.NoError(t, err)
				after := states.HashStatus(h["status"])
				if after == prior {
					continue
				}
				require.True(t, states.RedisHash.Known(prior), "%s moved a hash in %s, not a state of the hash, to %s (%s)", name, prior, after, res.Reason)
				require.NoError(t, states.RedisHash.Check(prior, after), "%s (%s)", name, res.Reason)
				moves++
			}
		}
		require.GreaterOrEqual(t, moves, 6, "the scripts moved hashes")

		// The scripts that create a hash create it in an initial state.
		f := newFixture(t, c, 3, 0)
		r := f.reserve(t, 8)
		created := map[string]uuid.UUID{"reserve": r.ReservationID}
		lost := f.request(9, ids.NewRandom())
		res, err := f.s.RebuildProjection(ctx, f.slot, rebuild(lost), f.now)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.Code, res.Reason)
		created["rebuild_projection"] = lost.ReservationID
		for name, id := range created {
			h, err := f.s.Reservation(ctx, f.slot, id)
			require.NoError(t, err)
			require.Contains(t, states.RedisHash.Initial, states.HashStatus(h["status"]), "%s created a hash in %s", name, h["status"])
		}
	})
}

func rebuild(r redisstore.ReserveRequest) redisstore.Rebuild {
	return redisstore.Rebuild{ReservationID: r.ReservationID, MessageID: r.MessageID, RequestID: r.RequestID, OrderID: ids.NewRandom(),
		UserID: r.UserID, ReservedAt: r.Now, BusinessDeadline: r.BusinessDeadline}
}
