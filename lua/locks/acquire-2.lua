--[[
  Takes a hold on a lock for an owner: a new hold, a reentrant one (the owner
  already holds it: its count goes up and it keeps its fencing token), or a
  shared read hold next to other readers. A waiting writer's mark (ww) keeps
  new readers out until it has had its turn, so writers are not starved.

  KEYS[1]  lock hash (mode, ww, c:/e:/t:<owner>)
  KEYS[2]  fencing counter (string; outlives the hash by ARGV[5] ms)
  ARGV[1]  owner token
  ARGV[2]  mode: 'w' (exclusive) or 'r' (shared)
  ARGV[3]  lease, ms
  ARGV[4]  for a writer that does not get the lock: how long to keep readers out while it waits, ms (0: not waiting)
  ARGV[5]  how long the fencing counter is kept after its last use, ms

  Returns: {1, fencingToken, leaseEndMs, holdCount} when held;
           {0, msUntilItMayBeFree} when another owner holds it;
           -3 (CONFLICT) when a reader asks to upgrade to writer (it would wait on itself)
]]
--- @include "includes/lock-holders"
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
local owner, mode, lease, intent = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

local live, maxExp, heldMode, ww = purgeExpired(nowMs)
local count = tonumber(redis.call('HGET', KEYS[1], 'c:' .. owner) or '0')

local function grant(newCount, token, heldUntil)
  -- A reentrant hold never shortens the owner's lease.
  local exp = math.max(nowMs + lease, heldUntil or 0)
  redis.call('HSET', KEYS[1], 'c:' .. owner, newCount, 'e:' .. owner, exp, 't:' .. owner, string.format('%.0f', token))
  expireAt(math.max(maxExp, exp, ww), nowMs)
  return {1, token, exp, newCount}
end

-- A token above every earlier one: the counter while it lives, and never below the clock in µs,
-- so a counter lost to expiry or a failover cannot hand out an old number again.
local function newToken()
  local token = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, nowUs)
  redis.call('SET', KEYS[2], string.format('%.0f', token), 'PX', tonumber(ARGV[5]))
  return token
end

if count > 0 then
  if heldMode == 'r' and mode == 'w' then return -3 end
  local held = redis.call('HMGET', KEYS[1], 't:' .. owner, 'e:' .. owner)
  return grant(count + 1, tonumber(held[1]), tonumber(held[2]))
end

local writerWaiting = ww > nowMs
if live == 0 and (mode == 'w' or not writerWaiting) then
  redis.call('HSET', KEYS[1], 'mode', mode)
  if mode == 'w' then
    redis.call('HDEL', KEYS[1], 'ww')
    ww = 0
  end
  return grant(1, newToken())
end
if live > 0 and heldMode == 'r' and mode == 'r' and not writerWaiting then
  return grant(1, newToken())
end

if mode == 'w' and intent > 0 then
  ww = math.max(ww, nowMs + intent)
  redis.call('HSET', KEYS[1], 'ww', ww)
  expireAt(math.max(maxExp, ww), nowMs)
end
if live == 0 then return {0, math.max(1, ww - nowMs)} end
return {0, math.max(1, maxExp - nowMs)}
