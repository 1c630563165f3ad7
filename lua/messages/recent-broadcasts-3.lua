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
local out = { redis.call('HGET', KEYS[3], 'seq') or '0' }
local page
if ARGV[1] == '' then
  local newest = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
  page = {}
  for i = #newest - 1, 1, -2 do
    page[#page + 1] = newest[i]
    page[#page + 1] = newest[i + 1]
  end
else
  page = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
end
for i = 1, #page, 2 do
  out[#out + 1] = page[i + 1]
  out[#out + 1] = page[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], page[i]) or 'null'
end
return out
