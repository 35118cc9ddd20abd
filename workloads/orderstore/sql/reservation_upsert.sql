-- ReservationUpsert: the PostgreSQL trace of a Redis reservation (design.md#order-transaction).
INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline, bucket)
VALUES ($1, $2, $3, $4, $5, $6, 'RESERVED', $7, $8, $9)
ON CONFLICT (reservation_id) DO NOTHING;
