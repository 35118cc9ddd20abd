-- provision.lua — set a bucket's stock to the manifest's target, once per
-- generation. Stock only grows: the increase is added to available and initial.
--
-- KEYS[1] available stock    seckill:{T}:stock
-- KEYS[2] counters hash      seckill:{T}:counter
--
-- ARGV[1] target_initial     ARGV[2] generation (> 0)
--
-- Returns {code, reason, initial}
--   1  APPLIED               available += target - initial, initial = target
--   2  ALREADY_APPLIED       this or a newer generation was applied; nothing changed
--  -1  STOCK_DECREASE_REFUSED
--  -2  INVALID_ARGUMENT

local target = tonumber(ARGV[1])
local gen = tonumber(ARGV[2])
if not target or target < 0 or not gen or gen <= 0 then
    return {-2, 'INVALID_ARGUMENT', 0}
end
local applied = tonumber(redis.call('HGET', KEYS[2], 'generation') or '0')
local initial = tonumber(redis.call('HGET', KEYS[2], 'initial') or '0')
if gen <= applied then
    return {2, 'ALREADY_APPLIED', initial}
end
if target < initial then
    return {-1, 'STOCK_DECREASE_REFUSED', initial}
end
redis.call('INCRBY', KEYS[1], target - initial)
redis.call('HSET', KEYS[2], 'initial', target, 'generation', gen)
redis.call('HSETNX', KEYS[2], 'open_reserved', 0)
redis.call('HSETNX', KEYS[2], 'committed', 0)
return {1, 'APPLIED', target}
