-- CancelFinal (design.md#payment-cancel): after the channel confirmed no payment, cancel —
-- unless a successful payment was recorded meanwhile. $1 order.
UPDATE orders
SET status = 'CANCELLED', cancelled_at = clock_timestamp(), version = version + 1, updated_at = clock_timestamp()
WHERE order_id = $1 AND status = 'CANCEL_PENDING'
  AND NOT EXISTS (SELECT 1 FROM payment_record AS p WHERE p.order_id = orders.order_id AND p.status = 'SUCCESS')
RETURNING order_id;
