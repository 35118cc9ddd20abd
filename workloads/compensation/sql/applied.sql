-- CompensationComplete, part 2: the task APPLIED, only by its lease owner.
UPDATE compensation_task
SET status = 'APPLIED', lease_owner = NULL, lease_until = NULL, last_result = $3, last_error = NULL,
    updated_at = clock_timestamp()
WHERE task_id = $1 AND lease_owner = $2 AND status = 'CLAIMED';
