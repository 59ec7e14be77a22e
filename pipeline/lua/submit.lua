-- Submit one invocation (pipeline.record.submit_call builds the keys and arguments).
--
-- Idempotent per (session, tool call id) *and scope*. A repeat with the same scope key (the
-- normalised scope's fingerprint, or a hash of tool and arguments when they do not decode) is
-- the same call: the stored one answers it. A repeat with another scope is a conflict (reply
-- 2): the new call is answered with DUPLICATE_TOOL_CALL_ID, never with the first call's
-- evidence. The first submission of a scope fingerprint in a session is recorded, so
-- `duplicate_of` is decided by submission order, atomically.
--
-- KEYS[1] call          the call hash (st, eid, inv, t0, tool, dup, fp, sk)
-- KEYS[2] invocations   the partition's invocation stream (entry fields d, dup)
-- KEYS[3] lifecycle     the partition's lifecycle stream
-- KEYS[4] fingerprints  the session's scope fingerprint -> first tool call id hash
-- KEYS[5] sessions      the partition's session index (zset scored by last submit)
-- ARGV[1] envelope      ARGV[2] now_ms        ARGV[3] session      ARGV[4] tool_call_id
-- ARGV[5] tool          ARGV[6] fingerprint or ''                  ARGV[7] stream maxlen
-- ARGV[8] retention_ms  ARGV[9] scope key
-- Reply: {1, entry id} submitted, {0, entry id} known (same scope), {2, entry id} conflict.
local known = redis.call('HMGET', KEYS[1], 'eid', 'sk')
if known[1] then
  if known[2] == ARGV[9] then return {0, known[1]} end
  return {2, known[1]}
end
local dup = ''
if ARGV[6] ~= '' then
  local first = redis.call('HGET', KEYS[4], ARGV[6])
  if first and first ~= ARGV[4] then dup = first
  elseif not first then redis.call('HSET', KEYS[4], ARGV[6], ARGV[4]) end
  redis.call('PEXPIRE', KEYS[4], ARGV[8])
end
local eid = redis.call('XADD', KEYS[2], '*', 'd', ARGV[1], 'dup', dup)
redis.call('HSET', KEYS[1], 'st', 'PROJECTING', 'eid', eid, 'inv', ARGV[1], 't0', ARGV[2],
  'tool', ARGV[5], 'dup', dup, 'fp', ARGV[6], 'sk', ARGV[9])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'session', ARGV[3], 'id', ARGV[4],
  'tool', ARGV[5], 'status', 'PROJECTING', 'at', ARGV[2], 'eid', eid)
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[3])
return {1, eid}
