--[[
  Schedules one item, idempotent by id: there is never more than one entry
  per id. With ARGV[5] = 'replace' an existing entry (pending, ready, in
  flight or dead) is replaced by the new due time and payload, and its
  delivery count starts again; with 'keep' the existing entry is left as it
  is. Publishes the due time on ARGV[6] when the item is the new head.

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
  ARGV[2]  'delay' (ARGV[3] counts from the Redis clock) or 'at' (ARGV[3] is epoch ms)
  ARGV[3]  delay or due time, ms
  ARGV[4]  payload
  ARGV[5]  'replace' or 'keep'
  ARGV[6]  the queue's event channel

  Returns: {written, existedState, dueAt}
    written       1 when this call wrote the entry, 0 when 'keep' found one
    existedState  0 new, else where the entry was: 1 pending, 2 ready, 3 in flight, 4 dead
    dueAt         the entry's due time (for a kept entry: its current score)
    -6 (INVALID_ARGUMENT) when the time is not a number
]]
--- @include "platform/includes/server-time-ms"
--- @include "engines/delay-queue/includes/delay-queue-state"
local id = ARGV[1]
local mode = ARGV[2]
local when = ARGV[3]
local payload = ARGV[4]
local ifExists = ARGV[5]
local channel = ARGV[6]

local due = dueFrom(mode, when, serverTimeMs())
if not due then return -6 end
-- Every entry keeps its payload until it is forgotten, so a missing payload means a new id:
-- one HEXISTS instead of four ZSCOREs on the common path.
local state, score = 0, nil
if redis.call('HEXISTS', payloadKey, id) == 1 then state, score = itemState(id) end
if state ~= 0 and ifExists == 'keep' then return {0, state, string.format('%d', score)} end
if state == 3 then revoke(id, channel) end
if state ~= 0 then forget(id) end
redis.call('HSET', payloadKey, id, payload)
addPending(id, due, channel)
return {1, state, string.format('%d', due)}
