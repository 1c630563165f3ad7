--[[
  Moves one grabbed envelope between crediting states: to 'credited' once
  the wallet holds it, to 'dead' when its grab was dead-lettered, back to
  'pending' when ops re-drive it. The counters move with it, once: a repeated
  call changes nothing.

  KEYS[1]  the envelopes' state hash
  KEYS[2]  the stats hash
  ARGV[1]  envelope id
  ARGV[2]  the target state: credited, dead or pending

  Returns: {moved, previous}  moved 1 when the state changed; previous 'pending', 'credited', 'dead' or '' (unknown)
]]
--- @include "includes/red-envelope-pool"
local envKey = KEYS[1]
local statsKey = KEYS[2]
local envelopeId = ARGV[1]
local target = ARGV[2]

local names = {P = 'pending', C = 'credited', D = 'dead'}
local letters = {pending = 'P', credited = 'C', dead = 'D'}
local raw = redis.call('HGET', envKey, envelopeId)
if not raw then return {0, ''} end
local previous = names[string.sub(raw, 1, 1)]
if previous == target or previous == 'credited' then return {0, previous} end
local amount = tonumber(string.match(raw, '|(%d+)$'))
moveCounters(statsKey, previous, target, amount)
redis.call('HSET', envKey, envelopeId, letters[target] .. string.sub(raw, 2))
return {1, previous}
