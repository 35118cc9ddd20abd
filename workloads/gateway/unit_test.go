package gateway

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestBreaker(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	open := func() *Breaker {
		b := &Breaker{Threshold: 3, Cooldown: time.Second, TrialLease: 2 * time.Second}
		for range 3 {
			ok, _ := b.Allow(t0)
			require.True(t, ok)
			b.Record(false, t0)
		}
		return b
	}
	allowed := func(b *Breaker, now time.Time) bool { ok, _ := b.Allow(now); return ok }

	t.Run("open, half-open trial, closed on success", func(t *testing.T) {
		b := open()
		require.False(t, allowed(b, at(500*time.Millisecond)), "open")
		require.True(t, b.Open(at(500*time.Millisecond)))
		require.Equal(t, 500*time.Millisecond, b.OpenFor(at(500*time.Millisecond)))
		require.True(t, allowed(b, at(2*time.Second)), "half-open trial")
		require.False(t, allowed(b, at(2*time.Second)), "one trial at a time")
		require.True(t, b.Open(at(2*time.Second)), "not ready while the trial is in flight")
		b.Record(true, at(2*time.Second))
		require.True(t, allowed(b, at(2*time.Second)), "closed after a success")
		require.False(t, b.Open(at(2*time.Second)))
		require.Zero(t, b.OpenFor(at(3*time.Second)))
	})
	t.Run("a failed trial opens it for another cooldown", func(t *testing.T) {
		b := open()
		require.True(t, allowed(b, at(2*time.Second)))
		b.Record(false, at(2*time.Second))
		require.False(t, allowed(b, at(2500*time.Millisecond)))
		require.True(t, allowed(b, at(3*time.Second)), "the next trial after the cooldown")
		require.Equal(t, 3*time.Second, b.OpenFor(at(3*time.Second)), "open since the first opening")
	})
	t.Run("a trial that did not send is released", func(t *testing.T) {
		b := open()
		ok, ticket := b.Allow(at(2 * time.Second))
		require.True(t, ok)
		b.Release(ticket) // e.g. SOLD_OUT or a replay: no send, no outcome
		require.True(t, allowed(b, at(2*time.Second)), "another request is the trial")
	})
	t.Run("a trial nobody reports on expires", func(t *testing.T) {
		b := open()
		require.True(t, allowed(b, at(2*time.Second)))
		require.False(t, allowed(b, at(3*time.Second)), "lease running")
		require.True(t, allowed(b, at(4*time.Second)), "lease expired: a new trial")
	})
	t.Run("releasing a closed-state ticket changes nothing", func(t *testing.T) {
		b := &Breaker{Threshold: 3, Cooldown: time.Second}
		ok, ticket := b.Allow(t0)
		require.True(t, ok)
		b.Release(ticket)
		require.False(t, b.Open(t0))
	})
}

// GET answers a code that tells where the reservation is, never QUEUED for
// one that already has its outcome.
func TestStatusCode(t *testing.T) {
	for status, code := range map[string]string{
		"": CodeQueued, "RESERVED": CodeQueued, "ORDER_CREATED": CodeOrderCreated, "ORDER_REJECTED": CodeOrderRejected,
		"COMPENSATING": CodeOrderRejected, "COMPENSATED": CodeCompensated, "CANCELLED": CodeCancelled,
		"MANUAL_REVIEW": CodeManualReview,
	} {
		require.Equal(t, code, StatusCode(status), status)
		want := 200
		if code == CodeQueued {
			want = 202
		}
		require.Equal(t, want, httpStatus[code], status)
	}
}

func FuzzParseReservationRequest(f *testing.F) {
	f.Add([]byte(`{"request_id":"019c8d22-7600-7fa6-9307-6126afbc703b"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"request_id":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"request_id":"00000000-0000-0000-0000-000000000000"}`))
	f.Add([]byte(`{"request_id":"019C8D22-7600-7FA6-9307-6126AFBC703B"}`))
	f.Add([]byte(`{"request_id":"{19c8d22-7600-7fa6-9307-6126afbc703b}"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseReservationRequest(body)
		strict, serr := parseStrict(body)
		if len(body) <= MaxBodyBytes {
			// The fast path for the usual body agrees with the decoder.
			require.Equal(t, serr == nil, err == nil, "fast path and decoder disagree on %q", body)
			require.Equal(t, strict.RequestID, r.RequestID)
		}
		if err == nil {
			require.NotEqual(t, uuid.Nil, r.RequestID)
			require.LessOrEqual(t, len(body), MaxBodyBytes)
		}
	})
}

// A sold-out hold that ran out is looked at again by one request at a
// time; the others keep the hold until it reports, for at most one hold.
func TestSoldOutHoldIsRecheckedByOne(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	b := &borrower{hold: 200 * time.Millisecond, soldOut: map[int64]time.Time{}, recheck: map[int64]time.Time{}}
	require.False(t, b.held(7, t0), "never seen empty")
	b.soldOutAt(7, t0)
	require.True(t, b.held(7, at(100)), "within the hold")
	require.False(t, b.held(7, at(250)), "the hold ran out: this request looks again")
	require.True(t, b.held(7, at(260)), "another request while the first looks")
	require.True(t, b.held(7, at(440)))
	require.False(t, b.held(7, at(460)), "the first never reported: the next looks")
	b.soldOutAt(7, at(470))
	require.True(t, b.held(7, at(480)), "reported sold out: held again")
	require.False(t, b.held(8, at(480)), "per SKU")
}
