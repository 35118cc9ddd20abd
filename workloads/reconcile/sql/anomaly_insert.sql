-- AnomalyInsert: one finding with its evidence and the repair task it led to.
-- $1 run, $2 type, $3 severity, $4 activity, $5 sku, $6 object, $7 delta,
-- $8 evidence, $9 repair id (NULL: none).
INSERT INTO reconcile_anomaly (run_id, anomaly_type, severity, activity_id, sku_id, object_id, delta, evidence, repair_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);
