-- ReservationsScan (design.md#reconcile load_pg_reservations_updated_before): one
-- page of a SKU's reservations last changed before the watermark (their
-- order too), with the order's status, the compensation task and the state
-- a frozen reservation had. $1 activity, $2 sku, $3 after this id, $4
-- watermark, $5 page size.
SELECT r.reservation_id, r.status, r.version, r.bucket, r.user_id, r.request_id, r.message_id, r.order_id,
       r.reserved_at, r.business_deadline, COALESCE(o.status, ''),
       t.task_id, COALESCE(t.status, ''), COALESCE(t.idempotency_key, ''),
       COALESCE(t.status = 'CLAIMED' AND t.lease_until >= clock_timestamp(), false),
       COALESCE(t.last_result, '')
FROM inventory_reservation AS r
LEFT JOIN orders AS o ON o.order_id = r.order_id
LEFT JOIN compensation_task AS t
       ON t.reservation_id = r.reservation_id AND t.compensation_type = 'RELEASE_REDIS_RESERVATION'
WHERE r.activity_id = $1 AND r.sku_id = $2 AND r.reservation_id > $3
  AND r.updated_at < $4 AND (o.updated_at IS NULL OR o.updated_at < $4)
ORDER BY r.reservation_id
LIMIT $5;
