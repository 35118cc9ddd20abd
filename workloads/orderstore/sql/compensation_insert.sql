-- CompensationInsert: the durable compensation task of a rejected reservation.
-- $1 task, $2 reservation, $3 traceparent of the deciding step (NULL: untraced).
INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key, traceparent)
VALUES ($1, $2::uuid, 'RELEASE_REDIS_RESERVATION', 'RELEASE_REDIS_RESERVATION:' || $2::uuid::text, NULLIF($3::text, ''))
ON CONFLICT (idempotency_key) DO NOTHING;
