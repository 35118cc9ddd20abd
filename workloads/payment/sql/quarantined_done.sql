-- QuarantinedDone: a quarantined callback applied after all. $1 quarantine id.
UPDATE message_quarantine SET status = 'REPLAYED', resolved_at = clock_timestamp()
WHERE quarantine_id = $1 AND status = 'OPEN';
