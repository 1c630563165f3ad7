-- Shared piece, inlined by the script loader: what every order script writes the same way.
--
--   --- @include "features/orders/includes/order-record"
--   local sets, err = orderClockFields(ARGV, from, {n, m}, 2, now)   -- the clock fields, checked first
--   appendOrderEvent(orderKey, eventsKey, eventType, maxLen, now)  -- the event of a change
--
-- Field values are stored verbatim; clock fields come as (name, ms added to the Redis clock) pairs.

--- The clock fields of each of `records` records as HSET arguments: `counts[i]` pairs for record i from
--- ARGV[from] on, each set to `now` plus its offset. Returns nil and an error reply when a count (nil: not a
--- decimal integer) or an offset is malformed.
local function orderClockFields(argv, from, counts, records, now)
  local total = 0
  for i = 1, records do
    if not counts[i] then return nil, redis.error_reply('ERR clock fields: the counts must be decimal integers') end
    total = total + counts[i]
  end
  if #argv ~= from - 1 + 2 * total then return nil, redis.error_reply('ERR clock fields: the counts must count the pairs that follow') end
  local sets = {}
  local at = from
  for i = 1, records do
    sets[i] = {}
    for _ = 1, counts[i] do
      local field, ms = argv[at], argv[at + 1]
      if not string.match(ms, '^%d+$') then return nil, redis.error_reply('ERR clock field offsets must be decimal integers >= 0') end
      sets[i][#sets[i] + 1] = field
      sets[i][#sets[i] + 1] = string.format('%d', now + tonumber(ms))
      at = at + 2
    end
  end
  return sets
end

--- Appends `eventType` with the order's public fields after the write to the shard's stream (MAXLEN ~ maxLen).
local function appendOrderEvent(orderKey, eventsKey, eventType, maxLen, now)
  local names = {'orderId', 'merchantId', 'merchantOrderNo', 'amount', 'currency', 'status', 'version', 'expiresAt', 'accountId', 'paidPlan', 'closeReason'}
  local values = redis.call('HMGET', orderKey, unpack(names))
  local entry = {'type', eventType, 'at', string.format('%d', now)}
  for i, name in ipairs(names) do
    if values[i] and values[i] ~= '' then
      entry[#entry + 1] = name
      entry[#entry + 1] = values[i]
    end
  end
  redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', unpack(entry))
end
