-- Unfreeze: restore the state a frozen reservation had. $1 reservation.
WITH lifted AS (
    DELETE FROM reservation_freeze WHERE reservation_id = $1 RETURNING reservation_id, frozen_status
)
UPDATE inventory_reservation AS r
SET status = lifted.frozen_status, version = version + 1, updated_at = clock_timestamp()
FROM lifted
WHERE r.reservation_id = lifted.reservation_id AND r.status = 'MANUAL_REVIEW'
RETURNING r.status, r.version;
