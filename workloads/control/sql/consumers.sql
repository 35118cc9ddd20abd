-- Consumers: the order consumers' recent heartbeats (design.md#backlog step 2):
-- how many are alive, their summed commit rate, their median and worst
-- commit latency. $1 activity, $2 freshness window.
SELECT count(*),
       COALESCE(sum(commit_rate_per_sec), 0)::float8,
       COALESCE(percentile_cont(0.5) WITHIN GROUP (ORDER BY commit_p50_ms), 0)::float8,
       COALESCE(max(commit_p99_ms), 0)::float8
FROM consumer_heartbeat
WHERE workload = 'order-consumer'
  AND (activity_id = $1 OR activity_id IS NULL OR activity_id = 0)
  AND reported_at > clock_timestamp() - $2::interval;
