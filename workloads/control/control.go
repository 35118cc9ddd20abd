// Package control is what the operator reads and writes in the stores for
// one activity: the stock provisioning (PostgreSQL and Redis, once per
// manifest generation), the window flag, the backlog guard's pause flag, the
// counts shown in status, the consumers' measured capacity, and archiving.
// It holds no Kubernetes types; the controllers call it.
package control

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qProvision          = sqlfile.Must(sqlFiles, "provision")
	qPriceSet           = sqlfile.Must(sqlFiles, "price_set")
	qControlUpsert      = sqlfile.Must(sqlFiles, "control_upsert")
	qCompensationPause  = sqlfile.Must(sqlFiles, "compensation_pause")
	qCompensationPaused = sqlfile.Must(sqlFiles, "compensation_paused")
	qInventory          = sqlfile.Must(sqlFiles, "inventory")
	qConsumers          = sqlfile.Must(sqlFiles, "consumers")
	qDBCommits          = sqlfile.Must(sqlFiles, "db_commits")
	qLastRun            = sqlfile.Must(sqlFiles, "last_run")
	qRunsSince          = sqlfile.Must(sqlFiles, "runs_since")
	qControlGet         = sqlfile.Must(sqlFiles, "control_get")
)

// SKU is one product of the manifest.
type SKU struct {
	ID      int64
	Stock   int64
	Buckets int
	// PriceCents and Currency are what an order of the SKU costs; 0 leaves
	// the recorded price as it is (a SKU never priced sells orders of 0,
	// which no payment callback can pay).
	PriceCents int64
	Currency   string
}

// Slots are the Redis slots of the SKU.
func (s SKU) Slots(activity int64) []redisstore.Slot {
	return redisstore.Slots(activity, s.ID, s.Buckets)
}

// BucketTargets splits stock over n buckets, the first stock%n one larger.
// A larger stock never gives a bucket less, so growth stays per bucket.
func BucketTargets(stock int64, n int) []int64 {
	if n < 1 {
		n = 1
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = stock / int64(n)
		if int64(i) < stock%int64(n) {
			out[i]++
		}
	}
	return out
}

// Store is one activity's PostgreSQL and Redis.
type Store struct {
	Pool  *pgxpool.Pool
	Redis *redisstore.Store
}

// Provision results.
const (
	Applied        = "APPLIED"
	AlreadyApplied = "ALREADY_APPLIED"
	DecreaseRefuse = "STOCK_DECREASE_REFUSED"
)

// ErrStockDecrease says the manifest asks for less stock than provisioned.
var ErrStockDecrease = errors.New("stock may only grow")

// Provisioned says what one Provision did.
type Provisioned struct {
	Postgres string
	// Redis has one result per bucket.
	Redis []string
}

// Changed reports whether anything was applied now.
func (p Provisioned) Changed() bool {
	if p.Postgres == Applied {
		return true
	}
	for _, r := range p.Redis {
		if r == Applied {
			return true
		}
	}
	return false
}

// Provision sets the SKU's stock in PostgreSQL and in each Redis bucket to
// the manifest's, once per generation: calling it again for the same (or an
// older) generation changes nothing, and a stock increase is applied once.
func (s *Store) Provision(ctx context.Context, activity int64, sku SKU, generation int64) (Provisioned, error) {
	var out Provisioned
	if err := s.Pool.QueryRow(ctx, qProvision, activity, sku.ID, sku.Stock, generation).Scan(&out.Postgres); err != nil {
		return out, fmt.Errorf("provisioning SKU %d in PostgreSQL: %w", sku.ID, err)
	}
	if out.Postgres == DecreaseRefuse {
		return out, fmt.Errorf("SKU %d in PostgreSQL: %w", sku.ID, ErrStockDecrease)
	}
	if sku.PriceCents > 0 {
		var ok bool
		if err := s.Pool.QueryRow(ctx, qPriceSet, activity, sku.ID, sku.PriceCents, sku.Currency).Scan(&ok); err != nil {
			return out, fmt.Errorf("pricing SKU %d in PostgreSQL: %w", sku.ID, err)
		}
	}
	targets := BucketTargets(sku.Stock, sku.Buckets)
	for i, sl := range sku.Slots(activity) {
		res, _, err := s.Redis.Provision(ctx, sl, targets[i], generation)
		if err != nil {
			return out, fmt.Errorf("provisioning SKU %d bucket %d in Redis: %w", sku.ID, sl.Bucket, err)
		}
		if res.Code < 0 {
			return out, fmt.Errorf("SKU %d bucket %d in Redis: %s: %w", sku.ID, sl.Bucket, res.Reason, ErrStockDecrease)
		}
		out.Redis = append(out.Redis, res.Reason)
	}
	return out, nil
}

// Settings are what the workloads read from activity_control.
type Settings struct {
	Window           string
	BusinessDeadline time.Duration
	PaymentWindow    time.Duration
	Generation       int64
}

