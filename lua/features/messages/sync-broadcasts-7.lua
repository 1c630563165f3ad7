--[[
  Takes broadcasts to everyone into one account's inbox, at the point where
  the account first pulls after them: each becomes an ordinary inbox message
  (ordered, unread until read, deletable). The caller passes every broadcast
  with a sequence above ARGV[3] that it knows of, oldest first. Idempotent: a
  broadcast at or below the account's mark is skipped, so concurrent pulls
  take each broadcast in once. An account that never took one in starts at
  the list's start (it gets the broadcasts passed, not the whole history).
  Broadcasts past the retention time are skipped (the mark still moves), so
  an account whose keys expired never takes one in twice; the inbox is then
  trimmed back to ARGV[1] (about ten passes at most for 1,000 new ones).

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  KEYS[6]  expiry zset
  KEYS[7]  withdrawn zset
  ARGV[1]  most messages the account keeps
  ARGV[2]  retention, ms
  ARGV[3]  the list below holds every broadcast with a sequence above this one
  ARGV[4]  then triples: broadcast sequence, broadcast id, message JSON (oldest first)

  Returns: {done, mark}
    done  1 taken in (mark = the account's new mark), 0 the account's mark is below
          ARGV[3]: call again with every broadcast above mark
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/messages/includes/messages-inbox"
local maxCount = tonumber(ARGV[1])
local retentionMs = tonumber(ARGV[2])
local from = tonumber(ARGV[3])
local firstTriple = 4
local mark = metaNumber('bcast')
if redis.call('HEXISTS', metaKey, 'bcast') == 0 then mark = from end
if mark < from then return {0, string.format('%d', mark)} end
local now = serverTimeMs()
dropExpired(now)
local taken = 0
for i = firstTriple, #ARGV - 2, 3 do
  local bseq = tonumber(ARGV[i])
  if bseq > mark then
    if bseq >= retentionFloor(now, retentionMs) then
      addMessage(ARGV[i + 2], '', now, nil)
      taken = taken + 1
    end
    mark = bseq
  end
end
redis.call('HSET', metaKey, 'bcast', string.format('%d', mark))
if taken > 0 then
  repeat trim(now, maxCount, retentionMs) until redis.call('ZCARD', inboxKey) <= maxCount
end
touch(retentionMs)
return {1, string.format('%d', mark)}
