--[[
  The list-scan baseline's remove(value), for bench/delay-queue.ts only (not a
  production script): walks the list from its head in LRANGE chunks, unpacks
  every element and compares its value with ARGV[1]; the first match is
  removed from the list (LREM) and from the timeout zset (ZREM). O(n) in the
  item's position, all of it inside one script, so Redis serves nothing else
  meanwhile.

  KEYS[1]  list of packed values, in offer order
  KEYS[2]  timeout zset: packed value -> due time (ms)
  ARGV[1]  the value to remove, as offered (unpacked)
  ARGV[2]  elements per LRANGE chunk

  Returns: 1 removed, 0 not found
]]
local wanted = ARGV[1]
local chunk = tonumber(ARGV[2])
local from = 0
while true do
  local part = redis.call('LRANGE', KEYS[1], from, from + chunk - 1)
  if #part == 0 then return 0 end
  for _, packed in ipairs(part) do
    -- Layout 'dLc0': random id (double), value length, value bytes.
    local _, value = struct.unpack('dLc0', packed)
    if value == wanted then
      redis.call('LREM', KEYS[1], 1, packed)
      redis.call('ZREM', KEYS[2], packed)
      return 1
    end
  end
  from = from + chunk
end
