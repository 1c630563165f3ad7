--[[
  One page of an account's messages in server order. With a cursor ARGV[1]
  (a msgId, i.e. a sequence) it returns the messages stored after it, oldest
  first; the cursor need not exist any more (expired or trimmed messages do
  not break it). Without one it returns the newest page. Messages past the
  retention time are never returned, and the first 100 of them are dropped
  here; messages past their own expiry are all dropped here; so the unread
  count only counts what a pull can still show. First
  checks that the account has taken in every broadcast up to ARGV[3] (and
  has a broadcast mark at all); if not, it answers case 1 and the caller runs
  sync-broadcasts first.

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  KEYS[6]  expiry zset
  KEYS[7]  withdrawn zset
  ARGV[1]  cursor: the last msgId the app has, or '' for the newest page
  ARGV[2]  page size, 0..100 (0: only the unread count)
  ARGV[3]  the latest broadcast sequence the caller knows of (0: none)
  ARGV[4]  retention, ms

  Returns: {1, lastBroadcastTakenIn} when broadcasts must be taken in first; else
    {0, unread, hasMore, id1, body1, read1, ...}
    hasMore  1 when more messages lie beyond the page (newer with a cursor, older without)
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/messages/includes/messages-inbox"
local cursor = ARGV[1]
local limit = tonumber(ARGV[2])
local latestBroadcast = tonumber(ARGV[3])
local retentionMs = tonumber(ARGV[4])
if latestBroadcast > metaNumber('bcast') or (latestBroadcast == 0 and redis.call('HEXISTS', metaKey, 'bcast') == 0) then return {1, string.format('%d', metaNumber('bcast'))} end
local now = serverTimeMs()
trimExpired(now, retentionMs)
dropExpired(now)
local floor = string.format('%d', retentionFloor(now, retentionMs))
local out = {0, metaNumber('unread'), 0}
if limit == 0 then return out end
local page
if cursor ~= '' then
  local from = math.max(tonumber(cursor), tonumber(floor) - 1)
  page = redis.call('ZRANGEBYSCORE', inboxKey, '(' .. string.format('%d', from), '+inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
else
  local newest = redis.call('ZREVRANGEBYSCORE', inboxKey, '+inf', floor, 'WITHSCORES', 'LIMIT', 0, limit + 1)
  page = {}
  for i = #newest - 1, 1, -2 do
    page[#page + 1] = newest[i]
    page[#page + 1] = newest[i + 1]
  end
  -- Newest page: the extra (oldest) one only says that more exist.
  if #page > limit * 2 then
    table.remove(page, 1)
    table.remove(page, 1)
    out[3] = 1
  end
end
if cursor ~= '' and #page > limit * 2 then
  page[#page] = nil
  page[#page] = nil
  out[3] = 1
end
local readUpTo, anyRead = readState()
-- The page's bodies in one read (at most 101 fields).
local ids = {}
for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
local bodies = #ids > 0 and redis.call('HMGET', bodiesKey, unpack(ids)) or {}
for i = 1, #page, 2 do
  local id = page[i]
  out[#out + 1] = id
  out[#out + 1] = bodies[(i + 1) / 2] or 'null'
  out[#out + 1] = readFlag(id, tonumber(page[i + 1]), readUpTo, anyRead)
end
return out
