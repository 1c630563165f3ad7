--[[
  Moves a pending or ready item to a new due time, keeping its payload.
  An item already in flight or dead cannot be rescheduled (use schedule to
  replace it).

  KEYS[1]  pending zset
  KEYS[2]  ready zset
  KEYS[3]  in-flight zset
  KEYS[4]  dead zset
  KEYS[5]  payload hash
  KEYS[6]  attempts hash
  KEYS[7]  errors hash
  KEYS[8]  lease hash (id -> fencing token of the live delivery)
  KEYS[9]  fencing-token counter
  ARGV[1]  the item id
  ARGV[2]  'delay' or 'at' (see schedule)
  ARGV[3]  delay or due time, ms
  ARGV[4]  the queue's event channel

  Returns: the new due time (ms);
    -1 (NOT_FOUND) no such item, -5 (INVALID_STATE) in flight or dead,
    -6 (INVALID_ARGUMENT) the time is not a number
]]
--- @include "platform/includes/server-time-ms"
--- @include "engines/delay-queue/includes/delay-queue-state"
local id = ARGV[1]
local mode = ARGV[2]
local when = ARGV[3]
local channel = ARGV[4]

local due = dueFrom(mode, when, serverTimeMs())
if not due then return -6 end
local state = itemState(id)
if state == 0 then return -1 end
if state > 2 then return -5 end
redis.call('ZREM', readyKey, id)
addPending(id, due, channel)
return due
