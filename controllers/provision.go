package controllers

import (
	"context"
	"fmt"
	"strings"

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
func (r *SeckillActivityReconciler) provision(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore) error {
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
