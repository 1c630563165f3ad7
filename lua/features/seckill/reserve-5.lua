--[[
  A buyer reserves units of a product on their home shard (the shard a hash
  of the account picks): the sale window on the Redis clock, eligibility, the
  per-user limit and the stock, checked and taken in one step. The per-user
  limit counts everything the buyer holds of the product, reserved or sold,
  on every shard: the home shard keeps the buyer's total (holds), and a
  reservation taken over several shards is first claimed here (claims), so
  the limit is checked in one place. Idempotent on the reservation id (made
  from the account and the request id). A reservation taken here also enters
  the shard's due set (scored by its expiry), in this same step: the safety
  net's sweep finds it there until it is sold or released, even if the
  process that ran this dies right after. The record keeps the id of the
  reservation's order (ARGV[9], drawn by the service): the order itself is
  stored when its buyer first opens or pays it, or when it is closed, and
  every copy of the request answers the id the first one recorded.

  When this shard has too little and the product has other shards, nothing
  is written until the caller names the other shards to visit (ARGV[7], read
  from their stock first). With them, this step claims the whole quantity
  here, takes what this shard has (0 or more) and writes the reservation's
  master record (n: the whole quantity, p: the shards to visit, in order):
  every copy of the request then visits the same shards in the same order,
  and take-3.lua's first visit of a shard decides its part for good, so
  copies of one request, retried or concurrent, make one reservation. The
  claim enters the due set as c|<reservation id>|<account>, so that a
  reservation a crash left half taken is settled whole.

  A request whose parts fell short was given back whole (f = 1 on its master).
  While the product still has enough, the service makes a fresh attempt
  under the same id (ARGV[8]); gatherers of one product run one at a time
  (the service's gather lock), so attempts do not starve each other.

  KEYS[1]  the home shard's stock hash
  KEYS[2]  the home shard's reservations hash (id -> record JSON)
  KEYS[3]  the home shard's holds hash (account -> units held of the product)
  KEYS[4]  the home shard's claims hash (reservation id -> units, for reservations taken over several shards)
  KEYS[5]  the home shard's due set (RESERVED reservation ids and claims by expiry, for the safety net's sweep)
  ARGV[1]  reservation id
  ARGV[2]  account id
  ARGV[3]  quantity (1..)
  ARGV[4]  1 when the account may buy in this activity, 0 when not
  ARGV[5]  the pay window, ms: the reservation expires this long after now
  ARGV[6]  1 when the product has other shards to take from, 0 when not
  ARGV[7]  '' (first call), or the other shards to take the rest from, in order, comma-separated
  ARGV[8]  '' or the attempt to make (1..): a master record given back (f) by attempt ARGV[8] - 1 is replaced by a
           fresh attempt (its parts carry the attempt as g, so parts of the earlier one are told apart)
  ARGV[9]  the order id to record on a new reservation ('' for none); a fresh attempt keeps the one recorded before

  Returns: {outcome, detail...}
    {'RESERVED', expiresAt, available left here, order id recorded ('' for none)}   taken here, whole
    {'EXISTING', record JSON}                      this reservation exists here (nothing changed)
    {'CLAIM', record JSON}                         claimed now: the master record; take the rest on its shards
    {'CLAIMED', units, record JSON or ''}          claimed by an earlier call: the master record ('' when it was
                                                   claimed before master records were written)
    {'SHORT', available here}                      too little here, nothing written: name the shards (ARGV[7])
    {'SOLD_OUT', available here}                   not enough left (no other shard)
    {'LIMIT_EXCEEDED', held, limit}
    {'NOT_STARTED'} {'ENDED'} {'NOT_ELIGIBLE'}
    {'NO_PRODUCT'}                                 the shard is not loaded

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/seckill/includes/seckill-shard"
local stockKey = KEYS[1]
local rsvKey = KEYS[2]
local holdsKey = KEYS[3]
local claimsKey = KEYS[4]
local dueKey = KEYS[5]
local rsvId = ARGV[1]
local account = ARGV[2]
local qty = tonumber(ARGV[3])
local eligible = ARGV[4] == '1'
local payWindowMs = tonumber(ARGV[5])
local canFallOver = ARGV[6] == '1'
local plan = ARGV[7]
local attempt = tonumber(ARGV[8] or '') or 0
local orderId = ARGV[9] or ''

local st = shardState(stockKey)
if not st then return {'NO_PRODUCT'} end
local existing = redis.call('HGET', rsvKey, rsvId)
local claimed = poolClaimOf(claimsKey, rsvId)
if claimed then return {'CLAIMED', claimed, existing or ''} end
if existing then
  local was = cjson.decode(existing)
  local renew = attempt > 0 and was.s == 'RELEASED' and was.f == 1 and was.n and (was.g or 0) + 1 == attempt
  if not renew then return {'EXISTING', existing} end
  if was.o then orderId = was.o end
end

local now = serverTimeMs()
local refusal = windowRefusal(st, now)
if refusal then return {refusal} end
if not eligible then return {'NOT_ELIGIBLE'} end
local held = tonumber(redis.call('HGET', holdsKey, account) or '0')
if held + qty > st.limit then return {'LIMIT_EXCEEDED', held, st.limit} end

local available = st.available
if available >= qty then
  local rec = takeStock(st, stockKey, rsvKey, dueKey, rsvId, account, qty, now + payWindowMs, st.shard, now, orderId)
  redis.call('HINCRBY', holdsKey, account, qty)
  expireWith(st.expireAt, holdsKey)
  return {'RESERVED', rec.e, available - qty, rec.o or ''}
end
if not canFallOver then return {'SOLD_OUT', available} end
if plan == '' then return {'SHORT', available} end
local rec = {s = 'RESERVED', a = account, q = available, n = qty, e = now + payWindowMs, h = st.shard, c = now, t = 0, p = plan}
if attempt > 0 then rec.g = attempt end
if orderId ~= '' then rec.o = orderId end
takeUnits(st, stockKey, rsvKey, dueKey, rsvId, rec, false)
redis.call('HINCRBY', holdsKey, account, qty)
poolClaim(claimsKey, rsvId, qty)
redis.call('ZADD', dueKey, rec.e, claimDueMember(rsvId, account))
expireWith(st.expireAt, holdsKey)
expireWith(st.expireAt, claimsKey)
expireWith(st.expireAt, dueKey)
return {'CLAIM', cjson.encode(rec)}
