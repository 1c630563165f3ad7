--[[
  Settles a (kind, reference) for good: the entry it made, or, when it was
  never applied, marks it void so that no credit or debit of that kind can
  ever apply it. A payment channel's query uses this: once it answers "no
  such payment", a debit that arrives late (from a stalled caller) is
  refused, never taken.

  KEYS[1]  the wallet's ledger (list of entry JSON, oldest first; entry n at index n-1)
  KEYS[2]  the wallet's applied references (hash: '<kind>|<reference>' → entry number; 0: voided;
           a bare '<reference>' field, written before kinds were part of it, counts for its entry's kind)
  ARGV[1]  reference
  ARGV[2]  entry kind (payment for the balance channel)

  Returns: {'ENTRY', entry JSON} | {'VOIDED'} (voided now or before)

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/wallet/includes/wallet-ledger"
local ledgerKey = KEYS[1]
local refsKey = KEYS[2]
local reference = ARGV[1]
local kind = ARGV[2]

local seen, entry = walletRefOf(ledgerKey, refsKey, kind, reference)
if seen and seen ~= '0' then return {'ENTRY', entry} end
if not seen then redis.call('HSET', refsKey, walletRefField(kind, reference), 0) end
return {'VOIDED'}
