-- TaskFailed: the attempt failed; the task stays PENDING without a lease,
-- so the next run takes it again. $1 id, $2 error.
UPDATE repair_task
SET lease_until = NULL, last_error = $2, updated_at = clock_timestamp()
WHERE repair_id = $1 AND status = 'PENDING';
