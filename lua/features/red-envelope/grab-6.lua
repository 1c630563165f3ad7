--[[
  A user taps the rain: on their home sub-pool (a hash of the account), in one
  step, the user's record (a repeated tap returns the same envelope), the
  window on the Redis clock, then an envelope popped, recorded (the user's
  grabs, the envelope's state, the counters) and its grab added to the credit
  stream. "At most perUserLimit per user" holds across sub-pools: an envelope
  taken from another sub-pool (fall-over) is first claimed here, and recorded
  here once taken (confirm-2.lua), so the user's count is kept in one place.

  KEYS[1]  the pool list
  KEYS[2]  the grabs hash (account -> "envelopeId:amount:pool:ordinal[,…]")
  KEYS[3]  the claims hash (account -> 1 while a fall-over is under way)
  KEYS[4]  the envelopes' state hash
  KEYS[5]  the stats hash
  KEYS[6]  the credit stream
  ARGV[1]  account id
  ARGV[2]  1 when there are other sub-pools to fall over to, 0 when not

  Returns: {'GRABBED', envelopeId, amount} | {'ALREADY_GRABBED', envelopeId, amount} |
           {'CLAIMED', ordinal} (a fall-over for the user's ordinal-th envelope is under way) |
           {'FALL_OVER', ordinal} (claimed here; take the user's ordinal-th envelope elsewhere) |
           {'NONE_LEFT'} | {'NOT_STARTED'} | {'ENDED'} | {'NOT_LOADED'}

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/red-envelope/includes/red-envelope-pool"
local poolKey, grabsKey, claimsKey, envKey, statsKey, creditsKey = unpack(KEYS)
local account, canFallOver = ARGV[1], ARGV[2] == '1'

local held = redis.call('HGET', grabsKey, account)
local n = 0
if held then
  n = select(2, string.gsub(held, ',', ',')) + 1
  if n >= statNumber(statsKey, 'limit') then
    local envelopeId, amount = string.match(held, '^([^:]+):(%d+)')
    return {'ALREADY_GRABBED', envelopeId, tonumber(amount)}
  end
end
-- Only a rain of several sub-pools ever claims (below): with one, there is no claim to look for.
if canFallOver then
  local claimed = poolClaimOf(claimsKey, account)
  if claimed then return {'CLAIMED', tonumber(claimed)} end
end
local refusal, here = grabWindowRefusal(statsKey, serverTimeMs())
if refusal then return {refusal} end
local envelopeId, amount = popAndRecord(poolKey, grabsKey, envKey, statsKey, creditsKey, account, here, n + 1, held, here)
if envelopeId then return {'GRABBED', envelopeId, amount} end
if not canFallOver then return {'NONE_LEFT'} end
poolClaim(claimsKey, account, n + 1)
return {'FALL_OVER', n + 1}
