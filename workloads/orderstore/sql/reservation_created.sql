-- ReservationCreated: RESERVED -> ORDER_CREATED, guarded by the current state.
UPDATE inventory_reservation
SET status = 'ORDER_CREATED', order_id = $2, version = version + 1, updated_at = clock_timestamp()
WHERE reservation_id = $1 AND status = 'RESERVED';
