-- Put an invocation entry back at the end of its stream (pipeline.consumer.requeue builds the
-- keys and arguments): a worker does this with an entry of a session that already holds its
-- share of the worker's slots while other sessions' entries wait (workers.runtime.share). The
-- entry is copied to a new id, the call record is pointed at it, and the old one is acked and
-- deleted, at once; an entry that is not its call's, or whose call is final, is only acked.
-- Only workers write these keys.
--
-- KEYS[1] invocations   KEYS[2] call        KEYS[3] result
-- ARGV[1] group         ARGV[2] entry id
-- Reply: the new entry id, or '' when it was only acked.
local function drop()
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  return ''
end
if redis.call('HGET', KEYS[2], 'eid') ~= ARGV[2] then return drop() end
if redis.call('EXISTS', KEYS[3]) == 1 then return drop() end
local found = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #found == 0 then return drop() end
local new = redis.call('XADD', KEYS[1], '*', unpack(found[1][2]))
redis.call('HSET', KEYS[2], 'eid', new)
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return new
