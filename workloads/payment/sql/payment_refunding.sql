-- PaymentRefunding: a success reported for an order already cancelled goes
-- to the refund flow (seed §9.9, §11.5 row 7). $1 payment.
UPDATE payment_record
SET status = 'REFUNDING', updated_at = clock_timestamp()
WHERE payment_id = $1 AND status = 'SUCCESS'
RETURNING payment_id;
