-- Shared piece, inlined by the script loader: a counter that only goes up and never stands
-- below the Redis clock in microseconds. A counter lost to expiry, a flush or a failover to a
-- replica that missed recent writes therefore never hands out a number it handed out before.
--
-- nextCounterAtLeastClock(counterKey, field, ttlMs, clockUs) -> value (number), value (decimal string)
--   counterKey  where the counter lives: a string key, or a hash when `field` is given
--   field       the hash field holding the counter; nil for a string key
--   ttlMs       string key only: keep the counter this long after its last use; nil keeps it for good
--   clockUs     the Redis clock in microseconds as the caller read it (a script that already called
--               TIME passes it, so one script step sees one clock); nil reads TIME here
-- The value is max(previous + 1, clockUs); values stay below 2^53, so both forms are exact.
--
-- reserveCounterRun(counterKey, field, ttlMs, clockUs, n) -> first value (number)
--   takes n values at once, first .. first + n - 1 (n >= 1): the values n calls of
--   nextCounterAtLeastClock with the same clockUs would hand out, in two commands.
local function reserveCounterRun(counterKey, field, ttlMs, clockUs, n)
  if not clockUs then
    local t = redis.call('TIME')
    clockUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  local previous
  if field then
    previous = redis.call('HGET', counterKey, field)
  else
    previous = redis.call('GET', counterKey)
  end
  local value = math.max((tonumber(previous) or 0) + 1, clockUs)
  local text = string.format('%.0f', value + n - 1)
  if field then
    redis.call('HSET', counterKey, field, text)
  elseif ttlMs then
    redis.call('SET', counterKey, text, 'PX', ttlMs)
  else
    redis.call('SET', counterKey, text)
  end
  return value
end

local function nextCounterAtLeastClock(counterKey, field, ttlMs, clockUs)
  local value = reserveCounterRun(counterKey, field, ttlMs, clockUs, 1)
  return value, string.format('%.0f', value)
end
