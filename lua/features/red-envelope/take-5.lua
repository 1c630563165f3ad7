--[[
  Fall-over: a user whose home sub-pool is empty (and who holds a claim
  there for their ordinal-th envelope) takes it from this sub-pool. It is
  recorded here, with its ordinal, in the same step as the pop, so a retry of
  that fall-over finds it (EXISTING) instead of taking a second one.

  KEYS[1]  this sub-pool's pool list
  KEYS[2]  its grabs hash
  KEYS[3]  its envelopes' state hash
  KEYS[4]  its stats hash
  KEYS[5]  its credit stream
  ARGV[1]  account id
  ARGV[2]  the user's home sub-pool index
  ARGV[3]  which of the user's envelopes this is (1 for the first)

  Returns: {'GRABBED', envelopeId, amount} | {'EXISTING', envelopeId, amount} | {'EMPTY'} | {'NOT_STARTED'} | {'ENDED'} | {'NOT_LOADED'}

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/red-envelope/includes/red-envelope-pool"
local poolKey, grabsKey, envKey, statsKey, creditsKey = unpack(KEYS)
local account, home, ordinal = ARGV[1], ARGV[2], ARGV[3]

local held = redis.call('HGET', grabsKey, account)
if held then
  for entry in string.gmatch(held, '[^,]+') do
    local envelopeId, amount, ord = string.match(entry, '^([^:]+):(%d+):%d+:(%d+)$')
    if ord == ordinal then return {'EXISTING', envelopeId, tonumber(amount)} end
  end
end
local refusal, here = grabWindowRefusal(statsKey, serverTimeMs())
if refusal then return {refusal} end
local envelopeId, amount = popAndRecord(poolKey, grabsKey, envKey, statsKey, creditsKey, account, home, ordinal, held, here)
if envelopeId then return {'GRABBED', envelopeId, amount} end
return {'EMPTY'}
