-- CommitVerify (design.md#commit-unknown): after a COMMIT whose answer was lost, what the
-- message left behind — its inbox row (hash, result, order) and whether the
-- rest of its transaction is there with it: the order of the reservation,
-- the OCCUPY ledger entry, the reservation's state, a compensation task.
-- Zero rows: nothing was committed. $1 group, $2 message.
SELECT i.payload_hash, i.result_code, i.order_id,
       EXISTS (SELECT 1 FROM orders AS o WHERE o.order_id = i.order_id AND o.reservation_id = i.reservation_id),
       EXISTS (SELECT 1 FROM inventory_ledger AS l WHERE l.idempotency_key = 'OCCUPY:' || i.reservation_id::text),
       coalesce((SELECT r.status FROM inventory_reservation AS r WHERE r.reservation_id = i.reservation_id), ''),
       EXISTS (SELECT 1 FROM compensation_task AS t WHERE t.reservation_id = i.reservation_id)
FROM consumer_inbox AS i
WHERE i.consumer_group = $1 AND i.message_id = $2;
