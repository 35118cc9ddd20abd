-- ReservationRejected: RESERVED -> ORDER_REJECTED with its reason: the
-- persisted decision that allows compensation (design.md#flow-rejection, design.md#late-messages).
UPDATE inventory_reservation
SET status = 'ORDER_REJECTED', reason_code = $2, version = version + 1, updated_at = clock_timestamp()
WHERE reservation_id = $1 AND status = 'RESERVED';
