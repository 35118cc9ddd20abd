-- VerifyDuplicateOrders (seed §11.6 step 6): no user holds two valid
-- orders of one SKU. $1 activity (0: all).
SELECT activity_id, sku_id, user_id, count(*)
FROM orders
WHERE ($1::bigint = 0 OR activity_id = $1) AND status NOT IN ('CANCELLED', 'REFUNDED')
GROUP BY activity_id, sku_id, user_id
HAVING count(*) > 1;
