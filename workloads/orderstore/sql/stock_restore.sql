-- StockRestore: undo StockOccupy inside the same transaction when the order
-- insert hits the one-per-user constraint.
UPDATE sku_inventory
SET available_stock = available_stock + 1, occupied_stock = occupied_stock - 1,
    version = version + 1, updated_at = clock_timestamp()
WHERE activity_id = $1 AND sku_id = $2 AND occupied_stock > 0;
