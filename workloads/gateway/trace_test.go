package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/ids"

	"github.com/seckill/seckill-operator/workloads/gateway"
)

func TestTraceID(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct{ name, header, want string }{
		{"valid", "00-" + trace + "-00f067aa0ba902b7-01", trace},
		{"not sampled", "00-" + trace + "-00f067aa0ba902b7-00", trace},
		{"later version with more fields", "01-" + trace + "-00f067aa0ba902b7-01-what-comes-next", trace},
		{"absent", "", ""},
		{"free text", "my-trace", ""},
		{"upper case", "00-" + strings.ToUpper(trace) + "-00f067aa0ba902b7-01", ""},
		{"version ff", "ff-" + trace + "-00f067aa0ba902b7-01", ""},
		{"version 00 with more", "00-" + trace + "-00f067aa0ba902b7-01-x", ""},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"zero parent id", "00-" + trace + "-0000000000000000-01", ""},
		{"short trace id", "00-" + trace[:31] + "-00f067aa0ba902b7-01", ""},
		{"a megabyte", strings.Repeat("a", 1<<20), ""},
		{"non-hex", "00-" + trace[:31] + "g-00f067aa0ba902b7-01", ""},
	} {
		require.Equal(t, c.want, gateway.TraceID(c.header), c.name)
	}
}

// The reservation keeps a valid traceparent's trace-id and nothing of an
// invalid or oversized one.
func TestReservationKeepsOnlyAValidTraceID(t *testing.T) {
	f := newFixture(t, 2, nil)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for user, c := range map[int64]struct{ header, want string }{
		1: {"00-" + trace + "-00f067aa0ba902b7-01", trace},
		2: {strings.Repeat("x", 8000), ""},
	} {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+f.path(), strings.NewReader(body(ids.NewRandom())))
		req.Header.Set("Authorization", bearer(user))
		req.Header.Set(gateway.TraceParentHeader, c.header)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var r reply
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		_ = resp.Body.Close()
		require.Equal(t, gateway.CodeQueued, r.Code)
		got, err := f.rdb.HGet(context.Background(), f.slot.Reservation(uuid.MustParse(r.RID)), "trace_id").Result()
		require.NoError(t, err)
		require.Equal(t, c.want, got)
	}
}
