-- StockLock: a batch locks its SKU's row and reads the units left, just
-- before taking them (StockOccupyMany), so the hot row is held only for
-- the batch's last round trips and its commit.
SELECT available_stock
FROM sku_inventory
WHERE activity_id = $1 AND sku_id = $2
FOR UPDATE;
