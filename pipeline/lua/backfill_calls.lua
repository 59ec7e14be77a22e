-- Add calls recorded before the call index existed to their sessions' call indexes
-- (`aci-evidence reindex`, pipeline.call_index.reindex): a call whose record still exists is
-- added with its admission time (`t0`) unless it is there already (NX: admission's own entry
-- wins). One partition per call (all keys under one hash tag).
--
-- KEYS: per call 2: its call record, its session's call index
-- ARGV: per call 1: its tool call id
-- Reply: how many were added.
local added = 0
for c = 0, #ARGV - 1 do
  local call, idx, id = KEYS[1 + 2 * c], KEYS[2 + 2 * c], ARGV[1 + c]
  local kind = redis.call('TYPE', idx).ok
  if (kind == 'none' or kind == 'zset') and redis.call('TYPE', call).ok == 'hash' then
    local t0 = redis.call('HGET', call, 't0') or '0'
    added = added + redis.call('ZADD', idx, 'NX', tonumber(t0) or 0, id)
  end
end
return added
