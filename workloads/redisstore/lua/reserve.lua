-- reserve.lua — Redis pre-reservation (design.md#send), one atomic step.
--
-- KEYS[1] window flag        seckill:{T}:window       NOT_STARTED | ACTIVE | PAUSED | ENDED
-- KEYS[2] available stock    seckill:{T}:stock
-- KEYS[3] counters hash      seckill:{T}:counter      initial, open_reserved, committed
-- KEYS[4] request mapping    seckill:{T}:request:{user_id}:{request_id}
-- KEYS[5] user mark          seckill:{T}:user:{user_id}
-- KEYS[6] reservation hash   seckill:{T}:reservation:{reservation_id}
-- KEYS[7] send_due zset      seckill:{T}:send_due
-- KEYS[8] open zset          seckill:{T}:open         reservation_id -> reserved_at_ms, until PostgreSQL decides
-- KEYS[9] user's rate counter seckill:{T}:rate:{user_id}  requests in the current window
--
-- ARGV[1] reservation_id     ARGV[2] message_id       ARGV[3] request_id
-- ARGV[4] activity_id        ARGV[5] sku_id           ARGV[6] user_id
-- ARGV[7] bucket             ARGV[8] now_ms           ARGV[9] business_deadline_ms
-- ARGV[10] send_due_ms       (first scanner attempt: the gateway sends at once and acks)
-- ARGV[11] request_ttl_ms    (covers the client's retry window)
-- ARGV[12] schema_version    ARGV[13] key_version     ARGV[14] trace_id
-- ARGV[15] user_limit        (requests per window and user, every gateway replica together; 0: none)
-- ARGV[16] user_window_ms
-- ARGV[17] span_id           (with trace_id, the reserve span: the scanner's resend joins its trace)
--
-- Returns {code, reason, reservation_id, status}
--   1  RESERVED                 stock -1, open_reserved +1, reservation + send_due + mappings written
--   2  REPLAYED                 the request was seen before: its original reservation, nothing written
--  -1  SOLD_OUT                 nothing written
--  -2  ALREADY_PURCHASED        the user holds a reservation of this SKU (its id is returned)
--  -3  ACTIVITY_NOT_STARTED | ACTIVITY_PAUSED | ACTIVITY_ENDED | ACTIVITY_NOT_PROVISIONED
--  -4  STOCK_NOT_PROVISIONED    the stock key is missing: never treated as sold out or as stock
--  -5  RATE_LIMITED             the user sent more than user_limit requests in the window: only
--                               the counter moved
--
-- The user's limit is checked first, replays included: a client hammering the
-- same request is limited too. A replay is answered before the window check:
-- it reports a fact that already exists and writes nothing; the window gates
-- only new effects.

local limit = tonumber(ARGV[15]) or 0
if limit > 0 then
    local n = redis.call('INCR', KEYS[9])
    if n == 1 then
        redis.call('PEXPIRE', KEYS[9], tonumber(ARGV[16]))
    end
    if n > limit then
        return {-5, 'RATE_LIMITED', '', ''}
    end
end

local existing = redis.call('GET', KEYS[4])
if existing then
    -- The mapping may name a reservation derived under an older key version;
    -- its status is read only when it is the reservation of KEYS[6].
    local st = ''
    if existing == ARGV[1] then
        st = redis.call('HGET', KEYS[6], 'status') or ''
    end
    return {2, 'REPLAYED', existing, st}
end

local window = redis.call('GET', KEYS[1])
if window ~= 'ACTIVE' then
    if window == 'NOT_STARTED' then return {-3, 'ACTIVITY_NOT_STARTED', '', ''} end
    if window == 'PAUSED' then return {-3, 'ACTIVITY_PAUSED', '', ''} end
    if window == 'ENDED' then return {-3, 'ACTIVITY_ENDED', '', ''} end
    return {-3, 'ACTIVITY_NOT_PROVISIONED', '', ''}
end

local holder = redis.call('GET', KEYS[5])
if holder then
    return {-2, 'ALREADY_PURCHASED', holder, ''}
end

local stock = redis.call('GET', KEYS[2])
if not stock then
    return {-4, 'STOCK_NOT_PROVISIONED', '', ''}
end
if tonumber(stock) <= 0 then
    return {-1, 'SOLD_OUT', '', ''}
end

redis.call('DECR', KEYS[2])
redis.call('HINCRBY', KEYS[3], 'open_reserved', 1)
redis.call('ZADD', KEYS[8], tonumber(ARGV[8]), ARGV[1])
redis.call('HSET', KEYS[6],
    'status', 'RESERVED',
    'mq_state', 'PENDING',
    'reservation_id', ARGV[1],
    'message_id', ARGV[2],
    'request_id', ARGV[3],
    'activity_id', ARGV[4],
    'sku_id', ARGV[5],
    'user_id', ARGV[6],
    'bucket', ARGV[7],
    'schema_version', ARGV[12],
    'key_version', ARGV[13],
    'trace_id', ARGV[14],
    'span_id', ARGV[17] or '',
    'reserved_at_ms', ARGV[8],
    'business_deadline_ms', ARGV[9],
    'send_attempts', 0,
    'last_error', '')
-- No TTL: a non-terminal reservation never disappears by expiry (design.md#redis-keys).
redis.call('ZADD', KEYS[7], tonumber(ARGV[10]), ARGV[1])
redis.call('SET', KEYS[4], ARGV[1], 'PX', tonumber(ARGV[11]))
redis.call('SET', KEYS[5], ARGV[1])
return {1, 'RESERVED', ARGV[1], 'RESERVED'}
