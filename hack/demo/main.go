// Command demo runs a flash sale on the local real stack (hack/stack.sh up):
// stock provisioned in PostgreSQL and Redis, many concurrent buyers with
// client retries through the reserve script, every accepted reservation's
// order-create message sent to RocketMQ with its fixed message id, and the
// invariants checked at the end. The order pipeline behind the broker is the
// next step of the project; this demo stops at the broker.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/migrations"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/testenv"
)

func main() {
	buyers := flag.Int("buyers", 3000, "concurrent buyers")
	stock := flag.Int64("stock", 100, "stock per SKU")
	skus := flag.Int("skus", 2, "SKUs")
	buckets := flag.Int("buckets", 4, "Redis stock buckets per SKU")
	flag.Parse()
	if *buyers <= 0 || *stock < 0 || *skus <= 0 || *buckets <= 0 || *buckets > 64 {
		fmt.Fprintln(os.Stderr, "demo: -buyers, -skus, -buckets must be positive (buckets <= 64), -stock non-negative")
		os.Exit(2)
	}
	if err := run(*buyers, *stock, *skus, *buckets); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func env(key string) string {
	v, err := testenv.Lookup(key)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	return v
}

func run(buyers int, stockPerSKU int64, nSKU, nBuckets int) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, env("SECKILL_PG_DSN"))
	if err != nil {
		return err
	}
	defer pool.Close()
	version, err := migrations.Up(ctx, pool)
	if err != nil {
		return err
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{env("SECKILL_REDIS_ADDR")}, PoolSize: 64})
	defer rdb.Close()
	if err := redisstore.LoadScripts(ctx, rdb); err != nil {
		return err
	}
	store := redisstore.New(rdb)
	producer, err := mq.NewProducer(env("SECKILL_RMQ_ENDPOINT"), names.TopicOrderCreate)
	if err != nil {
		return err
	}
	defer producer.Close()
	ring, err := ids.NewKeyring(1, map[byte][]byte{1: []byte("demo-key-demo-key-demo-key-demo-key")})
	if err != nil {
		return err
	}

	activity := time.Now().Unix()
	fmt.Printf("activity %d: %d SKUs × %d units in %d buckets, %d buyers, schema v%d\n",
		activity, nSKU, stockPerSKU, nBuckets, buyers, version)

	// Provision: PostgreSQL rows and Redis buckets (stock split evenly).
	var slots []redisstore.Slot
	for s := 1; s <= nSKU; s++ {
		sku := int64(90000 + s)
		if _, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, $3, $3)`,
			activity, sku, stockPerSKU); err != nil {
			return fmt.Errorf("provisioning PostgreSQL: %w", err)
		}
		for b, sl := range redisstore.Slots(activity, sku, nBuckets) {
			share := stockPerSKU / int64(nBuckets)
			if int64(b) < stockPerSKU%int64(nBuckets) {
				share++
			}
			if _, _, err := store.Provision(ctx, sl, share, 1); err != nil {
				return err
			}
			if err := store.SetWindow(ctx, sl, redisstore.WindowActive); err != nil {
				return err
			}
			slots = append(slots, sl)
		}
	}

	var reserved, soldOut, already, replays, sent, sendFailed atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	start := time.Now()
	var wg sync.WaitGroup
	for u := 0; u < buyers; u++ {
		wg.Add(1)
		go func(user int64) {
			defer wg.Done()
			sku := int64(90001 + rand.IntN(nSKU)) //nolint:gosec // picking a SKU for a simulated buyer
			sl := redisstore.BucketSlot(activity, sku, int(user)%nBuckets)
			if nBuckets == 1 {
				sl = redisstore.SKUSlot(activity, sku)
			}
			reqID := ids.NewRandom()
			rid := ring.ReservationID(ids.ReservationKey{ActivityID: activity, SKUID: sku, UserID: user, RequestID: reqID})
			mid, _ := ring.MessageID(rid, 1)
			now := time.Now()
			req := redisstore.ReserveRequest{Slot: sl, ReservationID: rid, MessageID: mid, RequestID: reqID, UserID: user,
				Now: now, BusinessDeadline: now.Add(5 * time.Minute), SendDue: now.Add(5 * time.Second),
				RequestTTL: 10 * time.Minute, SchemaVersion: 1, KeyVersion: ring.Current()}
			// A third of the clients retry their request (same request id).
			tries := 1 + int(user%3/2)
			for i := 0; i < tries; i++ {
				t0 := time.Now()
				res, err := store.Reserve(ctx, req)
				d := time.Since(t0)
				mu.Lock()
				latencies = append(latencies, d)
				mu.Unlock()
				if err != nil {
					continue
				}
				switch res.Code {
				case redisstore.ReserveOK:
					reserved.Add(1)
					if sendOrderCreate(ctx, producer, store, req) {
						sent.Add(1)
					} else {
						sendFailed.Add(1)
					}
				case redisstore.ReserveReplayed:
					replays.Add(1)
				case redisstore.ReserveSoldOut:
					soldOut.Add(1)
				case redisstore.ReserveAlreadyPurchased:
					already.Add(1)
				}
			}
		}(int64(80000000 + u))
	}
	wg.Wait()
	elapsed := time.Since(start)

	// Invariants.
	var total redisstore.Counters
	for _, sl := range slots {
		c, err := store.ReadCounters(ctx, sl)
		if err != nil {
			return err
		}
		total = total.Add(c)
	}
	var pending int64
	for _, sl := range slots {
		n, err := rdb.ZCard(ctx, sl.SendDue()).Result()
		if err != nil {
			return err
		}
		pending += n
	}
	var pgDelta int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(initial_stock - available_stock - occupied_stock - sold_stock), 0) FROM sku_inventory WHERE activity_id = $1`, activity).Scan(&pgDelta); err != nil {
		return err
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration { return latencies[int(float64(len(latencies)-1)*p)] }

	fmt.Printf("\n%d reserve calls in %s (%.0f/s)\n", len(latencies), elapsed.Round(time.Millisecond), float64(len(latencies))/elapsed.Seconds())
	fmt.Printf("  reserved (QUEUED)     %d\n  sold out              %d\n  already purchased     %d\n  replays answered      %d\n",
		reserved.Load(), soldOut.Load(), already.Load(), replays.Load())
	fmt.Printf("  order-create sent     %d (failed, left to the scanner: %d)\n", sent.Load(), sendFailed.Load())
	fmt.Printf("  reserve latency       p50 %s  p99 %s\n", pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond))
	checks := []struct {
		name string
		ok   bool
		got  string
	}{
		{"no oversell: reserved <= stock", reserved.Load() <= stockPerSKU*int64(nSKU), fmt.Sprintf("%d <= %d", reserved.Load(), stockPerSKU*int64(nSKU))},
		{"Redis conservation: initial = available + open_reserved + committed", total.Delta() == 0,
			fmt.Sprintf("%d = %d + %d + %d", total.Initial, total.Available, total.OpenReserved, total.Committed)},
		{"every reservation is open in Redis", total.OpenReserved == reserved.Load(), fmt.Sprintf("open_reserved %d", total.OpenReserved)},
		{"every unsent reservation is still in send_due", pending == sendFailed.Load(), fmt.Sprintf("%d pending", pending)},
		{"PostgreSQL conservation", pgDelta == 0, fmt.Sprintf("delta %d", pgDelta)},
	}
	failed := false
	fmt.Println("\ninvariants")
	for _, c := range checks {
		mark := "ok  "
		if !c.ok {
			mark, failed = "FAIL", true
		}
		fmt.Printf("  %s %-68s %s\n", mark, c.name, c.got)
	}
	fmt.Println("\nthe order-create messages now wait on the broker for the order consumer")
	if failed {
		return fmt.Errorf("an invariant failed")
	}
	return nil
}

