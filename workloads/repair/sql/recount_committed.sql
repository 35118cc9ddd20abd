-- RecountCommitted: the units PostgreSQL holds for one bucket's orders
-- (occupied + sold, from the ledger every stock movement writes once) and
-- the SKU's ledger high-water mark: a recount holds only if the mark did not
-- move while it ran. $1 activity, $2 sku, $3 bucket.
SELECT COALESCE(sum(l.delta_occupied + l.delta_sold) FILTER (WHERE r.bucket = $3), 0)::bigint,
       COALESCE(max(l.ledger_id), 0)::bigint
FROM inventory_ledger AS l
LEFT JOIN inventory_reservation AS r ON r.reservation_id = l.reservation_id
WHERE l.activity_id = $1 AND l.sku_id = $2;
