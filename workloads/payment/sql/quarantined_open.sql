-- QuarantinedOpen: payment callbacks kept because their order was unknown,
-- oldest first, to be looked up again. $1 limit.
SELECT quarantine_id, topic, payload
FROM message_quarantine
WHERE consumer_group = 'payment-callback' AND reason_code = 'UNKNOWN_ORDER' AND status = 'OPEN'
ORDER BY created_at
LIMIT $1;
