-- StockOccupyMany: a batch's final stock decrement for one SKU (design.md#order-transaction),
-- $3 units at once, never below zero; zero rows: fewer than $3 were left.
UPDATE sku_inventory
SET available_stock = available_stock - $3, occupied_stock = occupied_stock + $3,
    version = version + 1, updated_at = clock_timestamp()
WHERE activity_id = $1 AND sku_id = $2 AND available_stock >= $3
RETURNING available_stock;
