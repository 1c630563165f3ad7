--[[
  Fall-over: a buyer whose home shard is empty takes the units from another
  shard of the product. The per-user limit was checked and the units claimed
  on the home shard (reserve-5.lua); this checks the window and the stock
  here and records the reservation. Idempotent on the reservation id.

  KEYS[1]  this shard's stock hash
  KEYS[2]  this shard's reservations hash
  KEYS[3]  this shard's due set
  ARGV[1]  reservation id
  ARGV[2]  account id
  ARGV[3]  quantity
  ARGV[4]  the pay window, ms
  ARGV[5]  the buyer's home shard index

  Returns: {'RESERVED', expiresAt, available left} | {'EXISTING', record JSON} |
           {'EMPTY', available} | {'NOT_STARTED'} | {'ENDED'} | {'NO_PRODUCT'}

  Durable: money
]]
--- @include "includes/server-time-ms"
--- @include "includes/seckill-shard"
local stockKey = KEYS[1]
local rsvKey = KEYS[2]
local dueKey = KEYS[3]
local rsvId = ARGV[1]
local account = ARGV[2]
local qty = tonumber(ARGV[3])
local payWindowMs = tonumber(ARGV[4])
local home = tonumber(ARGV[5])

local st = shardState(stockKey)
if not st then return {'NO_PRODUCT'} end
local existing = redis.call('HGET', rsvKey, rsvId)
if existing then return {'EXISTING', existing} end
local now = serverTimeMs()
local refusal = windowRefusal(st, now)
if refusal then return {refusal} end
local available = st.available
if available < qty then return {'EMPTY', available} end
local rec = takeStock(st, stockKey, rsvKey, dueKey, rsvId, account, qty, now + payWindowMs, home, now)
return {'RESERVED', rec.e, available - qty}
