--[[
  Reads one master order and, optionally, one of its payment plans, with the
  Redis clock, so a caller decides on one consistent snapshot and then writes
  with the versions it saw (see write-4).

  KEYS[1]  order hash
  KEYS[2]  plan hash (a key that does not exist when no plan is wanted)
  ARGV  none

  Returns: {now, orderFields, planFields}
    now          the Redis clock, epoch ms
    orderFields  the order hash as a flat field/value list (empty when there is no order)
    planFields   the plan hash likewise
]]
--- @include "platform/includes/server-time-ms"
local orderKey = KEYS[1]
local planKey = KEYS[2]
return {serverTimeMs(), redis.call('HGETALL', orderKey), redis.call('HGETALL', planKey)}
