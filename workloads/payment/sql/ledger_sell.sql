-- LedgerSell: the stock movement of a payment, once per order.
-- $1 activity, $2 sku, $3 reservation, $4 order.
INSERT INTO inventory_ledger (activity_id, sku_id, idempotency_key, entry_type, delta_occupied, delta_sold, reservation_id, order_id)
VALUES ($1, $2, 'SELL:' || $4::uuid::text, 'SELL', -1, 1, $3, $4)
ON CONFLICT (idempotency_key) DO NOTHING;
