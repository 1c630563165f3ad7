--[[
  Records that a user started an action (again: one record per action type,
  the newest start wins). The record lives in the account's inbox meta hash,
  so the reminder's write (write-7.lua) checks and ends it atomically.

  KEYS[1]  the account's inbox meta hash
  ARGV[1]  pending-action field (pa:<bizType>)
  ARGV[2]  this start's action id
  ARGV[3]  retention, ms (how long an inactive account's keys live)

  Returns: 1 (always: the record is written)
]]
local metaKey = KEYS[1]
local pendingField = ARGV[1]
local actionId = ARGV[2]
local retentionMs = tonumber(ARGV[3])
redis.call('HSET', metaKey, pendingField, actionId)
redis.call('PEXPIRE', metaKey, retentionMs)
return 1
