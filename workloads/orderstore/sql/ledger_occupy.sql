-- LedgerOccupy: the stock movement, once per reservation.
INSERT INTO inventory_ledger (activity_id, sku_id, idempotency_key, entry_type, delta_available, delta_occupied, reservation_id, order_id)
VALUES ($1, $2, 'OCCUPY:' || $3::uuid::text, 'OCCUPY', -1, 1, $3::uuid, $4)
ON CONFLICT (idempotency_key) DO NOTHING;
