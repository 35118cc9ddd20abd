-- StockOccupy: the final, conditional stock decrement (design.md#order-transaction).
-- Zero rows: PostgreSQL stock is exhausted (or the SKU is not provisioned).
UPDATE sku_inventory
SET available_stock = available_stock - 1, occupied_stock = occupied_stock + 1,
    version = version + 1, updated_at = clock_timestamp()
WHERE activity_id = $1 AND sku_id = $2 AND available_stock > 0
RETURNING available_stock;
