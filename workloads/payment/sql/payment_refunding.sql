-- PaymentRefunding: a success reported for an order already cancelled goes
-- to the refund flow (design.md#payment-cancel, design.md#auto-repair row 7). $1 payment.
UPDATE payment_record
SET status = 'REFUNDING', updated_at = clock_timestamp()
WHERE payment_id = $1 AND status = 'SUCCESS'
RETURNING payment_id;
