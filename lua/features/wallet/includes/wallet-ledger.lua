-- Shared piece, inlined by the script loader: one wallet entry applied once per (kind, reference).
-- Needs server-time-ms. Entries are JSON built here, integers written with %d (never %.14g).
--
-- The references hash is keyed `<kind>|<reference>` ('|' is never in a reference): the same reference under two
-- kinds is two references, so a top-up (whose reference a caller chooses) can never stand for a rain's credit,
-- funding or refund, nor a payment. Fields written before that are the bare reference; they still count, for the
-- same kind only: read when the kind's field is missing, and taken only when the entry they name is of that kind
-- (a bare '0', a voided reference, only for kind 'payment', the only kind ever voided).

--- The greatest balance a wallet holds in one currency: integers stay exact in doubles below it.
local WALLET_MAX_BALANCE = 9007199254740991

local function walletEntryJson(id, kind, currency, amount, after, reference, memo, at)
  return '{"entryId":' .. cjson.encode(id) .. ',"kind":' .. cjson.encode(kind) .. ',"currency":' .. cjson.encode(currency)
    .. ',"amount":' .. string.format('%d', amount) .. ',"balanceAfter":' .. string.format('%d', after)
    .. ',"reference":' .. cjson.encode(reference) .. ',"memo":' .. cjson.encode(memo) .. ',"at":' .. string.format('%d', at) .. '}'
end

--- The references hash's field of (kind, reference).
local function walletRefField(kind, reference)
  return kind .. '|' .. reference
end

--- What (kind, reference) made in this wallet: '0' (voided) or the entry number with its entry JSON, or nil (never
--- applied). A legacy bare-reference field counts only for an entry of the same kind (see the top).
local function walletRefOf(ledgerKey, refsKey, kind, reference)
  -- Both fields in one read: the kind's, and the legacy bare one (used only when the kind's is missing).
  local fields = redis.call('HMGET', refsKey, walletRefField(kind, reference), reference)
  local seen, legacy = fields[1], fields[2]
  if seen == '0' then return '0' end
  if seen then return seen, redis.call('LINDEX', ledgerKey, tonumber(seen) - 1) end
  if not legacy then return nil end
  if legacy == '0' then
    if kind == 'payment' then return '0' end
    return nil
  end
  local entry = redis.call('LINDEX', ledgerKey, tonumber(legacy) - 1)
  if entry and cjson.decode(entry).kind == kind then return legacy, entry end
  return nil
end

--- Applies `signed` (minor units, > 0 credit, < 0 debit) to `currency` once per (`kind`, `reference`).
--- Returns the script's reply: {'APPLIED', entry, balance} | {'EXISTING', entry, balance} |
--- {'REUSED', entry} | {'VOIDED'} | {'INSUFFICIENT', balance} | {'LIMIT', balance}.
--- A reference voided (entry number 0, by void-2.lua) can never be applied.
local function walletApply(balancesKey, ledgerKey, refsKey, currency, signed, reference, kind, memo)
  local seen, entry = walletRefOf(ledgerKey, refsKey, kind, reference)
  if seen == '0' then return {'VOIDED'} end
  if seen then
    local e = cjson.decode(entry)
    if e.kind ~= kind or e.currency ~= currency or e.amount ~= signed then return {'REUSED', entry} end
    return {'EXISTING', entry, redis.call('HGET', balancesKey, currency) or '0'}
  end
  local balance = tonumber(redis.call('HGET', balancesKey, currency) or '0')
  local after = balance + signed
  if after < 0 then return {'INSUFFICIENT', string.format('%d', balance)} end
  if after > WALLET_MAX_BALANCE then return {'LIMIT', string.format('%d', balance)} end
  local now = serverTimeMs()
  local seq = redis.call('LLEN', ledgerKey) + 1
  local created = walletEntryJson(tostring(seq), kind, currency, signed, after, reference, memo, now)
  redis.call('HSET', balancesKey, currency, string.format('%d', after))
  redis.call('RPUSH', ledgerKey, created)
  redis.call('HSET', refsKey, walletRefField(kind, reference), seq)
  return {'APPLIED', created, string.format('%d', after)}
end
