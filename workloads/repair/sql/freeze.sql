-- Freeze (design.md#runbook step 1): remember the reservation's state, then set it
-- MANUAL_REVIEW; the consumer, the compensator, the canceller and the
-- reconcile job all leave a frozen reservation alone. $1 reservation, $2 repair id.
WITH remembered AS (
    INSERT INTO reservation_freeze (reservation_id, frozen_status, repair_id)
    SELECT reservation_id, status, $2 FROM inventory_reservation
    WHERE reservation_id = $1 AND status <> 'MANUAL_REVIEW'
    RETURNING reservation_id
)
UPDATE inventory_reservation AS r
SET status = 'MANUAL_REVIEW', version = version + 1, updated_at = clock_timestamp()
FROM remembered
WHERE r.reservation_id = remembered.reservation_id
RETURNING r.version;
