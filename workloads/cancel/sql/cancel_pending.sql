-- CancelPending (design.md#payment-cancel): only an expired, unpaid order enters
-- CANCEL_PENDING. $1 order.
UPDATE orders
SET status = 'CANCEL_PENDING', version = version + 1, updated_at = clock_timestamp()
WHERE order_id = $1 AND status IN ('CREATED', 'PAYING') AND expires_at <= clock_timestamp()
RETURNING order_id;
