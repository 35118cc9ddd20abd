package metrics_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/metrics"
)

// Every workload's HTTP server bounds how long a client may take to send
// its request, to read the answer and to stay idle, and how large its
// headers may be (slowloris and friends).
func TestNewServerHasEveryTimeout(t *testing.T) {
	srv := metrics.NewServer(":0", http.NotFoundHandler())
	for name, v := range map[string]int64{"ReadHeaderTimeout": int64(srv.ReadHeaderTimeout), "ReadTimeout": int64(srv.ReadTimeout),
		"WriteTimeout": int64(srv.WriteTimeout), "IdleTimeout": int64(srv.IdleTimeout), "MaxHeaderBytes": int64(srv.MaxHeaderBytes)} {
		require.Positive(t, v, name)
	}
	require.LessOrEqual(t, srv.ReadHeaderTimeout, srv.ReadTimeout)
}
