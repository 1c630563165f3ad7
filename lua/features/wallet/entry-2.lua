--[[
  Reads the entry a (kind, reference) made in a wallet, changing nothing.

  KEYS[1]  the wallet's ledger (list of entry JSON, oldest first; entry n at index n-1)
  KEYS[2]  the wallet's applied references (hash: '<kind>|<reference>' → entry number; 0: voided;
           a bare '<reference>' field, written before kinds were part of it, counts for its entry's kind)
  ARGV[1]  reference
  ARGV[2]  entry kind

  Returns: {'ENTRY', entry JSON} | {'NONE'} (never applied, or voided)
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/wallet/includes/wallet-ledger"
local ledgerKey = KEYS[1]
local refsKey = KEYS[2]
local reference = ARGV[1]
local kind = ARGV[2]

local seen, entry = walletRefOf(ledgerKey, refsKey, kind, reference)
if seen and seen ~= '0' then return {'ENTRY', entry} end
return {'NONE'}
