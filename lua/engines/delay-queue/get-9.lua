--[[
  Reads one item: where it is, its score there, payload, deliveries and last error.

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

  Returns: {state, at, payload, attempts, lastError}; state 0 (absent) alone when not found.
    at is the due time (pending, ready), visibility deadline (in flight) or time of death (dead)
]]
--- @include "engines/delay-queue/includes/delay-queue-state"
local id = ARGV[1]

local state, score = itemState(id)
if state == 0 then return {0} end
return {
  state,
  string.format('%d', score),
  redis.call('HGET', payloadKey, id) or '',
  redis.call('HGET', attemptsKey, id) or '0',
  redis.call('HGET', errorsKey, id) or '',
}
