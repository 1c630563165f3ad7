-- Shared piece of the lua/features/red-envelope scripts, inlined by the script loader:
-- one sub-pool's stats hash and grab bookkeeping.
--
-- The stats hash holds the window (startsAt, endsAt, endedAt: epoch ms on the
-- Redis clock, endedAt 0 until the end), the per-user limit, the sub-pool's
-- index, expireAt, and the money counters, each a count and an amount:
--   loaded = left + grabbed + refunded;  grabbed = pending + credited + dead
-- An envelope's state (the env hash, by envelope id) is 'P|account|amount'
-- (pending), 'C|…' (credited) or 'D|…' (dead-lettered).
--- @include "engines/sharded-pool/includes/sharded-pool"

local function statNumber(statsKey, field)
  return tonumber(redis.call('HGET', statsKey, field) or '0')
end

--- The window on the Redis clock, and the sub-pool's index read with it (one HMGET): the refusal (nil while open,
--- else NOT_STARTED, ENDED or NOT_LOADED), then the index.
local function grabWindowRefusal(statsKey, now)
  local w = redis.call('HMGET', statsKey, 'startsAt', 'endsAt', 'endedAt', 'pool')
  if not w[1] then return 'NOT_LOADED' end
  return poolWindowRefusal(tonumber(w[1]), tonumber(w[2]), tonumber(w[3]), now), tonumber(w[4] or '0')
end

--- Moves `amount` (one envelope) from one counter pair to another.
local function moveCounters(statsKey, from, to, amount)
  if from ~= '' then
    redis.call('HINCRBY', statsKey, from .. 'Count', -1)
    redis.call('HINCRBY', statsKey, from .. 'Amount', -amount)
  end
  redis.call('HINCRBY', statsKey, to .. 'Count', 1)
  redis.call('HINCRBY', statsKey, to .. 'Amount', amount)
end

--- Pops one envelope for `account` and records it: the account's grabs (entries "envelopeId:amount:pool:ordinal",
--- the ordinal being which of the user's envelopes it is, 1 for the first), the envelope's state, the counters, and
--- the grab on the credit stream, in one step. `held` is the account's grabs field as the caller read it in this
--- script (nil for none), `here` this sub-pool's index (grabWindowRefusal's second value).
--- Returns envelopeId, amount, or nil when the pool is empty.
local function popAndRecord(poolKey, grabsKey, envKey, statsKey, creditsKey, account, home, ordinal, held, here)
  local item = redis.call('RPOP', poolKey)
  if not item then return nil end
  local sep = string.find(item, ':', 1, true)
  local envelopeId = string.sub(item, 1, sep - 1)
  local amount = tonumber(string.sub(item, sep + 1))
  local entry = envelopeId .. ':' .. amount .. ':' .. here .. ':' .. ordinal
  redis.call('HSET', grabsKey, account, held and (held .. ',' .. entry) or entry)
  redis.call('HSET', envKey, envelopeId, 'P|' .. account .. '|' .. amount)
  redis.call('HINCRBY', statsKey, 'leftCount', -1)
  redis.call('HINCRBY', statsKey, 'leftAmount', -amount)
  moveCounters(statsKey, '', 'grabbed', amount)
  moveCounters(statsKey, '', 'pending', amount)
  redis.call('XADD', creditsKey, '*', 'envelopeId', envelopeId, 'account', account, 'amount', amount, 'pool', here, 'home', home)
  return envelopeId, amount
end
