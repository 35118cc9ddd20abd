-- RecountCancelled: the bucket's cancelled orders (stock released in
-- PostgreSQL); Redis must have released them too before a recount.
-- $1 activity, $2 sku, $3 bucket.
SELECT r.reservation_id
FROM orders AS o
JOIN inventory_reservation AS r ON r.reservation_id = o.reservation_id
WHERE o.activity_id = $1 AND o.sku_id = $2 AND r.bucket = $3
  AND o.status IN ('CANCELLED', 'REFUNDING', 'REFUNDED');
