package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
)

func skusOf(act *seckillv1alpha1.SeckillActivity) []control.SKU {
	out := make([]control.SKU, 0, len(act.Spec.SKUs))
	for _, s := range act.Spec.SKUs {
		out = append(out, control.SKU{ID: s.ID, Stock: s.Stock, Buckets: int(max(s.Buckets, 1)),
			PriceCents: s.PriceCents, Currency: currencyOf(act)})
	}
	return out
}

// currencyOf is the activity's currency (the CRD's default when unset).
func currencyOf(act *seckillv1alpha1.SeckillActivity) string {
	if act.Spec.Currency == "" {
		return "CNY"
	}
	return act.Spec.Currency
}

// provision applies the manifest's stock to PostgreSQL and every Redis
// bucket, once per generation (a stock increase lands once in both).
func (r *SeckillActivityReconciler) provision(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store *control.Store) error {
	var changed []string
	for _, sku := range skusOf(act) {
		p, err := store.Provision(ctx, act.Spec.ActivityID, sku, act.Generation)
		if err != nil {
			setCondition(act, seckillv1alpha1.ConditionStockProvisioned, false, "ProvisioningFailed", err.Error())
			return err
		}
		if p.Changed() {
			changed = append(changed, fmt.Sprintf("SKU %d → %d", sku.ID, sku.Stock))
		}
	}
	msg := fmt.Sprintf("stock of generation %d is in PostgreSQL and Redis", act.Generation)
	setCondition(act, seckillv1alpha1.ConditionStockProvisioned, true, "Provisioned", msg)
	if len(changed) > 0 {
		r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, "StockProvisioned", "Provision", "generation %d: %s", act.Generation, strings.Join(changed, ", "))
	}
	return nil
}

// moveWindow sets the window flag for now and returns when it next changes.
func (r *SeckillActivityReconciler) moveWindow(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store *control.Store, now time.Time) (time.Time, error) {
	state, next := windowState(&act.Spec, now)
	err := store.SetWindow(ctx, act.Spec.ActivityID, skusOf(act), control.Settings{Window: state,
		BusinessDeadline: dur(act.Spec.BusinessDeadline, defaultDeadline), PaymentWindow: dur(act.Spec.PaymentWindow, defaultPaymentWindow),
		Generation: act.Generation})
	if err != nil {
		return time.Time{}, err
	}
	return next, nil
}

// measure fills the per-SKU counters and the backlog from the stores.
func (r *SeckillActivityReconciler) measure(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store *control.Store, now time.Time) (control.Backlog, error) {
	counts, backlog, err := store.Counts(ctx, act.Spec.ActivityID, skusOf(act), now)
	if err != nil {
		return backlog, err
	}
	st := &act.Status
	var stock, sold int64
	for i := range st.SKUs {
		for _, c := range counts {
			if c.ID != st.SKUs[i].ID {
				continue
			}
			st.SKUs[i].Sold = c.Occupied + c.Sold
			st.SKUs[i].OpenReservations = c.RedisOpen
			st.SKUs[i].Remaining = max(c.RedisAvailable, 0)
		}
		stock += st.SKUs[i].Stock
		sold += st.SKUs[i].Sold
	}
	st.Sold = fmt.Sprintf("%d/%d", sold, stock)
	st.OpenReservations = backlog.Open
	st.OldestBacklogAgeSeconds = int64(backlog.OldestAge / time.Second)
	return backlog, nil
}
