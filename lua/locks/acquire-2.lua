--[[
  Takes a hold on a lock for an owner: a new hold, a reentrant one (the owner
  already holds it: its count goes up and it keeps its fencing token), or a
  shared read hold next to other readers. A waiting writer's mark (ww) keeps
  new readers out until it has had its turn, so writers are not starved. A
  caller that will wait for the lock leaves the waiter mark (q), so that the
  release publishes; with nobody waiting it does not.

  KEYS[1]  lock hash (mode, ww, q, c:/e:/t:<owner>)
  KEYS[2]  fencing counter (string; outlives the hash by ARGV[5] ms)
  ARGV[1]  owner token
  ARGV[2]  mode: 'w' (exclusive) or 'r' (shared)
  ARGV[3]  lease, ms
  ARGV[4]  for a writer that does not get the lock: how long to keep readers out while it waits, ms (0: not waiting)
  ARGV[5]  how long the fencing counter is kept after its last use, ms
  ARGV[6]  '1': the caller waits if it does not get the lock (mark the lock so its release is published); '0': it does not
  ARGV[7]  '1': other callers in the caller's process wait for the lock (asleep until a release message wakes one): mark it even when this caller gets it

  Returns: {1, fencingToken (decimal string), leaseEndMs, holdCount} when held;
           {0, msUntilItMayBeFree} when another owner holds it;
           -3 (CONFLICT) when a reader asks to upgrade to writer (it would wait on itself)
]]
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The clock in µs, as a number and as the exact decimal string (tokens go past 2^31: no %g rounding).
local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowUsText = t[1] .. string.sub('00000' .. t[2], -6)
local owner, mode, lease, intent = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

-- A token above every earlier one (a decimal string): the counter while it lives, and never below
-- the clock in µs, so a counter lost to expiry or a failover cannot hand out an old number again.
local function newToken()
  local previous = redis.call('SET', KEYS[2], nowUsText, 'PX', ARGV[5], 'GET')
  if previous and tonumber(previous) >= nowUs then
    local token = string.format('%.0f', tonumber(previous) + 1)
    redis.call('SET', KEYS[2], token, 'PX', ARGV[5])
    return token
  end
  return nowUsText
end

-- The common case first: nobody holds the lock and no writer waits (there is no hash).
if redis.call('EXISTS', KEYS[1]) == 0 then
  local token = newToken()
  local exp = nowMs + lease
  redis.call('HSET', KEYS[1], 'mode', mode, 'c:' .. owner, 1, 'e:' .. owner, exp, 't:' .. owner, token)
  if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'q', 1) end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, token, exp, 1}
end

--- @include "includes/lock-holders"
local live, maxExp, heldMode, ww = purgeExpired(nowMs)
local count = tonumber(redis.call('HGET', KEYS[1], 'c:' .. owner) or '0')

local function grant(newCount, token, heldUntil)
  -- A reentrant hold never shortens the owner's lease.
  local exp = math.max(nowMs + lease, heldUntil or 0)
  redis.call('HSET', KEYS[1], 'c:' .. owner, newCount, 'e:' .. owner, exp, 't:' .. owner, token)
  if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'q', 1) end
  expireAt(math.max(maxExp, exp, ww), nowMs)
  return {1, token, exp, newCount}
end

if count > 0 then
  if heldMode == 'r' and mode == 'w' then return -3 end
  local held = redis.call('HMGET', KEYS[1], 't:' .. owner, 'e:' .. owner)
  return grant(count + 1, held[1], tonumber(held[2]))
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

-- Contended: the hash exists (a live holder or a waiting writer's mark is in it), so HSET keeps its TTL.
if ARGV[6] == '1' then redis.call('HSET', KEYS[1], 'q', 1) end
if mode == 'w' and intent > 0 then
  ww = math.max(ww, nowMs + intent)
  redis.call('HSET', KEYS[1], 'ww', ww)
  expireAt(math.max(maxExp, ww), nowMs)
end
if live == 0 then return {0, math.max(1, ww - nowMs)} end
return {0, math.max(1, maxExp - nowMs)}
