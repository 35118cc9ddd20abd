-- VerifyPaidCancelled: no CANCELLED order keeps a successful payment (a
-- paid-after-cancel is REFUNDING or REFUNDED). $1 activity (0: all).
SELECT o.order_id, p.payment_id
FROM orders AS o JOIN payment_record AS p ON p.order_id = o.order_id
WHERE ($1::bigint = 0 OR o.activity_id = $1) AND o.status = 'CANCELLED' AND p.status = 'SUCCESS';
