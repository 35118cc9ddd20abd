-- move_in.lua — second half of a stock move (see move_out.lua): add the
-- moved units to this (destination) bucket, once per move id. The applied
-- ids are kept (one field per move), so a settle pass that races the mover,
-- or runs again after a crash, adds nothing twice.
--
-- KEYS[1] available stock    seckill:{T}:stock
-- KEYS[2] counters hash      seckill:{T}:counter      moved_in += amount
-- KEYS[3] applied moves      seckill:{T}:moves_in     move_id -> amount
--
-- ARGV[1] move_id            ARGV[2] amount (>= 1)
--
-- Returns {code, reason}
--   1  MOVED_IN            available += amount, moved_in += amount
--   2  ALREADY_MOVED_IN    applied before; nothing changed
--  -2  INVALID_ARGUMENT
--  -4  NOT_PROVISIONED     the destination has no stock key: the move stays pending

local amount = tonumber(ARGV[2])
if ARGV[1] == '' or not amount or amount < 1 then
    return {-2, 'INVALID_ARGUMENT'}
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then
    return {2, 'ALREADY_MOVED_IN'}
end
if not redis.call('GET', KEYS[1]) then
    return {-4, 'NOT_PROVISIONED'}
end
redis.call('INCRBY', KEYS[1], amount)
redis.call('HINCRBY', KEYS[2], 'moved_in', amount)
redis.call('HSET', KEYS[3], ARGV[1], amount)
return {1, 'MOVED_IN'}
