-- CompensationClaimBatch (design.md#compensation): lease due tasks with SKIP LOCKED;
-- an expired CLAIMED lease is reclaimed (the worker died mid-way). While the
-- operator's backlog guard pauses time-driven compensation (design.md#backlog), the compensations of deadline rejections wait; those of PostgreSQL's
-- stock and one-per-user decisions go on.
-- $1 limit, $2 lease owner, $3 lease duration, $4 now (NULL: the
-- database's clock; tests pass a later one instead of sleeping).
WITH candidates AS (
    SELECT task_id
    FROM compensation_task
    WHERE (status IN ('PENDING', 'RETRY') OR (status = 'CLAIMED' AND lease_until < coalesce($4::timestamptz, clock_timestamp())))
      AND next_retry_at <= coalesce($4::timestamptz, clock_timestamp())
      AND NOT EXISTS (
          SELECT 1
          FROM inventory_reservation AS r
          JOIN activity_control AS ac ON ac.activity_id = r.activity_id
          WHERE r.reservation_id = compensation_task.reservation_id
            AND ac.compensation_paused
            AND r.reason_code = 'BUSINESS_DEADLINE_EXCEEDED')
    ORDER BY next_retry_at, created_at
    FOR UPDATE SKIP LOCKED
    LIMIT $1
)
UPDATE compensation_task AS t
SET status = 'CLAIMED', lease_owner = $2, lease_until = coalesce($4::timestamptz, clock_timestamp()) + $3::interval,
    attempt_count = attempt_count + 1, updated_at = coalesce($4::timestamptz, clock_timestamp())
FROM candidates AS c, inventory_reservation AS r
WHERE t.task_id = c.task_id AND r.reservation_id = t.reservation_id
RETURNING t.task_id, t.reservation_id, t.idempotency_key, t.attempt_count, r.activity_id, r.sku_id, r.bucket,
          coalesce(t.traceparent, '');
