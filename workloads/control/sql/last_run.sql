-- LastRun: the activity's latest finished reconcile run. $1 activity.
SELECT run_id::text, status, finished_at, anomalies_found, auto_repaired, manual_required
FROM reconcile_run
WHERE activity_id = $1 AND finished_at IS NOT NULL
ORDER BY finished_at DESC
LIMIT 1;
