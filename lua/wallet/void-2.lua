--[[
  Settles a reference for good: the entry it made, or, when it was never
  applied, marks it void so that no credit or debit can ever apply it. A
  payment channel's query uses this: once it answers "no such payment", a
  debit that arrives late (from a stalled caller) is refused, never taken.

  KEYS[1]  the wallet's ledger (list of entry JSON, oldest first; entry n at index n-1)
  KEYS[2]  the wallet's applied references (hash: reference → entry number; 0: voided)
  ARGV[1]  reference

  Returns: {'ENTRY', entry JSON} | {'VOIDED'} (voided now or before)

  Durable: money
]]
local ledgerKey = KEYS[1]
local refsKey = KEYS[2]
local reference = ARGV[1]

local seen = redis.call('HGET', refsKey, reference)
if seen and seen ~= '0' then return {'ENTRY', redis.call('LINDEX', ledgerKey, tonumber(seen) - 1)} end
if not seen then redis.call('HSET', refsKey, reference, 0) end
return {'VOIDED'}
