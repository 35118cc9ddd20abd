-- StockRelease: the cancelled order's unit is sellable again. $1 activity, $2 sku.
UPDATE sku_inventory
SET occupied_stock = occupied_stock - 1, available_stock = available_stock + 1,
    version = version + 1, updated_at = clock_timestamp()
WHERE activity_id = $1 AND sku_id = $2 AND occupied_stock > 0;
