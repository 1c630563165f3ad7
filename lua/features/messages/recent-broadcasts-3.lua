--[[
  Broadcasts with a sequence above ARGV[1], oldest first, at most ARGV[2]
  (with ARGV[1] = '': the newest ARGV[2], oldest first): what sync-broadcasts
  needs. Also gives the newest broadcast's sequence.

  KEYS[1]  broadcast stream zset
  KEYS[2]  broadcast bodies hash
  KEYS[3]  broadcast meta hash
  ARGV[1]  sequence to start after, or '' for the newest page
  ARGV[2]  most broadcasts to return, 1..1000

  Returns: {latest, seq1, id1, body1, ...}; latest is the newest broadcast's sequence (0: none)
]]
local streamKey = KEYS[1]
local bodiesKey = KEYS[2]
local metaKey = KEYS[3]
local after = ARGV[1]
local limit = tonumber(ARGV[2])
local out = { redis.call('HGET', metaKey, 'seq') or '0' }
local page
if after == '' then
  local newest = redis.call('ZREVRANGE', streamKey, 0, limit - 1, 'WITHSCORES')
  page = {}
  for i = #newest - 1, 1, -2 do
    page[#page + 1] = newest[i]
    page[#page + 1] = newest[i + 1]
  end
else
  page = redis.call('ZRANGEBYSCORE', streamKey, '(' .. after, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
end
for i = 1, #page, 2 do
  out[#out + 1] = page[i + 1]
  out[#out + 1] = page[i]
  out[#out + 1] = redis.call('HGET', bodiesKey, page[i]) or 'null'
end
return out
