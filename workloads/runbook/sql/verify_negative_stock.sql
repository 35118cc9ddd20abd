-- VerifyNegativeStock (seed §11.6 step 6): PostgreSQL stock never negative,
-- and every SKU conserves it (seed §13.4). $1 activity (0: all).
SELECT activity_id, sku_id, initial_stock, available_stock, occupied_stock, sold_stock
FROM sku_inventory
WHERE ($1::bigint = 0 OR activity_id = $1)
  AND (available_stock < 0 OR occupied_stock < 0 OR sold_stock < 0
       OR initial_stock <> available_stock + occupied_stock + sold_stock);
