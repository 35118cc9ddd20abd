-- EvidenceRows: every PostgreSQL row of one reservation, by table, as JSON.
-- $1 reservation.
WITH r AS (SELECT * FROM inventory_reservation WHERE reservation_id = $1),
     o AS (SELECT * FROM orders WHERE reservation_id = $1),
     p AS (SELECT * FROM payment_record WHERE order_id IN (SELECT order_id FROM o)),
     e AS (SELECT * FROM event_outbox WHERE aggregate_id = $1 OR aggregate_id IN (SELECT order_id FROM o)),
     objects AS (
         SELECT $1::text AS id
         UNION SELECT order_id::text FROM o
         UNION SELECT payment_id::text FROM p
         UNION SELECT event_id::text FROM e)
SELECT json_build_object(
    'inventory_reservation', (SELECT row_to_json(r) FROM r),
    'reservation_freeze', (SELECT row_to_json(f) FROM reservation_freeze AS f WHERE f.reservation_id = $1),
    'orders', (SELECT COALESCE(json_agg(o), '[]') FROM o),
    'payment_record', (SELECT COALESCE(json_agg(p), '[]') FROM p),
    'consumer_inbox', (SELECT COALESCE(json_agg(i ORDER BY i.processed_at), '[]') FROM consumer_inbox AS i
                       WHERE i.reservation_id = $1 OR i.message_id IN (SELECT message_id FROM r)
                          OR i.message_id IN (SELECT event_id FROM e)),
    'inventory_ledger', (SELECT COALESCE(json_agg(l ORDER BY l.ledger_id), '[]') FROM inventory_ledger AS l
                         WHERE l.reservation_id = $1 OR l.order_id IN (SELECT order_id FROM o)),
    'event_outbox', (SELECT COALESCE(json_agg(e ORDER BY e.created_at), '[]') FROM e),
    'compensation_task', (SELECT COALESCE(json_agg(t), '[]') FROM compensation_task AS t WHERE t.reservation_id = $1),
    'message_quarantine', (SELECT COALESCE(json_agg(json_build_object('quarantine_id', q.quarantine_id,
                               'consumer_group', q.consumer_group, 'reason_code', q.reason_code, 'detail', q.detail,
                               'status', q.status, 'created_at', q.created_at)), '[]')
                           FROM message_quarantine AS q WHERE q.message_id IN (SELECT message_id FROM r)),
    'repair_task', (SELECT COALESCE(json_agg(json_build_object('repair_id', encode(t.repair_id, 'hex'),
                        'rule', t.rule_name, 'status', t.status, 'automatic', t.automatic, 'operator', t.operator,
                        'approver', t.approver, 'reason', t.reason, 'applied_via', t.applied_via,
                        'created_at', t.created_at, 'updated_at', t.updated_at) ORDER BY t.created_at), '[]')
                    FROM repair_task AS t WHERE t.object_id IN (SELECT id FROM objects)),
    'reconcile_anomaly', (SELECT COALESCE(json_agg(json_build_object('run_id', a.run_id, 'type', a.anomaly_type,
                              'severity', a.severity, 'created_at', a.created_at) ORDER BY a.created_at), '[]')
                          FROM reconcile_anomaly AS a WHERE a.object_id IN (SELECT id FROM objects)));
