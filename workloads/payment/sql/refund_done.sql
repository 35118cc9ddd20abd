-- RefundDone: the channel confirmed the refund. $1 payment.
UPDATE payment_record SET status = 'REFUNDED', updated_at = clock_timestamp()
WHERE payment_id = $1 AND status = 'REFUNDING';
