-- Pending: the work of activity $1 still open from before $2 (the bound a
-- step must finish within; now() when the sale must have settled), and what
-- waits for a person.
SELECT
  -- accepted reservations not terminal (ORDER_CREATED, COMPENSATED, CANCELLED, MANUAL_REVIEW)
  (SELECT count(*) FROM inventory_reservation
   WHERE activity_id = $1 AND status IN ('RESERVED', 'ORDER_REJECTED', 'COMPENSATING') AND created_at < $2)::bigint,
  (SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status = 'MANUAL_REVIEW')::bigint,
  -- outbox events not sent
  (SELECT count(*) FROM event_outbox
   WHERE payload->>'activity_id' = $1::bigint::text AND status <> 'SENT' AND created_at < $2)::bigint,
  (SELECT count(*) FROM event_outbox WHERE payload->>'activity_id' = $1::bigint::text AND status = 'MANUAL')::bigint,
  -- compensation tasks not applied
  (SELECT count(*) FROM compensation_task AS t JOIN inventory_reservation AS r USING (reservation_id)
   WHERE r.activity_id = $1 AND t.status NOT IN ('APPLIED', 'VERIFIED') AND t.created_at < $2)::bigint,
  (SELECT count(*) FROM compensation_task AS t JOIN inventory_reservation AS r USING (reservation_id)
   WHERE r.activity_id = $1 AND t.status = 'MANUAL')::bigint,
  -- repair tasks not applied or rejected
  (SELECT count(*) FROM repair_task WHERE activity_id = $1 AND status = 'PENDING' AND created_at < $2)::bigint,
  (SELECT count(*) FROM repair_task WHERE activity_id = $1 AND status = 'MANUAL')::bigint,
  -- quarantined messages of the activity, open or resolved
  (SELECT count(*) FROM message_quarantine AS q
   WHERE q.message_id IN (SELECT message_id FROM inventory_reservation WHERE activity_id = $1)
      OR q.payload LIKE convert_to('%"activity_id":' || $1::bigint::text || ',%', 'UTF8')
      OR q.payload LIKE convert_to('%"activity_id":' || $1::bigint::text || '}%', 'UTF8'))::bigint;
