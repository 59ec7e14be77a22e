-- Admit a batch of requests (pipeline.admission.admit_call builds the keys and arguments): the
-- trusted half of a submit, run by a worker. Every key named here but the request stream is
-- written only by workers; the types of all of them that the step may write (the request and
-- dead-letter streams only when it acks or refuses a request) are checked before the first
-- write, so the script either runs whole or writes nothing.
--
-- Per call, idempotent per (session, tool call id) *and scope*: a call record that exists with
-- the same scope key is the same call (reply 0, nothing written); with another scope key it is
-- a conflict (reply 2, nothing written: the submitter answers its call DUPLICATE_TOOL_CALL_ID
-- from the call record, never with the first call's evidence). A new call (reply: its entry id)
-- gets its
-- record, its invocation entry, a PROJECTING lifecycle entry, its place in the sessions index,
-- and the first tool call id of its scope fingerprint in the session is recorded (so
-- `duplicate_of` is decided by admission order, atomically). Then every request of the batch,
-- admitted or not, is acked and deleted; refused ones are dead-lettered with their reason.
--
-- The session's call index (`{tag}:calls:<session>`, a sorted set: tool call id -> admission
-- ms; pipeline.keys.Partition.calls) is written in the same step, so a call record never
-- exists without its index entry: the console, `replay` and `export` list a session's calls
-- from it. Its name is built here from the fingerprint hash's (same partition tag, so the
-- same slot; no KEYS layout change). It has no expiry while its session admits (PERSIST);
-- a member leaves only when its call record is gone (never by age: an in-flight call's
-- record never expires): here, the session's two oldest members whose record is gone, once a
-- batch, and by the janitor (pipeline.trim) when the session leaves the sessions index.
-- `{tag}:calls-ready` says that every call of the partition is indexed: set here on the
-- partition's first admission ever (no lifecycle stream yet), else by `aci-evidence reindex`;
-- without it readers also SCAN (calls recorded before the index existed).
--
-- A cancel request (issue 32; ARGV cancel flag '1') is durable the moment it is acked: in this
-- same step the call record of its scope gets the cancel mark `cx` — a new call is recorded
-- with it, a known call of the same scope key gets it unless it is final (its result hash
-- exists) or marked already; a conflict (another scope's call) gets nothing. Finishing the call
-- ERROR/CANCELLED is `cancel.lua`'s, one round trip later; if that never runs (its worker died),
-- whoever meets the call next finishes it so: `mark.lua` refuses to run it, a running worker's
-- poll of `cx` stops it, a takeover's `mark.lua` refuses it. The result hash's name is built
-- from the call hash's (same partition tag, same slot), as the index's is; only EXISTS
-- reads it, which no type refuses.
--
-- KEYS[1] requests      KEYS[2] invocations   KEYS[3] lifecycle    KEYS[4] sessions (zset)
-- KEYS[5] dead          then per call: the call hash, the session's fingerprint hash
-- ARGV[1] group         ARGV[2] now_ms        ARGV[3] stream maxlen ARGV[4] retention_ms
-- ARGV[5] calls n       ARGV[6] refused m
-- then per call 8: request id ('' for a call its trusted client admits itself,
--   pipeline.admit_here: no request to ack), envelope, session, tool call id, tool, fingerprint or '', scope key,
--   cancel ('1' for a cancel request, else '')
-- then per refused 4: request id, reason, session or '', tool call id or ''
-- Reply: per call 0 (known), 2 (conflict) or the new invocation entry's id (admitted); or
-- {-1, index of the first key of a wrong type} (nothing written).
local n, m = tonumber(ARGV[5]), tonumber(ARGV[6])
-- A partition key is checked when this step may write it: the request stream only when a
-- request is acked (a refusal, or a call with a request id: not a client's own admission,
-- which has no request), the dead-letter stream only for a refusal.
local acks = m > 0
for c = 0, n - 1 do
  if acks then break end
  acks = ARGV[7 + 8 * c] ~= ''
end
local kinds = {'stream', 'stream', 'stream', 'zset', 'stream'}
local used = {acks, true, true, true, m > 0}
local found = {}
for i = 1, 5 do
  if used[i] then
    local kind = redis.call('TYPE', KEYS[i]).ok
    if kind ~= 'none' and kind ~= kinds[i] then return {-1, i} end
    found[i] = kind
  end
end
-- Each call hash is read here (a hash of the wrong type fails the read: nothing is written
-- yet); a session's fingerprint hash, named once per call, is checked once.
local known, checked, marked = {}, {}, {}
local tag = string.sub(KEYS[4], 1, #KEYS[4] - #':sessions')
local function index_of(fps)  -- `{tag}:fp:<session>` -> `{tag}:calls:<session>`
  return tag .. ':calls:' .. string.sub(fps, #tag + #':fp:' + 1)
end
local function result_of(call)  -- `{tag}:call:<session>:<id>` -> `{tag}:res:<session>:<id>`
  return tag .. ':res:' .. string.sub(call, #tag + #':call:' + 1)
end
for c = 0, n - 1 do
  local call, fps = KEYS[6 + 2 * c], KEYS[7 + 2 * c]
  if known[call] == nil then
    local found = redis.pcall('HMGET', call, 'eid', 'sk', 'cx')
    if found.err then return {-1, 6 + 2 * c} end
    known[call] = found[1] and (found[2] or '') or false  -- its scope key, or false: new
    marked[call] = found[3] and true or false
  end
  if not checked[fps] then
    checked[fps] = true
    local kind = redis.call('TYPE', fps).ok
    if kind ~= 'none' and kind ~= 'hash' then return {-1, 7 + 2 * c} end
    kind = redis.call('TYPE', index_of(fps)).ok  -- the session's call index, named by fps
    if kind ~= 'none' and kind ~= 'zset' then return {-1, 7 + 2 * c} end
  end
end
if n > 0 and found[3] == 'none' then
  -- Nothing was ever admitted here: every call of the partition will be indexed.
  redis.call('SET', tag .. ':calls-ready', ARGV[2], 'NX')
end
local replies = {}
local ids = {}
local renewed, indexed = {}, {}  -- per session, once a batch: fingerprints' expiry, index
-- The new calls' index entries, one ZADD per session's index per batch (in the order the
-- indexes were first met), once every call of the batch is recorded: the same members and
-- scores as a ZADD per call, and still in this step, so no record is seen without its entry.
local entries, order = {}, {}
for c = 0, n - 1 do
  local a = 7 + 8 * c
  local call, fps = KEYS[6 + 2 * c], KEYS[7 + 2 * c]
  local rid, env, session, id, tool, fp, sk, cancel =
    ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6],
    ARGV[a + 7] == '1'
  if rid ~= '' then ids[#ids + 1] = rid end  -- '': admitted by its own client (admit_here)
  if known[call] then
    local same = known[call] == sk
    if same and cancel and not marked[call]
        and redis.call('EXISTS', result_of(call)) == 0 then
      redis.call('HSET', call, 'cx', ARGV[2])  -- the cancel's mark, in the step that acks it
      marked[call] = true
    end
    replies[#replies + 1] = same and 0 or 2
  else
    local dup = ''
    if fp ~= '' then
      local first = redis.call('HGET', fps, fp)
      if first and first ~= id then dup = first
      elseif not first then redis.call('HSET', fps, fp, id) end
      if not renewed[fps] then
        redis.call('PEXPIRE', fps, ARGV[4])
        renewed[fps] = true
      end
    end
    local eid = redis.call('XADD', KEYS[2], '*', 'd', env, 'dup', dup, 'sk', sk)
    redis.call('HSET', call, 'st', 'PROJECTING', 'eid', eid, 'inv', env, 't0', ARGV[2],
      'tool', tool, 'dup', dup, 'fp', fp, 'sk', sk)
    if cancel then  -- a cancel admitted as its call: recorded cancelled, never run
      redis.call('HSET', call, 'cx', ARGV[2])
      marked[call] = true
    end
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'session', session, 'id', id,
      'tool', tool, 'status', 'PROJECTING', 'at', ARGV[2], 'eid', eid)
    local idx = index_of(fps)
    if not indexed[fps] then
      redis.call('ZADD', KEYS[4], ARGV[2], session)
      indexed[fps] = true
      -- Its two oldest members whose call record is gone (expired) leave the index.
      local head = string.sub(call, 1, #call - #id)  -- `{tag}:call:<session>:`
      for _, old in ipairs(redis.call('ZRANGE', idx, 0, 1)) do
        if old ~= id and redis.call('EXISTS', head .. old) == 0 then
          redis.call('ZREM', idx, old)
        end
      end
      redis.call('PERSIST', idx)
      entries[idx] = {}
      order[#order + 1] = idx
    end
    local add = entries[idx]
    add[#add + 1] = ARGV[2]
    add[#add + 1] = id
    known[call] = sk
    replies[#replies + 1] = eid
  end
end
for _, idx in ipairs(order) do redis.call('ZADD', idx, unpack(entries[idx])) end
local r = 7 + 8 * n
for j = 0, m - 1 do
  local b = r + 4 * j
  ids[#ids + 1] = ARGV[b]
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[3], '*', 'eid', ARGV[b],
    'reason', ARGV[b + 1], 'session', ARGV[b + 2], 'id', ARGV[b + 3])
end
if #ids > 0 then
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
  redis.call('XDEL', KEYS[1], unpack(ids))
end
return replies
