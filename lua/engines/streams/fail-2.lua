--[[
  Records a failed delivery of one stream entry to a consumer group. The entry
  stays pending (to be taken over again) unless it has now been delivered
  maxDeliveries times: then it is copied to the dead-letter stream, with the
  group, consumer, delivery count and error ahead of its own fields, and
  acked, in one step, so it is neither lost nor dead-lettered twice.

  KEYS[1]  the stream
  KEYS[2]  its dead-letter stream (same hash tag)
  ARGV[1]  consumer group
  ARGV[2]  entry id
  ARGV[3]  deliveries after which the entry is given up
  ARGV[4]  approximate cap on the dead-letter stream's length
  ARGV[5]  consumer name
  ARGV[6]  the handler's error message

  Returns: {deadLettered, deliveries}
    deadLettered  1 when the entry was moved to the dead-letter stream and acked, 0 when it stays pending
    deliveries    how many times the entry has been delivered (0: it is no longer pending)
]]
local streamKey = KEYS[1]
local deadKey = KEYS[2]
local group = ARGV[1]
local entryId = ARGV[2]
local maxDeliveries = tonumber(ARGV[3])
local deadMaxLen = ARGV[4]
local consumer = ARGV[5]
local errorMessage = ARGV[6]

local pending = redis.call('XPENDING', streamKey, group, entryId, entryId, 1)
if #pending == 0 then
  return {0, 0}
end
local deliveries = tonumber(pending[1][4])
if deliveries < maxDeliveries then
  return {0, deliveries}
end

local record = {'group', group, 'consumer', consumer, 'eventId', entryId, 'deliveries', deliveries, 'error', errorMessage}
local entry = redis.call('XRANGE', streamKey, entryId, entryId)
if #entry == 1 then
  for _, value in ipairs(entry[1][2]) do
    record[#record + 1] = value
  end
end
redis.call('XADD', deadKey, 'MAXLEN', '~', deadMaxLen, '*', unpack(record))
redis.call('XACK', streamKey, group, entryId)
return {1, deliveries}
