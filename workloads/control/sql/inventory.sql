-- Inventory: a SKU's PostgreSQL stock columns (zero row: not provisioned).
-- $1 activity, $2 sku.
SELECT initial_stock, available_stock, occupied_stock, sold_stock
FROM sku_inventory
WHERE activity_id = $1 AND sku_id = $2;
