-- RefundsDue: payments of cancelled orders waiting for their refund at the
-- channel. $1 provider, $2 limit.
SELECT payment_id, provider_transaction_id
FROM payment_record
WHERE provider = $1 AND status = 'REFUNDING'
ORDER BY updated_at
LIMIT $2;
