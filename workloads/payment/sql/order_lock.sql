-- OrderLock: the order a payment is for, locked for this transaction, and
-- the trace its payment joins (design.md#traces). $1 order.
SELECT status, amount_cents, currency, activity_id, sku_id, reservation_id, coalesce(traceparent, '')
FROM orders WHERE order_id = $1
FOR UPDATE;
