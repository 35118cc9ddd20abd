-- OrderInsert: one valid order per (activity, sku, user), at its SKU's
-- price (set when the stock was provisioned). It waits for payment for the
-- window recorded in activity_control (`seckill activity window
-- -payment-window`, or the operator from spec.paymentWindow): the one
-- source of the window; $7 only for an activity that records none. $8 is
-- the traceparent of the consume span (design.md#traces; '' untraced).
INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, status, expires_at, amount_cents, currency,
                    traceparent)
SELECT $1::uuid, i.activity_id, i.sku_id, $4::bigint, $5::uuid, $6::uuid, 'CREATED',
       clock_timestamp() + coalesce((SELECT c.payment_window_ms * interval '1 millisecond'
                                     FROM activity_control c WHERE c.activity_id = i.activity_id), $7::interval),
       i.price_cents, i.currency, NULLIF($8::text, '')
FROM sku_inventory i WHERE i.activity_id = $2 AND i.sku_id = $3
ON CONFLICT (activity_id, sku_id, user_id) DO NOTHING
RETURNING order_id;
