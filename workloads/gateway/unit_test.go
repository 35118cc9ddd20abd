package gateway

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestBreaker(t *testing.T) {
	const cooldown = 100 * time.Millisecond
	open := func() *Breaker {
		b := NewBreaker(3, cooldown)
		for range 3 {
			ok, ticket := b.Allow()
			require.True(t, ok)
			b.Record(ticket, false)
		}
		return b
	}
	allowed := func(b *Breaker) bool { ok, _ := b.Allow(); return ok }
	cooled := func() { time.Sleep(cooldown + 20*time.Millisecond) }

	t.Run("told when it opens; Reset closes it at once, late tickets of the old one change nothing", func(t *testing.T) {
		b := NewBreaker(3, time.Hour)
		opened := make(chan struct{}, 4)
		b.OnOpen(func() { opened <- struct{}{} })
		var late Ticket
		for i := range 3 {
			ok, ticket := b.Allow()
			require.True(t, ok)
			if i == 2 {
				late = ticket // in flight when the breaker is reset
				continue
			}
			b.Record(ticket, false)
		}
		_, third := b.Allow()
		b.Record(third, false)
		require.True(t, b.Open())
		select {
		case <-opened:
		case <-time.After(time.Second):
			t.Fatal("OnOpen not called")
		}
		b.Reset()
		require.False(t, b.Open(), "closed without waiting out the cooldown")
		require.Zero(t, b.OpenFor(time.Now()))
		b.Record(late, false)
		require.True(t, allowed(b), "a ticket of the replaced breaker does not count")
		require.Empty(t, opened, "told once per opening")
	})

	t.Run("open, half-open trial, closed on success", func(t *testing.T) {
		b := open()
		require.False(t, allowed(b), "open")
		require.True(t, b.Open())
		require.Greater(t, b.OpenFor(time.Now()), time.Duration(0))
		cooled()
		require.False(t, b.Open(), "half-open, no trial yet")
		ok, trial := b.Allow()
		require.True(t, ok, "half-open trial")
		require.False(t, allowed(b), "one trial at a time")
		require.True(t, b.Open(), "not ready while the trial is in flight")
		b.Record(trial, true)
		require.True(t, allowed(b), "closed after a success")
		require.False(t, b.Open())
		require.Zero(t, b.OpenFor(time.Now()))
	})
	t.Run("a failed trial opens it for another cooldown", func(t *testing.T) {
		b := open()
		since := b.OpenFor(time.Now())
		cooled()
		ok, trial := b.Allow()
		require.True(t, ok)
		b.Record(trial, false)
		require.False(t, allowed(b))
		cooled()
		require.True(t, allowed(b), "the next trial after the cooldown")
		require.Greater(t, b.OpenFor(time.Now()), since+cooldown, "open since the first opening")
	})
	t.Run("a trial that did not send is released", func(t *testing.T) {
		b := open()
		cooled()
		ok, trial := b.Allow()
		require.True(t, ok)
		b.Release(trial) // e.g. SOLD_OUT or a replay: no send, no outcome
		require.False(t, b.Open())
		require.True(t, allowed(b), "another request is the trial")
	})
	t.Run("a ticket is answered once", func(t *testing.T) {
		b := NewBreaker(2, cooldown)
		ok, ticket := b.Allow()
		require.True(t, ok)
		b.Record(ticket, false)
		b.Record(ticket, false) // a second answer is ignored
		require.False(t, b.Open(), "one failure, not two")
	})
	t.Run("releasing a closed-state ticket changes nothing", func(t *testing.T) {
		b := NewBreaker(3, cooldown)
		ok, ticket := b.Allow()
		require.True(t, ok)
		b.Release(ticket)
		require.False(t, b.Open())
	})
	t.Run("a success between failures resets the count", func(t *testing.T) {
		b := NewBreaker(3, cooldown)
		for _, outcome := range []bool{false, false, true, false, false} {
			_, ticket := b.Allow()
			b.Record(ticket, outcome)
		}
		require.False(t, b.Open())
	})
}

// BenchmarkBreaker is the breaker's cost per request on the hot path
// (Allow, then the send's Record), from many goroutines at once.
func BenchmarkBreaker(b *testing.B) {
	br := NewBreaker(5, 5*time.Second)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, ticket := br.Allow()
			br.Record(ticket, true)
		}
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
