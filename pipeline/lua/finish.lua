-- Finish one invocation (pipeline.record.finish_call builds the keys and arguments).
--
-- The final result (its own key, written only here), the raw upstream answer (its own key,
-- for workers and auditors), both views and the ack become visible together, once. Only the
-- stream entry the submit recorded for the call may finish it, and only with the scope the
-- submit recorded (the worker recomputes the scope key from the envelope it ran): any other
-- entry (an envelope XADDed for someone else's call, for a call that does not exist, or one
-- whose call record was rewritten to point at it) is dead-lettered and acked (reply -1). An
-- empty scope key skips the scope check: an envelope that could not be decoded only ever
-- finishes its call as ERROR. The scope key is also published with the result (`sk` in the
-- result hash and both view stream entries), so every reader can refuse a result that is not
-- of the scope it asked. A second finisher (a racing or resumed
-- worker) only acks (reply 0).
--
-- KEYS[1] call          the call hash (read: eid, sk)
-- KEYS[2] invocations   the partition's invocation stream (acked)
-- KEYS[3] model         the session's model view stream (id, d, sk)
-- KEYS[4] control       the session's control view stream (id, d, sk)
-- KEYS[5] lifecycle     the partition's lifecycle stream
-- KEYS[6] result        the result hash (st, ev, res, t1, sk, and the view entries mid, cid)
-- KEYS[7] raw           the raw upstream answer (a string)
-- KEYS[8] dead          the partition's dead-letter stream (eid, reason, session, id)
-- ARGV[1] group         ARGV[2] entry id      ARGV[3] status       ARGV[4] evidence status
-- ARGV[5] result        ARGV[6] raw           ARGV[7] model view   ARGV[8] control view
-- ARGV[9] now_ms        ARGV[10] retention_ms ARGV[11] session     ARGV[12] tool_call_id
-- ARGV[13] tool         ARGV[14] stream maxlen                     ARGV[15] scope key or ''
-- ARGV[16] '1' to renew the expiry of the session's view streams, '' when a later finish of
--          the same batch does
-- Reply: 1 applied, 0 already final (only acked), -1 refused (dead-lettered and acked).
local call = redis.call('HMGET', KEYS[1], 'eid', 'sk')
local refused = nil
if call[1] ~= ARGV[2] then refused = 'not the entry recorded for this call'
elseif ARGV[15] ~= '' and call[2] ~= ARGV[15] then
  refused = 'not the scope recorded for this call'
end
if refused then
  redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[14], '*', 'eid', ARGV[2],
    'reason', refused, 'session', ARGV[11], 'id', ARGV[12])
  redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
  return -1
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
  return 0
end
-- Each view is kept once, on its stream; the result hash names the two entries (mid, cid).
local mid = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[14], '*', 'id', ARGV[12],
  'd', ARGV[7], 'sk', ARGV[15])
local cid = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[14], '*', 'id', ARGV[12],
  'd', ARGV[8], 'sk', ARGV[15])
redis.call('HSET', KEYS[6], 'st', ARGV[3], 'ev', ARGV[4], 'res', ARGV[5], 't1', ARGV[9],
  'sk', ARGV[15], 'mid', mid, 'cid', cid)
redis.call('SET', KEYS[7], ARGV[6], 'PX', ARGV[10])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[14], '*', 'session', ARGV[11], 'id', ARGV[12],
  'tool', ARGV[13], 'status', ARGV[3], 'evidence', ARGV[4], 'at', ARGV[9], 'eid', ARGV[2])
redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[10])
redis.call('PEXPIRE', KEYS[6], ARGV[10])
if ARGV[16] ~= '' then  -- once per session per finish batch (the last of its finishes)
  redis.call('PEXPIRE', KEYS[3], ARGV[10])
  redis.call('PEXPIRE', KEYS[4], ARGV[10])
end
return 1
