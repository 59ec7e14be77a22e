-- Trim one session's call index (`{tag}:calls:<session>`, written by admit.lua) to its live
-- calls, and give it the lifetime of its longest-living call record: run by the janitor
-- (pipeline.call_index.prune_sessions) when the session leaves the sessions index, and by
-- `aci-evidence reindex` after a backfill. Idempotent; safe at any time, also while the
-- session admits (a member leaves only when its call record is gone: an in-flight call's
-- record has no expiry, so neither has the index while one is in flight).
--
-- KEYS[1] the call index   KEYS[2] the partition's sessions index (or '' to leave it)
-- ARGV[1] the session's call key head `{tag}:call:<session>:`
-- ARGV[2] the session      ARGV[3] cutoff ms: the session leaves the sessions index when its
--                          last admission is not newer (it may have admitted meanwhile)
-- Reply: the members left.
if redis.call('TYPE', KEYS[1]).ok == 'zset' then
  local longest, forever = 0, false
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local ttl = redis.call('PTTL', ARGV[1] .. id)
    if ttl == -2 then redis.call('ZREM', KEYS[1], id)
    elseif ttl == -1 then forever = true
    elseif ttl > longest then longest = ttl end
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then
    if forever then redis.call('PERSIST', KEYS[1])
    else redis.call('PEXPIRE', KEYS[1], longest) end
  end
end
if KEYS[2] ~= '' and redis.call('TYPE', KEYS[2]).ok == 'zset' then
  local score = redis.call('ZSCORE', KEYS[2], ARGV[2])
  if score and tonumber(score) <= tonumber(ARGV[3]) then redis.call('ZREM', KEYS[2], ARGV[2]) end
end
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return 0 end
return redis.call('ZCARD', KEYS[1])
