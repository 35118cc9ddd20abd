package controllers

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/seckill/seckill-operator/workloads/control"
)

// The stock figures of design.md#metrics, per activity and SKU, as the
// operator reads them from PostgreSQL and Redis on every pass (measure):
// the three conservation differences the alerts watch, and the units by
// state the dashboard shows. Labels are the activity and SKU ids only
// (bounded: never a user, request or reservation).
var (
	inventoryPGDelta = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_inventory_pg_invariant_delta",
		Help: "PostgreSQL initial - available - occupied - sold per SKU (0: every unit accounted for)."}, []string{"activity", "sku"})
	inventoryRedisDelta = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_inventory_redis_invariant_delta",
		Help: "Redis conservation difference summed over the SKU's buckets, moves included (0: every unit accounted for)."}, []string{"activity", "sku"})
	inventoryCrossDelta = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_inventory_cross_system_delta",
		Help: "Redis committed - PostgreSQL (occupied + sold) per SKU: the projection's lag during a sale, 0 once settled."}, []string{"activity", "sku"})
	skuUnits = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_sku_stock_units",
		Help: "Units of a SKU by state: initial, available, occupied, sold (PostgreSQL); reserved (open in Redis), redis_available."}, []string{"activity", "sku", "state"})
	// The backlog the operator scales by and guards: reservations open in
	// Redis, sent or not, whose order the sale has not yet seen through
	// (PostgreSQL's decision and its projection back to Redis).
	backlogOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_order_backlog_reservations",
		Help: "Reservations open in Redis: their order not yet decided in PostgreSQL and projected back."}, []string{"activity"})
	backlogAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_order_backlog_oldest_age_seconds",
		Help: "Age of the oldest open reservation: how long the slowest order-create message has been on its way."}, []string{"activity"})
	// The order consumers as the operator sized them (its reason is in
	// status.scalingReason and an event: text is no label).
	consumerCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_order_consumers",
		Help: "Order consumer pods: desired (the operator's decision) and ready."}, []string{"activity", "state"})
)

func init() {
	crmetrics.Registry.MustRegister(inventoryPGDelta, inventoryRedisDelta, inventoryCrossDelta, skuUnits, backlogOpen, backlogAge, consumerCount)
}

// observeInventory sets the activity's stock figures and backlog from one
// pass's counts.
func observeInventory(activity int64, counts []control.SKUCounts, b control.Backlog) {
	a := strconv.FormatInt(activity, 10)
	backlogOpen.WithLabelValues(a).Set(float64(b.Open))
	backlogAge.WithLabelValues(a).Set(b.OldestAge.Seconds())
	for _, c := range counts {
		if !c.Provisioned {
			continue
		}
		sku := strconv.FormatInt(c.ID, 10)
		inventoryPGDelta.WithLabelValues(a, sku).Set(float64(c.PostgresDelta()))
		inventoryRedisDelta.WithLabelValues(a, sku).Set(float64(c.RedisDelta))
		inventoryCrossDelta.WithLabelValues(a, sku).Set(float64(c.CrossSystemDelta()))
		for state, v := range map[string]int64{"initial": c.Initial, "available": c.Available, "occupied": c.Occupied, "sold": c.Sold,
			"reserved": c.RedisOpen, "redis_available": c.RedisAvailable} {
			skuUnits.WithLabelValues(a, sku, state).Set(float64(v))
		}
	}
}

// observeConsumers sets the order consumers desired and ready.
func observeConsumers(activity int64, desired, ready int32) {
	a := strconv.FormatInt(activity, 10)
	consumerCount.WithLabelValues(a, "desired").Set(float64(desired))
	consumerCount.WithLabelValues(a, "ready").Set(float64(ready))
}

// forgetActivity drops the activity's series, stock and reconcile runs
// alike (it is deleted).
func forgetActivity(activity int64) {
	l := prometheus.Labels{"activity": strconv.FormatInt(activity, 10)}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		inventoryPGDelta, inventoryRedisDelta, inventoryCrossDelta, skuUnits, backlogOpen, backlogAge, consumerCount,
		reconcileAnomalies, reconcileAutoRepairs, reconcileManual, reconcileDuration} {
		v.DeletePartialMatch(l)
	}
}
