--[[
  Ends a fall-over on the user's home sub-pool: the claim is removed and,
  when an envelope was taken elsewhere, it is recorded in the user's grabs
  here (so the per-user limit counts it). Idempotent.

  KEYS[1]  the home sub-pool's grabs hash
  KEYS[2]  its claims hash
  ARGV[1]  account id
  ARGV[2]  "envelopeId:amount:pool:ordinal" taken elsewhere, or '' when none was

  Returns: {recorded}  1 when the envelope was recorded now, else 0
]]
--- @include "engines/sharded-pool/includes/sharded-pool"
local grabsKey = KEYS[1]
local claimsKey = KEYS[2]
local account = ARGV[1]
local entry = ARGV[2]

poolUnclaim(claimsKey, account)
if entry == '' then return {0} end
local held = redis.call('HGET', grabsKey, account)
if held and string.find(',' .. held .. ',', ',' .. entry .. ',', 1, true) then return {0} end
redis.call('HSET', grabsKey, account, held and (held .. ',' .. entry) or entry)
return {1}
