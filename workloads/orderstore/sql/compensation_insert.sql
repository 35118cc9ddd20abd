-- CompensationInsert: the durable compensation task of a rejected reservation.
INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key)
VALUES ($1, $2::uuid, 'RELEASE_REDIS_RESERVATION', 'RELEASE_REDIS_RESERVATION:' || $2::uuid::text)
ON CONFLICT (idempotency_key) DO NOTHING;
