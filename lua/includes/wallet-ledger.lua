-- Shared piece, inlined by the script loader: one wallet entry applied once per reference.
-- Needs server-time-ms. Entries are JSON built here, integers written with %d (never %.14g).

--- The greatest balance a wallet holds in one currency: integers stay exact in doubles below it.
local WALLET_MAX_BALANCE = 9007199254740991

local function walletEntryJson(id, kind, currency, amount, after, reference, memo, at)
  return '{"entryId":' .. cjson.encode(id) .. ',"kind":' .. cjson.encode(kind) .. ',"currency":' .. cjson.encode(currency)
    .. ',"amount":' .. string.format('%d', amount) .. ',"balanceAfter":' .. string.format('%d', after)
    .. ',"reference":' .. cjson.encode(reference) .. ',"memo":' .. cjson.encode(memo) .. ',"at":' .. string.format('%d', at) .. '}'
end

--- Applies `signed` (minor units, > 0 credit, < 0 debit) to `currency` once per `reference`.
--- Returns the script's reply: {'APPLIED', entry, balance} | {'EXISTING', entry, balance} |
--- {'REUSED', entry} | {'VOIDED'} | {'INSUFFICIENT', balance} | {'LIMIT', balance}.
--- A reference voided (entry number 0, by void-2.lua) can never be applied.
local function walletApply(balancesKey, ledgerKey, refsKey, currency, signed, reference, kind, memo)
  local seen = redis.call('HGET', refsKey, reference)
  if seen == '0' then return {'VOIDED'} end
  if seen then
    local entry = redis.call('LINDEX', ledgerKey, tonumber(seen) - 1)
    local e = cjson.decode(entry)
    if e.currency ~= currency or e.amount ~= signed then return {'REUSED', entry} end
    return {'EXISTING', entry, redis.call('HGET', balancesKey, currency) or '0'}
  end
  local balance = tonumber(redis.call('HGET', balancesKey, currency) or '0')
  local after = balance + signed
  if after < 0 then return {'INSUFFICIENT', string.format('%d', balance)} end
  if after > WALLET_MAX_BALANCE then return {'LIMIT', string.format('%d', balance)} end
  local now = serverTimeMs()
  local seq = redis.call('LLEN', ledgerKey) + 1
  local entry = walletEntryJson(tostring(seq), kind, currency, signed, after, reference, memo, now)
  redis.call('HSET', balancesKey, currency, string.format('%d', after))
  redis.call('RPUSH', ledgerKey, entry)
  redis.call('HSET', refsKey, reference, seq)
  return {'APPLIED', entry, string.format('%d', after)}
end
