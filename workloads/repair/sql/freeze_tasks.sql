-- FreezeTasks: the reservation's unfinished compensation tasks become
-- MANUAL (their retries stop). $1 reservation.
UPDATE compensation_task
SET status = 'MANUAL', lease_owner = NULL, lease_until = NULL, last_result = 'FROZEN', updated_at = clock_timestamp()
WHERE reservation_id = $1 AND status IN ('PENDING', 'RETRY', 'CLAIMED')
RETURNING task_id;
