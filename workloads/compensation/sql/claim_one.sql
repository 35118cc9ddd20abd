-- CompensationClaimOne: lease one named task for the reconcile job or an
-- approved runbook repair, when no live lease holds it. A MANUAL task is
-- taken only when the caller has the evidence that allows it ($4, e.g. the
-- Redis marker shows this compensation applied).
-- $1 task, $2 lease owner, $3 lease duration, $4 take a MANUAL task, $5 now
-- (NULL: the database's clock).
UPDATE compensation_task AS t
SET status = 'CLAIMED', lease_owner = $2, lease_until = coalesce($5::timestamptz, clock_timestamp()) + $3::interval,
    attempt_count = attempt_count + 1, updated_at = coalesce($5::timestamptz, clock_timestamp())
FROM inventory_reservation AS r
WHERE t.task_id = $1 AND r.reservation_id = t.reservation_id
  AND (t.status IN ('PENDING', 'RETRY')
       OR (t.status = 'CLAIMED' AND t.lease_until < coalesce($5::timestamptz, clock_timestamp()))
       OR (t.status = 'MANUAL' AND $4))
RETURNING t.task_id, t.reservation_id, t.idempotency_key, t.attempt_count, r.activity_id, r.sku_id, r.bucket,
          coalesce(t.traceparent, '');
