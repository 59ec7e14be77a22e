-- Cancel a batch of calls of one partition (pipeline.cancel.cancel_calls builds the keys and
-- arguments), run by a worker's admission for each cancel request it admitted (issue 32). The
-- cancel names its call by (session, tool call id) and carries the scope key of the envelope it
-- was sent with: only a call of that scope is cancelled (the same check as a result's), so a
-- cancel for an id another scope holds changes nothing.
--
-- Per call: its cancel mark `cx` is set on the call hash (admit.lua set it already, in the step
-- that acked the cancel: kept, so `cx` says when the cancel was admitted), and, unless a result
-- exists already
-- (a finish won the race: nothing changes), the call is finished here as ERROR/CANCELLED, once,
-- exactly as finish.lua finishes a call (result hash, raw answer, both views, lifecycle entry),
-- with one of two prebuilt sets of views: "before it ran" or, when a worker has taken it (`tk`),
-- "while it ran". The invocation entry is not acked here: the worker that reads it (or runs it)
-- finds the call final and only acks it; a running worker finds the mark and stops its source.
--
-- KEYS[1] lifecycle     the partition's lifecycle stream
-- then per call 5: the call hash, the session's model view stream, its control view stream,
--   the result hash, the raw answer key
-- ARGV[1] now_ms        ARGV[2] retention_ms  ARGV[3] stream maxlen ARGV[4] calls n
-- then per call 11: scope key, session, tool call id, tool, evidence status, then the result,
--   model view and control view before it ran, then the same while it ran
-- Reply: per call 1 cancelled now, 0 already final, 2 another scope's call (or none), -2 a key
-- of the wrong type (nothing written); or {-2} (the lifecycle stream of the wrong type).
local function wrong(key, kind)
  local found = redis.call('TYPE', key).ok
  return found ~= 'none' and found ~= kind
end
if wrong(KEYS[1], 'stream') then return {-2} end
local n = tonumber(ARGV[4])
local now, keep, maxlen = ARGV[1], ARGV[2], ARGV[3]
local replies = {}
for c = 0, n - 1 do
  local k, a = 2 + 5 * c, 5 + 11 * c
  local call, model, control, result, raw = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3],
    KEYS[k + 4]
  local sk, session, id, tool, evidence = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
    ARGV[a + 4]
  local recorded = nil
  if not (wrong(model, 'stream') or wrong(control, 'stream') or wrong(result, 'hash')) then
    recorded = redis.pcall('HMGET', call, 'sk', 'eid', 'tk', 'cx')
  end
  if not recorded or recorded.err then
    replies[#replies + 1] = -2
  elseif recorded[1] ~= sk then
    replies[#replies + 1] = 2
  elseif redis.call('EXISTS', result) == 1 then
    replies[#replies + 1] = 0
  else
    local v = a + 5
    if recorded[3] then v = a + 8 end
    if not recorded[4] then redis.call('HSET', call, 'cx', now) end
    local mid = redis.call('XADD', model, 'MAXLEN', '~', maxlen, '*', 'id', id,
      'd', ARGV[v + 1], 'sk', sk)
    local cid = redis.call('XADD', control, 'MAXLEN', '~', maxlen, '*', 'id', id,
      'd', ARGV[v + 2], 'sk', sk)
    redis.call('HSET', result, 'st', 'ERROR', 'ev', evidence, 'res', ARGV[v], 't1', now,
      'sk', sk, 'mid', mid, 'cid', cid)
    redis.call('PEXPIRE', result, keep)
    redis.call('SET', raw, 'null', 'PX', keep)
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'session', session, 'id', id,
      'tool', tool, 'status', 'ERROR', 'evidence', evidence, 'at', now, 'eid', recorded[2] or '')
    redis.call('PEXPIRE', call, keep)
    redis.call('PEXPIRE', model, keep)
    redis.call('PEXPIRE', control, keep)
    replies[#replies + 1] = 1
  end
end
return replies
