-- RunFinish: close the run with its counts. $1 run id, $2 status,
-- $3 anomalies, $4 auto repaired, $5 manual, $6 summary.
UPDATE reconcile_run
SET status = $2, finished_at = clock_timestamp(), anomalies_found = $3,
    auto_repaired = $4, manual_required = $5, summary = $6
WHERE run_id = $1 AND status = 'RUNNING';
