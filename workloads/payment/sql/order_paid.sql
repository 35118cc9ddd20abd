-- OrderPaid (design.md#payment-cancel): CAS to PAID from CREATED, PAYING or CANCEL_PENDING.
-- $1 order, $2 paid at.
UPDATE orders
SET status = 'PAID', paid_at = $2, version = version + 1, updated_at = clock_timestamp()
WHERE order_id = $1 AND status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')
RETURNING order_id;
