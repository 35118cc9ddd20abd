-- RunsSince: the activity's reconcile runs finished after $2 (oldest
-- first), each with its duration and, per anomaly type, how many it found,
-- how many of those its own automatic repairs fixed and how many went to a
-- person. $1 activity, $2 after.
SELECT r.run_id::text, r.finished_at,
       extract(epoch FROM r.finished_at - r.started_at)::float8,
       COALESCE(a.anomaly_type, ''),
       count(a.anomaly_id),
       count(a.anomaly_id) FILTER (WHERE t.automatic AND t.status = 'APPLIED' AND t.applied_at BETWEEN r.started_at AND r.finished_at),
       count(a.anomaly_id) FILTER (WHERE t.status = 'MANUAL')
FROM reconcile_run AS r
LEFT JOIN reconcile_anomaly AS a ON a.run_id = r.run_id
LEFT JOIN repair_task AS t ON t.repair_id = a.repair_id
WHERE r.activity_id = $1 AND r.finished_at > $2
GROUP BY r.run_id, r.finished_at, r.started_at, a.anomaly_type
ORDER BY r.finished_at, a.anomaly_type;
