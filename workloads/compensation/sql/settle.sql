-- CompensationSettle: RETRY after a backoff (MANUAL past the cap) or MANUAL at
-- once, only by the lease owner. $1 task, $2 owner, $3 status, $4 backoff,
-- $5 last result, $6 last error, $7 max attempts.
UPDATE compensation_task
SET status        = CASE WHEN $3 = 'RETRY' AND attempt_count >= $7 THEN 'MANUAL' ELSE $3 END,
    next_retry_at = clock_timestamp() + $4::interval,
    lease_owner   = NULL,
    lease_until   = NULL,
    last_result   = $5,
    last_error    = $6,
    updated_at    = clock_timestamp()
WHERE task_id = $1 AND lease_owner = $2 AND status = 'CLAIMED'
RETURNING status;
