-- OrderGet: the order a timer is for, with its reservation's bucket and
-- status (a frozen reservation keeps the timer waiting). $1 order.
SELECT o.status, o.expires_at, o.activity_id, o.sku_id, o.reservation_id, r.bucket, o.amount_cents, r.status
FROM orders AS o JOIN inventory_reservation AS r USING (reservation_id)
WHERE o.order_id = $1;
