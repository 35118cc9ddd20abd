-- PaymentInsert (design.md#payment-cancel): idempotent on payment_id and on (provider,
-- provider_transaction_id); a replayed callback inserts nothing.
-- $1 payment, $2 order, $3 provider, $4 provider transaction, $5 amount, $6 paid at, $7 currency.
INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, status, paid_at, currency)
VALUES ($1, $2, $3, $4, $5, 'SUCCESS', $6, $7)
ON CONFLICT DO NOTHING;
