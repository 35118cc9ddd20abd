-- EvidenceResolve (design.md#runbook step 2): the reservations an id belongs to,
-- whatever kind of id it is (request, reservation, message or event, order,
-- payment, or a provider transaction id). $1 id as text.
WITH id AS (SELECT $1::text AS t, CASE WHEN $1 ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' THEN $1::uuid END AS u)
SELECT r.reservation_id, 'reservation' FROM inventory_reservation AS r, id WHERE r.reservation_id = id.u
UNION SELECT r.reservation_id, 'request' FROM inventory_reservation AS r, id WHERE r.request_id = id.u
UNION SELECT r.reservation_id, 'message' FROM inventory_reservation AS r, id WHERE r.message_id = id.u
UNION SELECT o.reservation_id, 'order' FROM orders AS o, id WHERE o.order_id = id.u
UNION SELECT o.reservation_id, 'request' FROM orders AS o, id WHERE o.request_id = id.u
UNION SELECT o.reservation_id, 'payment' FROM payment_record AS p JOIN orders AS o USING (order_id), id
      WHERE p.payment_id = id.u OR p.provider_transaction_id = id.t
UNION SELECT i.reservation_id, 'message' FROM consumer_inbox AS i, id WHERE i.message_id = id.u AND i.reservation_id IS NOT NULL
UNION SELECT r.reservation_id, 'outbox_event' FROM event_outbox AS e
      JOIN inventory_reservation AS r ON r.reservation_id = e.aggregate_id OR r.order_id = e.aggregate_id, id
      WHERE e.event_id = id.u;
