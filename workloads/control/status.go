package control

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// Status is what the stores hold for an activity (`seckill activity status`).
type Status struct {
	Activity  int64       `json:"activity_id"`
	Control   *Control    `json:"control"`
	SKUs      []SKUStatus `json:"skus"`
	Backlog   Backlog     `json:"backlog"`
	LastRun   *Run        `json:"last_reconcile_run"`
	Problems  []string    `json:"problems"`
	CheckedAt time.Time   `json:"checked_at"`
}

// BucketStatus is one Redis slot of a SKU.
type BucketStatus struct {
	Slot   string `json:"slot"`
	Window string `json:"window"`
	redisstore.Counters
}

// SKUStatus is one SKU in both stores.
type SKUStatus struct {
	ID        int64               `json:"sku_id"`
	Postgres  SKUCounts           `json:"postgres"`
	Buckets   []BucketStatus      `json:"redis_buckets"`
	Redis     redisstore.Counters `json:"redis_total"`
	InTransit int64               `json:"units_in_transit"`
}

// Status reads what the stores hold for the activity and lists what looks
// wrong (not provisioned, not conserved, windows that disagree, units in
// transit between buckets).
func (store *Store) Status(ctx context.Context, activity int64, skus []SKU, now time.Time) (Status, error) {
	st := Status{Activity: activity, CheckedAt: now, Problems: []string{}}
	var err error
	if st.Control, err = store.ReadControl(ctx, activity); err != nil {
		return st, err
	}
	if st.Control == nil {
		st.Problems = append(st.Problems, "no activity_control row: run `seckill activity window`")
	}
	counts, backlog, err := store.Counts(ctx, activity, skus, now)
	if err != nil {
		return st, err
	}
	st.Backlog = backlog
	for i, sku := range skus {
		s := SKUStatus{ID: sku.ID, Postgres: counts[i]}
		if !counts[i].Provisioned {
			st.Problems = append(st.Problems, fmt.Sprintf("SKU %d: not provisioned in PostgreSQL", sku.ID))
		}
		for _, sl := range sku.Slots(activity) {
			rc, err := store.Redis.ReadCounters(ctx, sl)
			if err != nil {
				return st, err
			}
			win, err := store.Redis.Window(ctx, sl)
			if err != nil {
				return st, err
			}
			if !rc.Exists {
				st.Problems = append(st.Problems, fmt.Sprintf("SKU %d: Redis %s not provisioned", sku.ID, sl.Tag()))
			} else if d := rc.Delta(); d != 0 {
				st.Problems = append(st.Problems, fmt.Sprintf("SKU %d: Redis %s does not conserve stock (delta %d)", sku.ID, sl.Tag(), d))
			}
			if st.Control != nil && win != st.Control.Window {
				st.Problems = append(st.Problems, fmt.Sprintf("SKU %d: Redis %s window %q, activity_control %q", sku.ID, sl.Tag(), win, st.Control.Window))
			}
			s.Buckets = append(s.Buckets, BucketStatus{Slot: sl.Tag(), Window: win, Counters: rc})
			s.Redis = s.Redis.Add(rc)
		}
		s.InTransit = s.Redis.InTransit()
		if s.InTransit != 0 {
			st.Problems = append(st.Problems, fmt.Sprintf("SKU %d: %d unit(s) in transit between buckets (the gateway or the reconcile job settles them)", sku.ID, s.InTransit))
		}
		if d := counts[i].Initial - counts[i].Available - counts[i].Occupied - counts[i].Sold; counts[i].Provisioned && d != 0 {
			st.Problems = append(st.Problems, fmt.Sprintf("SKU %d: PostgreSQL does not conserve stock (delta %d)", sku.ID, d))
		}
		st.SKUs = append(st.SKUs, s)
	}
	if st.LastRun, err = store.LastRun(ctx, activity); err != nil {
		return st, err
	}
	return st, nil
}
