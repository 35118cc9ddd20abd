package inbox_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/inbox"
)

// A projector's batch is recorded in one statement, one row per event; an
// event seen again — in the same batch or a later one — keeps its first row.
func TestRecordProjectionsKeepsTheFirstRowPerEvent(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Database(t)
	const group = "seckill-test-projection-inbox"
	first, second := ids.NewRandom(), ids.NewRandom()
	rec := func(id [16]byte, result string, payload string) inbox.Projected {
		return inbox.Projected{Topic: "seckill-order-events", EventType: "ORDER_CREATED", EventID: id,
			ReservationID: ids.NewRandom(), Payload: []byte(payload), Result: result}
	}
	require.NoError(t, inbox.RecordProjections(ctx, pool, group, nil), "an empty batch writes nothing")
	require.NoError(t, inbox.RecordProjections(ctx, pool, group, []inbox.Projected{
		rec(first, "APPLIED", `{"a":1}`), rec(second, "ALREADY_APPLIED", `{"b":2}`), rec(first, "LATER", `{"a":1}`),
	}))
	require.NoError(t, inbox.RecordProjections(ctx, pool, group, []inbox.Projected{rec(second, "LATER", `{"b":2}`)}))

	rows, err := pool.Query(ctx, `SELECT message_id, result_code, payload_hash FROM consumer_inbox WHERE consumer_group = $1 ORDER BY result_code`, group)
	require.NoError(t, err)
	got := map[[16]byte]string{}
	for rows.Next() {
		var id [16]byte
		var result string
		var hash []byte
		require.NoError(t, rows.Scan(&id, &result, &hash))
		want := sha256.Sum256([]byte(map[[16]byte]string{first: `{"a":1}`, second: `{"b":2}`}[id]))
		require.Equal(t, want[:], hash)
		got[id] = result
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[[16]byte]string{first: "APPLIED", second: "ALREADY_APPLIED"}, got)
}