// SetWindow moves the window flag of every slot in Redis (the gateway's
// reserve script obeys it) and records it with the durations in PostgreSQL.
func (s *Store) SetWindow(ctx context.Context, activity int64, skus []SKU, st Settings) error {
	for _, sku := range skus {
		for _, sl := range sku.Slots(activity) {
			if err := s.Redis.SetWindow(ctx, sl, st.Window); err != nil {
				return err
			}
		}
	}
	if _, err := s.Pool.Exec(ctx, qControlUpsert, activity, st.Window, st.BusinessDeadline.Milliseconds(),
		st.PaymentWindow.Milliseconds(), st.Generation); err != nil {
		return fmt.Errorf("recording the window of activity %d: %w", activity, err)
	}
	return nil
}

// Control is the activity_control row as the workloads read it.
type Control struct {
	Settings
	CompensationPaused bool
	PauseReason        string
	UpdatedAt          time.Time
}

// ReadControl reads the activity's control row (nil: none yet).
func (s *Store) ReadControl(ctx context.Context, activity int64) (*Control, error) {
	var c Control
	var deadline, payment int64
	err := s.Pool.QueryRow(ctx, qControlGet, activity).Scan(&c.Window, &deadline, &payment, &c.Generation,
		&c.CompensationPaused, &c.PauseReason, &c.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading activity_control of activity %d: %w", activity, err)
	}
	c.BusinessDeadline, c.PaymentWindow = time.Duration(deadline)*time.Millisecond, time.Duration(payment)*time.Millisecond
	return &c, nil
}

// SetCompensationPaused sets the backlog guard's flag and reports whether it
// changed.
func (s *Store) SetCompensationPaused(ctx context.Context, activity int64, paused bool, reason string) (bool, error) {
	var id int64
	err := s.Pool.QueryRow(ctx, qCompensationPause, activity, paused, reason).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("setting compensation_paused of activity %d: %w", activity, err)
	}
	return true, nil
}

// CompensationPaused reads the backlog guard's flag.
func (s *Store) CompensationPaused(ctx context.Context, activity int64) (bool, error) {
	var paused bool
	if err := s.Pool.QueryRow(ctx, qCompensationPaused, activity).Scan(&paused); err != nil {
		return false, fmt.Errorf("reading compensation_paused of activity %d: %w", activity, err)
	}
	return paused, nil
}

// SKUCounts is one SKU as the stores see it.
type SKUCounts struct {
	ID                                      int64
	Provisioned                             bool
	Initial, Available, Occupied, Sold      int64
	RedisInitial, RedisAvailable, RedisOpen int64
	// RedisCommitted is the units Redis counts as PostgreSQL's orders;
	// RedisDelta the sum of each bucket's conservation difference
	// (redisstore.Counters.Delta: 0 when every unit is accounted for).
	RedisCommitted, RedisDelta int64
}

// PostgresDelta is initial - available - occupied - sold: 0 when
// PostgreSQL's stock columns conserve every unit.
func (c SKUCounts) PostgresDelta() int64 { return c.Initial - c.Available - c.Occupied - c.Sold }

// CrossSystemDelta is Redis committed - (PostgreSQL occupied + sold): 0
// once the projection has caught up; while a sale runs it is the
// projection's lag (design.md#invariants judges it settled).
func (c SKUCounts) CrossSystemDelta() int64 { return c.RedisCommitted - c.Occupied - c.Sold }

// Inventory reads a SKU's PostgreSQL stock columns (Provisioned false: no row).
func (s *Store) Inventory(ctx context.Context, activity, sku int64) (SKUCounts, error) {
	c := SKUCounts{ID: sku}
	err := s.Pool.QueryRow(ctx, qInventory, activity, sku).Scan(&c.Initial, &c.Available, &c.Occupied, &c.Sold)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return c, nil
	case err != nil:
		return c, fmt.Errorf("reading the inventory of SKU %d: %w", sku, err)
	}
	c.Provisioned = true
	return c, nil
}

// Backlog is the order-create backlog: reservations PostgreSQL has not
// decided yet, and the age of the oldest.
type Backlog struct {
	Open      int64
	OldestAge time.Duration
}

// Counts reads every SKU's stock in PostgreSQL and Redis and the backlog.
func (s *Store) Counts(ctx context.Context, activity int64, skus []SKU, now time.Time) ([]SKUCounts, Backlog, error) {
	var out []SKUCounts
	var b Backlog
	for _, sku := range skus {
		c, err := s.Inventory(ctx, activity, sku.ID)
		if err != nil {
			return nil, b, err
		}
		slots := sku.Slots(activity)
		for _, sl := range slots {
			rc, err := s.Redis.ReadCounters(ctx, sl)
			if err != nil {
				return nil, b, err
			}
			c.RedisInitial += rc.Initial
			c.RedisAvailable += rc.Available
			c.RedisOpen += rc.OpenReserved
			c.RedisCommitted += rc.Committed
			c.RedisDelta += rc.Delta()
		}
		n, age, err := s.Redis.Backlog(ctx, slots, now)
		if err != nil {
			return nil, b, err
		}
		b.Open += n
		if age > b.OldestAge {
			b.OldestAge = age
		}
		out = append(out, c)
	}
	return out, b, nil
}

