package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
)

// traffic is the buyers: at a fixed rate a new user asks for one unit, and
// retries its own request (the same request id) on a connection error or
// a 5xx, as a client does, until it has an answer or gives up.
type traffic struct {
	url      string
	tokenKey []byte
	rate     float64
	next     atomic.Int64 // the next user id

	mu        sync.Mutex
	codes     map[string]int
	lastQueue time.Time
	queuedAt  []time.Time
	sent      atomic.Int64
	gaveUp    atomic.Int64
	// unavailable counts the 5xx answers (503: the entry breaker open, or
	// the sale not ready), each retried by its buyer.
	unavailable atomic.Int64
	wg          sync.WaitGroup
}

func newTraffic(gatewayAddr string, activity, sku int64, tokenKey string, rate float64) *traffic {
	t := &traffic{url: fmt.Sprintf("http://%s/v1/activities/%d/skus/%d/reservations", gatewayAddr, activity, sku),
		tokenKey: []byte(tokenKey), rate: rate, codes: map[string]int{}}
	t.next.Store(50_000_000)
	return t
}

// burstEvery is how the buyers arrive: rate × burstEvery of them at once,
// every burstEvery — a sale's crowd comes in waves, and a wave's messages
// reach an order consumer together, so it receives them as a batch and
// takes the batch paths production takes under load (a steady trickle at
// this rate would give it one message at a time).
const burstEvery = 500 * time.Millisecond

// run sends requests until ctx ends, then waits for the buyers in flight.
func (t *traffic) run(ctx context.Context) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	tick := time.NewTicker(burstEvery)
	defer tick.Stop()
	owed := 0.0
	for {
		select {
		case <-ctx.Done():
			t.wg.Wait()
			return
		case <-tick.C:
			owed += t.rate * burstEvery.Seconds()
			for ; owed >= 1; owed-- {
				t.wg.Add(1)
				go func() { defer t.wg.Done(); t.buy(hc, t.next.Add(1)) }()
			}
		}
	}
}

func (t *traffic) buy(hc *http.Client, user int64) {
	t.sent.Add(1)
	body := []byte(`{"request_id":"` + ids.NewRandom().String() + `"}`)
	token := "Bearer " + gateway.SignToken(user, t.tokenKey, time.Now().Add(time.Hour))
	deadline := time.Now().Add(60 * time.Second)
	// A buyer not answered retries as the gateway asks: no sooner than its
	// Retry-After, backing off from 200 ms doubling to 5 s, each wait
	// jittered (full jitter) so a crowd does not retry in step.
	backoff := 200 * time.Millisecond
	for time.Now().Before(deadline) {
		wait := backoff
		req, _ := http.NewRequest(http.MethodPost, t.url, bytes.NewReader(body))
		req.Header.Set("Authorization", token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err == nil {
			var ans struct {
				Code string `json:"code"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&ans)
			_ = resp.Body.Close()
			if derr == nil && resp.StatusCode < 500 {
				t.answer(ans.Code)
				return
			}
			if resp.StatusCode >= 500 {
				t.unavailable.Add(1)
			}
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && time.Duration(s)*time.Second > wait {
				wait = time.Duration(s) * time.Second
			}
		}
		time.Sleep(wait/2 + rand.N(wait/2+1)) //nolint:gosec // jitter, not a secret
		backoff = min(2*backoff, 5*time.Second)
	}
	t.gaveUp.Add(1)
}

func (t *traffic) answer(code string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.codes[code]++
	if code == gateway.CodeQueued {
		now := time.Now()
		t.lastQueue = now
		t.queuedAt = append(t.queuedAt, now)
	}
}

// queuedAfter is the first QUEUED answer at or after at (zero: none yet).
func (t *traffic) queuedAfter(at time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, q := range t.queuedAt {
		if !q.Before(at) {
			return q
		}
	}
	return time.Time{}
}

func (t *traffic) count(code string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.codes[code]
}
