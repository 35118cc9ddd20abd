-- SKUState: per SKU of activity $1, its stock columns, the ledger's sums
-- (every stock movement writes one entry: OCCUPY, RELEASE, SELL) and the
-- orders that hold its units: open orders occupy a unit, paid ones sold it,
-- cancelled and refunded ones hold none.
SELECT i.sku_id, i.initial_stock, i.available_stock, i.occupied_stock, i.sold_stock,
       coalesce(l.occupied, 0)::bigint, coalesce(l.sold, 0)::bigint,
       coalesce(o.open, 0)::bigint, coalesce(o.paid, 0)::bigint, coalesce(o.valid, 0)::bigint
FROM sku_inventory AS i
LEFT JOIN (SELECT sku_id, sum(delta_occupied) AS occupied, sum(delta_sold) AS sold
           FROM inventory_ledger WHERE activity_id = $1 GROUP BY sku_id) AS l USING (sku_id)
LEFT JOIN (SELECT sku_id,
                  count(*) FILTER (WHERE status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')) AS open,
                  count(*) FILTER (WHERE status = 'PAID') AS paid,
                  count(*) FILTER (WHERE status NOT IN ('CANCELLED', 'REFUNDED')) AS valid
           FROM orders WHERE activity_id = $1 GROUP BY sku_id) AS o USING (sku_id)
WHERE i.activity_id = $1
ORDER BY i.sku_id;
