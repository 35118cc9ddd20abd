-- PaymentsAfterCancel: successful payments of cancelled orders, recorded
-- before the watermark: a refunding one is the paid-after-cancel business
-- decision (refund or fulfil), a SUCCESS one on a CANCELLED order escaped
-- the refund flow. $1 activity, $2 watermark.
SELECT p.payment_id, p.order_id, p.provider, p.provider_transaction_id, p.amount_cents, p.status, o.status
FROM payment_record AS p
JOIN orders AS o ON o.order_id = p.order_id
WHERE o.activity_id = $1 AND p.updated_at < $2
  AND ((p.status = 'SUCCESS' AND o.status = 'CANCELLED') OR (p.status = 'REFUNDING' AND o.status = 'REFUNDING'));
