package provider_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/provider"
)

// The simulated channel behind its HTTP API, through the client the
// canceller uses: close before pay refuses the payment; pay before close
// is reported by close; success-after-close is the channel's own race.
func TestSimOverHTTP(t *testing.T) {
	ctx := context.Background()
	sim := &provider.Sim{ProviderName: "sim"}
	srv := httptest.NewServer(provider.Handler(sim))
	defer srv.Close()
	c := &provider.Client{ProviderName: "sim", BaseURL: srv.URL}

	a, b := uuid.New(), uuid.New()
	p, err := c.Close(ctx, a)
	require.NoError(t, err)
	require.Nil(t, p)
	_, err = sim.Pay(ctx, a, 100, "CNY")
	require.ErrorIs(t, err, provider.ErrClosed)

	paid, err := sim.Pay(ctx, b, 100, "CNY")
	require.NoError(t, err)
	p, err = c.Close(ctx, b)
	require.NoError(t, err)
	require.Equal(t, paid.TransactionID, p.TransactionID)
	q, err := c.Query(ctx, b)
	require.NoError(t, err)
	require.Equal(t, int64(100), q.AmountCents)
	require.NoError(t, c.Refund(ctx, paid.TransactionID))
	require.True(t, sim.Refunded(paid.TransactionID))

	racy := &provider.Sim{ProviderName: "racy", SuccessAfterClose: true}
	_, _ = racy.Close(ctx, a)
	_, err = racy.Pay(ctx, a, 1, "CNY")
	require.NoError(t, err, "a success reported after the close")

	_, err = (&provider.Client{ProviderName: "down", BaseURL: "http://127.0.0.1:1"}).Close(ctx, a)
	require.Error(t, err, "an unreachable channel is an unknown, not a 'not paid'")
}
