-- OrderInsert: one valid order per (activity, sku, user).
INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, status, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, 'CREATED', clock_timestamp() + $7::interval)
ON CONFLICT (activity_id, sku_id, user_id) DO NOTHING
RETURNING order_id;
