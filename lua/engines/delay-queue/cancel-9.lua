--[[
  Cancels one item wherever it is: O(log n), no scan. An in-flight item is
  removed too, so its delivery can no longer be acked or extended and
  `stillWanted()` turns false; a 'gone:<token>' event tells the holder to abort.

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
  ARGV[2]  the queue's event channel

  Returns: {state, attempts}
    state     where the item was: 0 absent, 1 pending, 2 ready, 3 in flight, 4 dead
    attempts  deliveries it had before the cancel (> 0: a handler ran on it before)
]]
--- @include "engines/delay-queue/includes/delay-queue-state"
local id = ARGV[1]
local channel = ARGV[2]

local state = itemState(id)
if state == 0 then return {0, 0} end
local attempts = attemptsOf(id)
if state == 3 then revoke(id, channel) end
forget(id)
return {state, attempts}
