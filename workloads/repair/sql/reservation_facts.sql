-- ReservationFacts: what a repair step needs to know of a reservation and
-- its order. $1 reservation.
SELECT r.status, r.activity_id, r.sku_id, r.bucket, r.user_id, r.request_id, r.message_id, r.order_id,
       r.reserved_at, r.business_deadline, COALESCE(o.status, ''),
       t.task_id, COALESCE(t.status, '')
FROM inventory_reservation AS r
LEFT JOIN orders AS o ON o.order_id = r.order_id
LEFT JOIN compensation_task AS t
       ON t.reservation_id = r.reservation_id AND t.compensation_type = 'RELEASE_REDIS_RESERVATION'
WHERE r.reservation_id = $1;
