--[[
  One call to a simulated payment channel, on its ledger entry for one payment
  reference, kept in Redis so that every instance of the service sees the same
  channel (as with a real provider). Every call is idempotent on the reference:
  - pay: the first records the outcome (success: paid; failure: declined;
    unknown: undetermined) and answers it; a repeat moves no money, counts the
    call and answers what the reference is;
  - query: the channel's own outcome 'unknown' (it cannot answer) changes
    nothing; a reference never paid is 'failure'; an undetermined one is
    settled by the outcome; then what the reference is;
  - reverse: 'failure' unless the reference is paid; a reference already given
    back is 'success'; else the outcome, and 'success' gives it back.
  The entry is kept for the retention time after its last call.

  KEYS[1]  the ledger entry of the reference (hash: amount, state, payCalls, refunds)
  ARGV[1]  the operation: pay, query or reverse
  ARGV[2]  the amount, minor units (pay)
  ARGV[3]  the channel's configured outcome for the operation: success, failure or unknown
  ARGV[4]  retention, ms

  Returns: the answer: 'success', 'failure' or 'unknown'
]]
local entryKey = KEYS[1]
local op = ARGV[1]
local amount = ARGV[2]
local outcome = ARGV[3]
local retentionMs = ARGV[4]
local STATE_OF = {success = 'paid', failure = 'declined', unknown = 'undetermined'}
local ANSWER_OF = {paid = 'success', declined = 'failure', undetermined = 'unknown'}

local state = redis.call('HGET', entryKey, 'state')
local function kept(answer)
  redis.call('PEXPIRE', entryKey, retentionMs)
  return answer
end

if op == 'pay' then
  if state then
    redis.call('HINCRBY', entryKey, 'payCalls', 1)
    return kept(ANSWER_OF[state])
  end
  redis.call('HSET', entryKey, 'amount', amount, 'state', STATE_OF[outcome], 'payCalls', 1, 'refunds', 0)
  return kept(outcome)
elseif op == 'query' then
  if outcome == 'unknown' then return 'unknown' end
  if not state then return 'failure' end
  if state == 'undetermined' then
    state = STATE_OF[outcome]
    redis.call('HSET', entryKey, 'state', state)
  end
  return kept(ANSWER_OF[state])
elseif op == 'reverse' then
  if state ~= 'paid' then return 'failure' end
  if redis.call('HGET', entryKey, 'refunds') ~= '0' then return kept('success') end
  if outcome == 'success' then redis.call('HSET', entryKey, 'refunds', 1) end
  return kept(outcome)
end
return redis.error_reply('ERR unknown channel operation')
