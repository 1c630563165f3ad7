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
--- @include "platform/includes/server-time-ms"
--- @include "engines/locks/includes/lock-holders"
--- @include "engines/locks/includes/fencing"
local holdersKey = KEYS[1]
local fenceKey = KEYS[2]
local owner = ARGV[1]
local mode = ARGV[2]
local leaseMs = tonumber(ARGV[3])
local intentMs = tonumber(ARGV[4])
local fenceKeepMs = ARGV[5]
local callerWaits = ARGV[6] == '1'
local othersWait = ARGV[7] == '1'

-- The clock in µs too, for fencing tokens.
local nowMs, nowUs = serverTimeMsAndUs()

-- The common case first: nobody holds the lock and no writer waits (there is no hash).
if redis.call('EXISTS', holdersKey) == 0 then
  local token = nextFencingToken(fenceKey, fenceKeepMs, nowUs)
  local exp = nowMs + leaseMs
  redis.call('HSET', holdersKey, 'mode', mode, 'c:' .. owner, 1, 'e:' .. owner, exp, 't:' .. owner, token)
  if othersWait then redis.call('HSET', holdersKey, 'q', 1) end
  redis.call('PEXPIRE', holdersKey, leaseMs)
  return {1, token, exp, 1}
end

local live, maxExp, heldMode, ww = purgeExpired(holdersKey, nowMs)
local count = tonumber(redis.call('HGET', holdersKey, 'c:' .. owner) or '0')

local function grant(newCount, token, heldUntil)
  -- A reentrant hold never shortens the owner's lease.
  local exp = math.max(nowMs + leaseMs, heldUntil or 0)
  redis.call('HSET', holdersKey, 'c:' .. owner, newCount, 'e:' .. owner, exp, 't:' .. owner, token)
  if othersWait then redis.call('HSET', holdersKey, 'q', 1) end
  expireAt(holdersKey, math.max(maxExp, exp, ww), nowMs)
  return {1, token, exp, newCount}
end

if count > 0 then
  if heldMode == 'r' and mode == 'w' then return -3 end
  local held = redis.call('HMGET', holdersKey, 't:' .. owner, 'e:' .. owner)
  return grant(count + 1, held[1], tonumber(held[2]))
end

local writerWaiting = ww > nowMs
if live == 0 and (mode == 'w' or not writerWaiting) then
  redis.call('HSET', holdersKey, 'mode', mode)
  if mode == 'w' then
    redis.call('HDEL', holdersKey, 'ww')
    ww = 0
  end
  return grant(1, nextFencingToken(fenceKey, fenceKeepMs, nowUs))
end
if live > 0 and heldMode == 'r' and mode == 'r' and not writerWaiting then
  return grant(1, nextFencingToken(fenceKey, fenceKeepMs, nowUs))
end

-- Contended: the hash exists (a live holder or a waiting writer's mark is in it), so HSET keeps its TTL.
if callerWaits then redis.call('HSET', holdersKey, 'q', 1) end
if mode == 'w' and intentMs > 0 then
  ww = math.max(ww, nowMs + intentMs)
  redis.call('HSET', holdersKey, 'ww', ww)
  expireAt(holdersKey, math.max(maxExp, ww), nowMs)
end
if live == 0 then return {0, math.max(1, ww - nowMs)} end
return {0, math.max(1, maxExp - nowMs)}
