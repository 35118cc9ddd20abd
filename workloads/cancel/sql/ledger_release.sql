-- LedgerRelease: the stock movement of a cancellation, once per order.
-- $1 activity, $2 sku, $3 reservation, $4 order.
INSERT INTO inventory_ledger (activity_id, sku_id, idempotency_key, entry_type, delta_available, delta_occupied, reservation_id, order_id)
VALUES ($1, $2, 'RELEASE:' || $4::uuid::text, 'RELEASE', 1, -1, $3, $4)
ON CONFLICT (idempotency_key) DO NOTHING;
