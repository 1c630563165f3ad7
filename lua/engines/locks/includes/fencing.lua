-- Shared piece, inlined by the script loader: fencing tokens, issued by the lock
-- scripts and checked by any module's write script. See docs/locks.md,
-- "Fencing in your own write script".
--
-- A lock hands every new hold a token above every earlier one (LockHandle.fencingToken).
-- A write script that changes a record the lock guards keeps the highest token it
-- has written with in the record's hash (field `fence`) and refuses a lower one:
-- a holder whose lease ran out while it was paused cannot overwrite the work of
-- the holder after it. In a write script (the record's key comes in KEYS, the
-- token in ARGV, as decimal digits):
--
--   --- @include "engines/locks/includes/fencing"
--   if fenceRefuses(recordKey, token) then return {STALE, …} end   -- write nothing
--   redis.call('HSET', recordKey, 'balance', newBalance, fenceField(token))
--
-- fenceRefuses and fenceField need only the record's own key, so the check works on
-- Redis Cluster with the record under any hash tag.

--- @include "platform/includes/monotonic-counter"

--- The hash field a record keeps its highest written token in.
local FENCE_FIELD = 'fence'

--- true when `token` (a number) must not write `recordKey`: a write with a higher token has
--- happened (a newer holder of the lock has written); the script then answers its own "stale" case.
local function fenceRefuses(recordKey, token)
  return token < tonumber(redis.call('HGET', recordKey, FENCE_FIELD) or '0')
end

--- The HSET field and value that record `token` on the record, to add to the write itself.
local function fenceField(token)
  return FENCE_FIELD, string.format('%d', token)
end

--- (Lock scripts.) A new token above every earlier one, as a decimal string: the counter at
--- `fenceKey` plus one while it lives, and never below the Redis clock in µs (`nowUs`, from
--- serverTimeMsAndUs()), so a counter lost to expiry or a failover cannot hand out an old number
--- again. The counter is kept `keepMs` after its last use.
local function nextFencingToken(fenceKey, keepMs, nowUs)
  local _, token = nextCounterAtLeastClock(fenceKey, nil, keepMs, nowUs)
  return token
end
