--[[
  Withdraws the message with one idempotency field (a business system takes
  it back): the message, its body, expiry and read state go, so no pull,
  unread count or get shows it again. The field is then recorded as
  withdrawn for as long as a message is kept (the retention time; the
  newest ARGV[3] withdrawals), and write-7.lua refuses it meanwhile: a retried or
  late write cannot bring the message back. Idempotent: withdrawing again,
  or a field never written, records the withdrawal and removes nothing.

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  KEYS[6]  expiry zset
  KEYS[7]  withdrawn zset
  ARGV[1]  idempotency field (bizType | outerBizId)
  ARGV[2]  retention, ms
  ARGV[3]  most withdrawals remembered (the most messages the account keeps)

  Returns: {removed, unread}
    removed  1 a message the app could see was removed, 0 there was none

  Durable: messages
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/messages/includes/messages-inbox"
local idemField = ARGV[1]
local retentionMs = tonumber(ARGV[2])
local maxWithdrawals = tonumber(ARGV[3])
local now = serverTimeMs()
dropExpired(now)
local removed = 0
local existing = redis.call('HGET', idemKey, idemField)
if existing then
  local seq = redis.call('ZSCORE', inboxKey, existing)
  if seq then
    if liveSeq(existing, retentionMs, now) then removed = 1 end
    removeMessage(existing, tonumber(seq))
  else
    redis.call('HDEL', idemKey, idemField)
  end
end
redis.call('ZADD', withdrawnKey, now, idemField)
trimWithdrawn(now, maxWithdrawals, retentionMs)
touch(retentionMs)
return {removed, metaNumber('unread')}
