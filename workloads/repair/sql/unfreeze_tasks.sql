-- UnfreezeTasks: the tasks the freeze stopped run again (only while the
-- reservation is one the compensator may act on). $1 reservation.
UPDATE compensation_task AS t
SET status = 'RETRY', next_retry_at = clock_timestamp(), last_result = 'UNFROZEN', updated_at = clock_timestamp()
FROM inventory_reservation AS r
WHERE t.reservation_id = $1 AND r.reservation_id = t.reservation_id
  AND t.status = 'MANUAL' AND t.last_result = 'FROZEN'
  AND r.status IN ('ORDER_REJECTED', 'COMPENSATING')
RETURNING t.task_id;
