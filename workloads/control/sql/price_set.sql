-- PriceSet: the SKU's price, copied into each order created from then on
-- (migration 00005). $1 activity, $2 sku, $3 price in cents, $4 currency.
SELECT seckill_set_price($1, $2, $3, $4);
