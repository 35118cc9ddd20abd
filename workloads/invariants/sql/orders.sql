-- Orders: the one-order rules of activity $1, each a count of the rows that
-- break it.
SELECT
  -- one valid order per user and SKU
  (SELECT count(*) FROM (SELECT 1 FROM orders WHERE activity_id = $1 AND status NOT IN ('CANCELLED', 'REFUNDED')
                         GROUP BY sku_id, user_id HAVING count(*) > 1) AS d)::bigint,
  -- one order per reservation
  (SELECT count(*) FROM (SELECT 1 FROM orders WHERE activity_id = $1 GROUP BY reservation_id HAVING count(*) > 1) AS d)::bigint,
  -- every order's reservation recorded ORDER_CREATED with it (or frozen for
  -- review from ORDER_CREATED: the freeze remembers the state)
  (SELECT count(*) FROM orders AS o
   LEFT JOIN inventory_reservation AS r ON r.reservation_id = o.reservation_id
   LEFT JOIN reservation_freeze AS f ON f.reservation_id = o.reservation_id
   WHERE o.activity_id = $1
     AND (r.reservation_id IS NULL OR r.order_id IS DISTINCT FROM o.order_id
          OR NOT (r.status = 'ORDER_CREATED' OR (r.status = 'MANUAL_REVIEW' AND f.frozen_status = 'ORDER_CREATED'))))::bigint,
  -- every ORDER_CREATED reservation has its order
  (SELECT count(*) FROM inventory_reservation AS r
   WHERE r.activity_id = $1 AND r.status = 'ORDER_CREATED'
     AND NOT EXISTS (SELECT 1 FROM orders AS o WHERE o.order_id = r.order_id))::bigint,
  -- no cancelled order keeps a successful payment
  (SELECT count(*) FROM orders AS o JOIN payment_record AS p ON p.order_id = o.order_id
   WHERE o.activity_id = $1 AND o.status = 'CANCELLED' AND p.status = 'SUCCESS')::bigint,
  -- no reservation compensated that made an order
  (SELECT count(*) FROM compensation_task AS t JOIN inventory_reservation AS r USING (reservation_id)
   WHERE r.activity_id = $1 AND r.order_id IS NOT NULL)::bigint;
