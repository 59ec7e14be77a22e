-- Finish a batch of invocations of one partition (pipeline.record.finish_calls builds the keys
-- and arguments): one script per partition per finish batch, so the per-script cost of Redis
-- (the script's call, its KEYS and ARGV tables) is paid once per batch, not once per call.
--
-- Per call: the final result (its own key, written only here), the raw upstream answer (its
-- own key, for workers and auditors), both views and the ack become visible together, once.
-- Only the stream entry admission recorded for the call may finish it, and only with the scope
-- admission recorded (the worker recomputes the scope key from the envelope it ran): any other
-- entry (an envelope XADDed for someone else's call, for a call that does not exist, or one
-- whose call record was rewritten to point at it) is dead-lettered and acked (reply -1). An
-- empty scope key skips the scope check: an envelope that could not be decoded only ever
-- finishes its call as ERROR. The scope key is also published with the result (`sk` in the
-- result hash and both view stream entries), so every reader can refuse a result that is not
-- of the scope it asked. A second finisher (a racing or resumed worker) only acks (reply 0).
-- Every key named here is written only by workers; a key of the wrong type (an operator's hand,
-- a bug) is still found before anything of its call is written: the partition's streams once
-- per batch (reply {-2}: nothing written), each session's view streams once per batch and each
-- call hash per call (reply -2 for that call: nothing written, not acked, left pending for
-- takeover), so the script never stops halfway. The view streams' expiry is renewed once per
-- session per batch; every other entry of the batch is acked by one XACK at the end.
--
-- KEYS[1] invocations   the partition's invocation stream (acked)
-- KEYS[2] lifecycle     the partition's lifecycle stream
-- KEYS[3] dead          the partition's dead-letter stream (eid, reason, session, id)
-- then per call 5: the call hash (read: eid, sk), the session's model view stream (id, d, sk),
--   its control view stream, the result hash (st, ev, res, t1, sk, and the view entries mid,
--   cid), the raw upstream answer (a string)
-- ARGV[1] group         ARGV[2] now_ms        ARGV[3] retention_ms ARGV[4] stream maxlen
-- ARGV[5] calls n
-- then per call 11: entry id, status, evidence status, result, raw, model view, control view,
--   session, tool_call_id, tool, the scope key or ''
-- Reply: per call 1 applied, 0 already final (only acked), -1 refused (dead-lettered, acked),
-- -2 a key of the wrong type (left pending); or {-2} (a partition stream of the wrong type).
local function wrong(key, kind)
  local found = redis.call('TYPE', key).ok
  return found ~= 'none' and found ~= kind
end
if wrong(KEYS[1], 'stream') or wrong(KEYS[2], 'stream') or wrong(KEYS[3], 'stream') then
  return {-2}
end
local n = tonumber(ARGV[5])
local now, keep, maxlen = ARGV[2], ARGV[3], ARGV[4]
local replies, ids, renewed, views = {}, {}, {}, {}
for c = 0, n - 1 do
  local k, a = 4 + 5 * c, 6 + 11 * c
  local call, model, control, result, raw = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3],
    KEYS[k + 4]
  local eid, status, evidence, session, id = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 7],
    ARGV[a + 8]
  local sk = ARGV[a + 10]
  if views[model] == nil then
    views[model] = not (wrong(model, 'stream') or wrong(control, 'stream'))
  end
  local recorded = views[model] and redis.pcall('HMGET', call, 'eid', 'sk')
  local refused = nil
  if not recorded or recorded.err then refused = false
  elseif recorded[1] ~= eid then refused = 'not the entry recorded for this call'
  elseif sk ~= '' and recorded[2] ~= sk then refused = 'not the scope recorded for this call'
  end
  if refused == false then
    replies[#replies + 1] = -2
  elseif refused then
    ids[#ids + 1] = eid
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', maxlen, '*', 'eid', eid, 'reason', refused,
      'session', session, 'id', id)
    replies[#replies + 1] = -1
  elseif redis.call('EXISTS', result) == 1 then
    ids[#ids + 1] = eid
    replies[#replies + 1] = 0
  else
    ids[#ids + 1] = eid
    -- Each view is kept once, on its stream; the result hash names the two entries (mid, cid).
    local mid = redis.call('XADD', model, 'MAXLEN', '~', maxlen, '*', 'id', id,
      'd', ARGV[a + 5], 'sk', sk)
    local cid = redis.call('XADD', control, 'MAXLEN', '~', maxlen, '*', 'id', id,
      'd', ARGV[a + 6], 'sk', sk)
    redis.call('HSET', result, 'st', status, 'ev', evidence, 'res', ARGV[a + 3], 't1', now,
      'sk', sk, 'mid', mid, 'cid', cid)
    redis.call('PEXPIRE', result, keep)
    redis.call('SET', raw, ARGV[a + 4], 'PX', keep)
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxlen, '*', 'session', session, 'id', id,
      'tool', ARGV[a + 9], 'status', status, 'evidence', evidence, 'at', now, 'eid', eid)
    redis.call('PEXPIRE', call, keep)
    if not renewed[model] then
      renewed[model] = true
      redis.call('PEXPIRE', model, keep)
      redis.call('PEXPIRE', control, keep)
    end
    replies[#replies + 1] = 1
  end
end
if #ids > 0 then redis.call('XACK', KEYS[1], ARGV[1], unpack(ids)) end
return replies
