--[[
  Loads (or reloads, before the sale) one product shard: its stock, window,
  per-user limit and generation, with every reservation, hold, claim and
  buyer of an earlier load removed (and its due set). Refused when the shard holds reservations
  or sales (a sale under way, or one of an earlier activity under the same
  ids whose keys are still live): nothing is changed then.

  KEYS[1]  the shard's stock hash
  KEYS[2]  the shard's reservations hash
  KEYS[3]  the shard's holds hash
  KEYS[4]  the shard's claims hash
  KEYS[5]  the shard's buyers set
  KEYS[6]  the shard's due set
  ARGV[1]  generation (the activity load's id)
  ARGV[2]  stock of this shard
  ARGV[3]  startsAt, epoch ms
  ARGV[4]  endsAt, epoch ms
  ARGV[5]  per-user limit
  ARGV[6]  this shard's index
  ARGV[7]  when the live keys expire, epoch ms

  Returns: {1} loaded, or {0, reserved, sold} refused
]]
--- @include "features/seckill/includes/seckill-shard"
local stockKey = KEYS[1]
local rsvKey = KEYS[2]
local holdsKey = KEYS[3]
local claimsKey = KEYS[4]
local buyersKey = KEYS[5]
local dueKey = KEYS[6]

local reserved = shardNumber(stockKey, 'reserved')
local sold = shardNumber(stockKey, 'sold')
if reserved > 0 or sold > 0 then return {0, reserved, sold} end
redis.call('DEL', stockKey, rsvKey, holdsKey, claimsKey, buyersKey, dueKey)
redis.call('HSET', stockKey, 'gen', ARGV[1], 'initial', ARGV[2], 'available', ARGV[2], 'reserved', 0, 'sold', 0, 'released', 0,
  'startsAt', ARGV[3], 'endsAt', ARGV[4], 'endedAt', 0, 'limit', ARGV[5], 'shard', ARGV[6], 'expireAt', ARGV[7])
redis.call('PEXPIREAT', stockKey, ARGV[7])
return {1}
