-- OrderWithdraw: in a batch, an order inserted before the stock was taken
-- whose unit did not come (the SKU ran out within the batch) is removed in
-- the same transaction; no one else ever saw it.
DELETE FROM orders
WHERE order_id = $1 AND status = 'CREATED';
