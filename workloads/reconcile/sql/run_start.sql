-- RunStart: one running reconcile per activity (uq_reconcile_run_active):
-- a second run at once fails here and repairs nothing.
-- $1 run id, $2 activity, $3 watermark.
INSERT INTO reconcile_run (run_id, activity_id, watermark) VALUES ($1, $2, $3);
