-- OrderWithdraw: an order inserted before its unit was taken (the order
-- transaction inserts the order, then takes the stock, on every path) whose
-- unit did not come (the SKU ran out) is removed in the same transaction;
-- no one else ever saw it.
DELETE FROM orders
WHERE order_id = $1 AND status = 'CREATED';
