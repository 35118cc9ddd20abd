-- recount.lua — the activity-level stock calibration of design.md#faults, design.md#runbook
-- for one bucket: after Redis lost writes (a failover, a wrong TTL, a
-- deletion) single reservations cannot be judged one by one, so the
-- bucket's counters are set from the authorities instead of adding one per
-- missing key:
--   committed     = PostgreSQL's occupied + sold of the bucket's orders (ARGV[1])
--   open_reserved = the reservations Redis still holds open (ZCARD open)
--   available     = initial + moved_in - moved_out - open_reserved - committed
--                   (moves between buckets are kept: see move_out.lua)
-- Setting, never incrementing: running it twice gives the same counters.
-- The caller makes sure no projection or release is pending and that
-- PostgreSQL did not move while it ran.
--
-- KEYS[1] available stock    seckill:{T}:stock
-- KEYS[2] counters hash      seckill:{T}:counter
-- KEYS[3] open zset          seckill:{T}:open
--
-- ARGV[1] committed (PostgreSQL, >= 0)   ARGV[2] now_ms
--
-- Returns {code, reason, available_before, open_before, committed_before,
--          available_after, open_after, committed_after, initial, moved_in, moved_out}
--   1  RECOUNTED             the counters were set
--   2  UNCHANGED             they already agreed; nothing written
--  -1  NOT_PROVISIONED       no counters: nothing to calibrate
--  -2  OVERSUBSCRIBED        held < open + committed: a person decides; nothing changed
--  -3  INVALID_ARGUMENT

local committed = tonumber(ARGV[1])
if not committed or committed < 0 then
    return {-3, 'INVALID_ARGUMENT', 0, 0, 0, 0, 0, 0, 0, 0, 0}
end
local initial = tonumber(redis.call('HGET', KEYS[2], 'initial') or '')
if not initial then
    return {-1, 'NOT_PROVISIONED', 0, 0, 0, 0, 0, 0, 0, 0, 0}
end
local moved_in = tonumber(redis.call('HGET', KEYS[2], 'moved_in') or '0')
local moved_out = tonumber(redis.call('HGET', KEYS[2], 'moved_out') or '0')
local held = initial + moved_in - moved_out  -- the units this bucket answers for
local avail0 = tonumber(redis.call('GET', KEYS[1]) or '0')
local open0 = tonumber(redis.call('HGET', KEYS[2], 'open_reserved') or '0')
local comm0 = tonumber(redis.call('HGET', KEYS[2], 'committed') or '0')
local open = redis.call('ZCARD', KEYS[3])
local avail = held - open - committed
if avail < 0 then
    return {-2, 'OVERSUBSCRIBED', avail0, open0, comm0, avail0, open0, comm0, initial, moved_in, moved_out}
end
if avail == avail0 and open == open0 and committed == comm0 then
    return {2, 'UNCHANGED', avail0, open0, comm0, avail, open, committed, initial, moved_in, moved_out}
end
redis.call('SET', KEYS[1], avail)
redis.call('HSET', KEYS[2], 'open_reserved', open, 'committed', committed, 'recounted_at_ms', ARGV[2])
return {1, 'RECOUNTED', avail0, open0, comm0, avail, open, committed, initial, moved_in, moved_out}