// Consumers is what the order consumers' heartbeats say.
type Consumers struct {
	Live int
	// Rate is their summed commit rate (orders/s).
	Rate float64
	// P50 is the median of their median commit latencies; P99 the worst p99.
	P50, P99 time.Duration
}

// ReadConsumers reads the heartbeats reported within fresh.
func (s *Store) ReadConsumers(ctx context.Context, activity int64, fresh time.Duration) (Consumers, error) {
	var c Consumers
	var p50, p99 float64
	if err := s.Pool.QueryRow(ctx, qConsumers, activity, fmt.Sprintf("%d milliseconds", fresh.Milliseconds())).Scan(&c.Live, &c.Rate, &p50, &p99); err != nil {
		return c, fmt.Errorf("reading consumer heartbeats: %w", err)
	}
	c.P50 = time.Duration(p50 * float64(time.Millisecond))
	c.P99 = time.Duration(p99 * float64(time.Millisecond))
	return c, nil
}

// DBCommits is PostgreSQL's count of committed transactions so far.
func (s *Store) DBCommits(ctx context.Context) (int64, error) {
	var n int64
	if err := s.Pool.QueryRow(ctx, qDBCommits).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	return n, nil
}

// Archive stops traffic (window ENDED) and lets every Redis key of the
// activity expire after retention. PostgreSQL is not touched: orders and the
// ledger are business records. It returns how many keys were given a TTL.
func (s *Store) Archive(ctx context.Context, activity int64, skus []SKU, retention time.Duration) (int, error) {
	var n atomic.Int64 // the cluster's masters are scanned side by side
	c := s.Redis.Client()
	for _, sku := range skus {
		for _, sl := range sku.Slots(activity) {
			if err := s.Redis.SetWindow(ctx, sl, redisstore.WindowEnded); err != nil {
				return int(n.Load()), err
			}
			pattern := "seckill:" + sl.Tag() + ":*"
			expire := func(ctx context.Context, node redis.UniversalClient) error {
				iter := node.Scan(ctx, 0, pattern, 500).Iterator()
				for iter.Next(ctx) {
					// NX: keys that already expire (terminal reservations) keep their TTL.
					if err := c.Do(ctx, "PEXPIRE", iter.Val(), retention.Milliseconds(), "NX").Err(); err != nil {
						return fmt.Errorf("expiring %s: %w", iter.Val(), err)
					}
					n.Add(1)
				}
				return iter.Err()
			}
			var err error
			if cc, ok := c.(*redis.ClusterClient); ok {
				err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return expire(ctx, m) })
			} else {
				err = expire(ctx, c)
			}
			if err != nil {
				return int(n.Load()), fmt.Errorf("archiving %s: %w", sl.Tag(), err)
			}
		}
	}
	return int(n.Load()), nil
}

// Run is a finished reconcile run.
type Run struct {
	ID, Status                      string
	FinishedAt                      time.Time
	Anomalies, AutoRepaired, Manual int32
}

// LastRun is the activity's latest finished reconcile run (nil: none yet).
func (s *Store) LastRun(ctx context.Context, activity int64) (*Run, error) {
	var r Run
	err := s.Pool.QueryRow(ctx, qLastRun, activity).Scan(&r.ID, &r.Status, &r.FinishedAt, &r.Anomalies, &r.AutoRepaired, &r.Manual)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the last reconcile run: %w", err)
	}
	return &r, nil
}

// RunFindings is one finished reconcile run as its metrics see it.
type RunFindings struct {
	ID         string
	FinishedAt time.Time
	Duration   time.Duration
	// ByType counts, per anomaly type, what the run found, repaired
	// automatically itself and left for a person.
	ByType map[string]TypeFindings
}

// TypeFindings are one anomaly type's counts in a run.
type TypeFindings struct{ Found, AutoRepaired, Manual int64 }

// RunsSince lists the activity's reconcile runs finished after after, oldest first.
func (s *Store) RunsSince(ctx context.Context, activity int64, after time.Time) ([]RunFindings, error) {
	rows, err := s.Pool.Query(ctx, qRunsSince, activity, after)
	if err != nil {
		return nil, fmt.Errorf("reading reconcile runs: %w", err)
	}
	defer rows.Close()
	var out []RunFindings
	for rows.Next() {
		var (
			id, typ string
			at      time.Time
			secs    float64
			f       TypeFindings
		)
		if err := rows.Scan(&id, &at, &secs, &typ, &f.Found, &f.AutoRepaired, &f.Manual); err != nil {
			return nil, fmt.Errorf("reading reconcile runs: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].ID != id {
			out = append(out, RunFindings{ID: id, FinishedAt: at, Duration: time.Duration(secs * float64(time.Second)), ByType: map[string]TypeFindings{}})
		}
		if typ != "" {
			out[len(out)-1].ByType[typ] = f
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading reconcile runs: %w", err)
	}
	return out, nil
}
