--[[
  Writes one message into an account's inbox, idempotent on its idempotency
  field: the check, the id (the next server sequence), the body, the inbox
  entry, the unread counter, the message's own expiry and retention all
  happen here. A field withdrawn (withdraw-7.lua) within the retention time
  is never written again: the answer says so and nothing is stored. With a
  pending-action field (ARGV[5]) set, the write only happens while that
  action is still recorded (holding ARGV[6], or anything when that is ''),
  and it ends the action: a reminder for an unfinished action. A message's
  expiry is the earlier of ARGV[7] (relative) and ARGV[8] (absolute); an
  absolute one at or before the Redis clock's now stores and changes nothing.

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  KEYS[6]  expiry zset
  KEYS[7]  withdrawn zset
  ARGV[1]  idempotency field (bizType | outerBizId)
  ARGV[2]  message JSON (carrying "k": ARGV[1])
  ARGV[3]  most messages the account keeps
  ARGV[4]  retention, ms
  ARGV[5]  pending-action field in meta that must hold ARGV[6], or '' for none
  ARGV[6]  the pending action's id, or '' for whichever start is recorded
  ARGV[7]  the message's time to live, ms from now on the Redis clock (1..), or '' for none
  ARGV[8]  when the message expires, epoch ms on the Redis clock, or '' for none

  Returns: {outcome, msgId, unread}
    outcome  1 new message, 0 duplicate (msgId is the original), 2 the pending action
             is no longer pending (nothing written, msgId ''), 3 the field was withdrawn
             (nothing written, msgId ''), 4 ARGV[8] is at or before now: already expired
             (nothing written, the pending action left as it is, msgId '')

  Durable: messages
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/messages/includes/messages-inbox"
local idemField = ARGV[1]
local body = ARGV[2]
local maxCount = tonumber(ARGV[3])
local retentionMs = tonumber(ARGV[4])
local pendingField = ARGV[5]
local pendingActionId = ARGV[6]
local ttlMs = tonumber(ARGV[7])
local expiresAt = tonumber(ARGV[8])
local now = serverTimeMs()
dropExpired(now)
-- Withdrawal records past the retention time (or beyond the newest maxCount) do not count: they
-- are trimmed before the key is looked at again, which only matters when it is there at all.
if redis.call('ZSCORE', withdrawnKey, idemField) then
  trimWithdrawn(now, maxCount, retentionMs)
  if redis.call('ZSCORE', withdrawnKey, idemField) then return {3, '', metaNumber('unread')} end
end
local existing = redis.call('HGET', idemKey, idemField)
if existing and liveSeq(existing, retentionMs, now) and redis.call('HEXISTS', bodiesKey, existing) == 1 then
  return {0, existing, metaNumber('unread')}
end
if expiresAt and expiresAt <= now then return {4, '', metaNumber('unread')} end
if ttlMs and (not expiresAt or now + ttlMs < expiresAt) then expiresAt = now + ttlMs end
if pendingField ~= '' then
  local held = redis.call('HGET', metaKey, pendingField)
  if not held or (pendingActionId ~= '' and held ~= pendingActionId) then return {2, '', metaNumber('unread')} end
  redis.call('HDEL', metaKey, pendingField)
end
local id, unread = addMessage(body, idemField, now, expiresAt)
local removed = removals
trim(now, maxCount, retentionMs)
touch(retentionMs)
if removals > removed then unread = metaNumber('unread') end
return {1, id, unread}
