--[[
  Writes one message into an account's inbox, idempotent on its idempotency
  field: the check, the id (the next server sequence), the body, the inbox
  entry, the unread counter and retention all happen here. With ARGV[5] set,
  the write only happens while the pending action ARGV[5] is still recorded
  (holding ARGV[6], or anything when that is ''), and it ends the action: a
  reminder for an unfinished action.

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  ARGV[1]  idempotency field (bizType | outerBizId)
  ARGV[2]  message JSON (carrying "k": ARGV[1])
  ARGV[3]  most messages the account keeps
  ARGV[4]  retention, ms
  ARGV[5]  pending-action field in meta that must hold ARGV[6], or '' for none
  ARGV[6]  the pending action's id, or '' for whichever start is recorded

  Returns: {outcome, msgId, unread}
    outcome  1 new message, 0 duplicate (msgId is the original), 2 the pending action
             is no longer pending (nothing written, msgId '')
]]
--- @include "includes/server-time-ms"
--- @include "includes/messages-inbox"
local now = serverTimeMs()
local existing = redis.call('HGET', KEYS[3], ARGV[1])
if existing and liveSeq(existing, tonumber(ARGV[4]), now) and redis.call('HEXISTS', KEYS[2], existing) == 1 then
  return {0, existing, metaNumber('unread')}
end
if ARGV[5] ~= '' then
  local held = redis.call('HGET', KEYS[5], ARGV[5])
  if not held or (ARGV[6] ~= '' and held ~= ARGV[6]) then return {2, '', metaNumber('unread')} end
  redis.call('HDEL', KEYS[5], ARGV[5])
end
local retentionMs = tonumber(ARGV[4])
local id = addMessage(ARGV[2], ARGV[1], now)
trim(now, tonumber(ARGV[3]), retentionMs)
touch(retentionMs)
return {1, id, metaNumber('unread')}
