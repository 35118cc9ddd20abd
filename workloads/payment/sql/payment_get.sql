-- PaymentGet: the recorded payment of a provider transaction. $1 provider, $2 transaction.
SELECT payment_id, order_id, amount_cents, currency, status
FROM payment_record WHERE provider = $1 AND provider_transaction_id = $2;
