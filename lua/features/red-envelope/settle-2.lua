--[[
  Moves grabbed envelopes of one sub-pool between crediting states: to
  'credited' once the wallet holds them, to 'dead' when their grab was
  dead-lettered, back to 'pending' when ops re-drive them. The counters move
  with each envelope, once: a repeated call changes nothing. Many envelopes in
  one call (the crediting settles what it credited in one turn together) move
  the counters once per state left.

  KEYS[1]  the envelopes' state hash
  KEYS[2]  the stats hash
  ARGV[1]  the target state: credited, dead or pending
  ARGV[2…] envelope ids

  Returns: {moved, previous, moved, previous, …} one pair per envelope id, in order: moved 1 when its state changed;
           previous 'pending', 'credited', 'dead' or '' (unknown)
]]
local envKey = KEYS[1]
local statsKey = KEYS[2]
local target = ARGV[1]

local names = {P = 'pending', C = 'credited', D = 'dead'}
local letters = {pending = 'P', credited = 'C', dead = 'D'}
-- Per state left: {count, amount}.
local left = {}
local movedCount, movedAmount = 0, 0
local out = {}
for i = 2, #ARGV do
  local envelopeId = ARGV[i]
  local raw = redis.call('HGET', envKey, envelopeId)
  local previous = raw and names[string.sub(raw, 1, 1)] or ''
  if not raw or previous == target or previous == 'credited' then
    out[#out + 1] = 0
  else
    local amount = tonumber(string.match(raw, '|(%d+)$'))
    local l = left[previous] or {0, 0}
    l[1], l[2] = l[1] + 1, l[2] + amount
    left[previous] = l
    movedCount, movedAmount = movedCount + 1, movedAmount + amount
    redis.call('HSET', envKey, envelopeId, letters[target] .. string.sub(raw, 2))
    out[#out + 1] = 1
  end
  out[#out + 1] = previous
end
for from, l in pairs(left) do
  redis.call('HINCRBY', statsKey, from .. 'Count', -l[1])
  redis.call('HINCRBY', statsKey, from .. 'Amount', -l[2])
end
if movedCount > 0 then
  redis.call('HINCRBY', statsKey, target .. 'Count', movedCount)
  redis.call('HINCRBY', statsKey, target .. 'Amount', movedAmount)
end
return out
