--[[
  One page of dead letters, newest first.

  KEYS[1]  pending zset
  KEYS[2]  ready zset
  KEYS[3]  in-flight zset
  KEYS[4]  dead zset
  KEYS[5]  payload hash
  KEYS[6]  attempts hash
  KEYS[7]  errors hash
  KEYS[8]  lease hash (id -> fencing token of the live delivery)
  KEYS[9]  fencing-token counter
  ARGV[1]  offset, >= 0
  ARGV[2]  page size, 1..100

  Returns: {total, id1, payload1, attempts1, lastError1, diedAt1, ...}
]]
local deadKey = KEYS[4]
local payloadKey = KEYS[5]
local attemptsKey = KEYS[6]
local errorsKey = KEYS[7]
local offset = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])

local out = { redis.call('ZCARD', deadKey) }
local page = redis.call('ZREVRANGE', deadKey, offset, offset + limit - 1, 'WITHSCORES')
for i = 1, #page, 2 do
  local id = page[i]
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', payloadKey, id) or ''
  out[#out + 1] = redis.call('HGET', attemptsKey, id) or '0'
  out[#out + 1] = redis.call('HGET', errorsKey, id) or ''
  out[#out + 1] = page[i + 1]
end
return out