// sendOrderCreate sends the reservation's order-create message at once with
// its fixed id and acks the send_due entry; on failure the entry stays for
// the scanner (the outcome may be unknown, so the id never changes).
func sendOrderCreate(ctx context.Context, p *mq.Producer, s *redisstore.Store, r redisstore.ReserveRequest) bool {
	body := fmt.Sprintf(`{"schema_version":1,"event_type":"ORDER_CREATE_REQUESTED","message_id":%q,"message_key":%q,"request_id":%q,"reservation_id":%q,"activity_id":%d,"sku_id":%d,"user_id":%d,"reserved_at":%q,"business_deadline":%q,"retry_count":0}`,
		r.MessageID, r.ReservationID, r.RequestID, r.ReservationID, r.Slot.ActivityID, r.Slot.SKUID, r.UserID,
		r.Now.UTC().Format(time.RFC3339Nano), r.BusinessDeadline.UTC().Format(time.RFC3339Nano))
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := p.Send(sctx, mq.Message{Topic: names.TopicOrderCreate, MessageID: r.MessageID.String(),
		Key: r.ReservationID.String(), Tag: ids.EventOrderCreateRequested, Body: []byte(body)}); err != nil {
		_, _ = s.RescheduleSend(ctx, r.Slot, r.ReservationID, r.SendDue.UnixMilli(), time.Now().Add(time.Second), redisstore.MQUnknown, err.Error())
		return false
	}
	res, err := s.AckSend(ctx, r.Slot, r.ReservationID, r.SendDue.UnixMilli(), time.Now())
	return err == nil && res.OK()
}
