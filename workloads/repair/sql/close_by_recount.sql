-- CloseByRecount: a rejected reservation whose Redis key is gone and whose
-- unit an applied recount put back: its MANUAL compensation task is
-- VERIFIED (RECOUNTED) and the reservation COMPENSATED, both or neither.
-- $1 reservation, $2 task.
WITH t AS (
    UPDATE compensation_task
    SET status = 'VERIFIED', last_result = 'RECOUNTED', last_error = NULL,
        lease_owner = NULL, lease_until = NULL, updated_at = clock_timestamp()
    WHERE task_id = $2 AND reservation_id = $1 AND status = 'MANUAL'
    RETURNING task_id
)
UPDATE inventory_reservation
SET status = 'COMPENSATED', version = version + 1, updated_at = clock_timestamp()
WHERE reservation_id = $1 AND status IN ('ORDER_REJECTED', 'COMPENSATING') AND EXISTS (SELECT 1 FROM t)
RETURNING reservation_id;
