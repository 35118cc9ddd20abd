-- HeartbeatUpsert: a consumer's measured commit rate and latency, read by the
-- operator to size the consumers against PostgreSQL's capacity (design.md#backlog).
INSERT INTO consumer_heartbeat (consumer_id, workload, activity_id, commits_total, commit_rate_per_sec, commit_p50_ms, commit_p99_ms, in_flight, reported_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, clock_timestamp())
ON CONFLICT (consumer_id) DO UPDATE
SET commits_total = EXCLUDED.commits_total, commit_rate_per_sec = EXCLUDED.commit_rate_per_sec,
    commit_p50_ms = EXCLUDED.commit_p50_ms, commit_p99_ms = EXCLUDED.commit_p99_ms,
    in_flight = EXCLUDED.in_flight, reported_at = EXCLUDED.reported_at;
