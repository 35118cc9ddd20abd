-- VerifySold: sold stock equals the orders that were paid and kept (PAID),
-- per SKU. $1 activity (0: all).
SELECT i.activity_id, i.sku_id, i.sold_stock, count(o.order_id) FILTER (WHERE o.status = 'PAID')
FROM sku_inventory AS i
LEFT JOIN orders AS o ON o.activity_id = i.activity_id AND o.sku_id = i.sku_id
WHERE ($1::bigint = 0 OR i.activity_id = $1)
GROUP BY i.activity_id, i.sku_id, i.sold_stock
HAVING i.sold_stock <> count(o.order_id) FILTER (WHERE o.status = 'PAID');
