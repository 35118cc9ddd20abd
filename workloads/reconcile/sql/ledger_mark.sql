-- LedgerMark: the SKU's ledger high-water mark, the version of a recount
-- repair (a new difference after more stock movements is a new task).
-- $1 activity, $2 sku.
SELECT COALESCE(max(ledger_id), 0)::bigint FROM inventory_ledger WHERE activity_id = $1 AND sku_id = $2;
