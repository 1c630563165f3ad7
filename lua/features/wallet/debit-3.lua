--[[
  Takes money from one wallet in one currency, never below zero, once per (kind, reference):
  the balance, a ledger entry (with the balance after it, on the Redis clock) and
  the reference, all in this one step. The same kind and reference again answer
  the entry they made and move nothing; with another amount, currency or
  direction they are refused, and so is a reference voided by void-2.lua.
  The same reference under another kind is another reference: a top-up's
  reference (chosen by a caller) never stands for a rain's or a payment's.
  A debit that would take the balance below zero is refused and stores nothing.

  KEYS[1]  the wallet's balances (hash: currency → minor units)
  KEYS[2]  the wallet's ledger (list of entry JSON, oldest first; entry n at index n-1)
  KEYS[3]  the wallet's applied references (hash: '<kind>|<reference>' → entry number; 0: voided;
           a bare '<reference>' field, written before kinds were part of it, counts for its entry's kind)
  ARGV[1]  currency (ISO 4217)
  ARGV[2]  amount, minor units, > 0
  ARGV[3]  reference (never holds '|')
  ARGV[4]  entry kind (top-up, payment, reversal, red-envelope, funding, refund)
  ARGV[5]  memo ('' for none)

  Returns: {'APPLIED', entry JSON, balance} | {'EXISTING', entry JSON, balance now} |
           {'REUSED', the reference's entry JSON} | {'VOIDED'} | {'INSUFFICIENT', balance} | {'LIMIT', balance}

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/wallet/includes/wallet-ledger"
local balancesKey = KEYS[1]
local ledgerKey = KEYS[2]
local refsKey = KEYS[3]
local currency = ARGV[1]
local amount = tonumber(ARGV[2])
local reference = ARGV[3]
local kind = ARGV[4]
local memo = ARGV[5]

return walletApply(balancesKey, ledgerKey, refsKey, currency, -amount, reference, kind, memo)
