-- A worker takes a call (pipeline.cancel.mark_call builds the keys and arguments; issue 32):
-- before its source is called, one round trip marks the call hash with the attempt it runs
-- (`tk`, `ta`: what a client shows as "running, attempt k") and tells whether it may run.
-- Only the entry admission recorded for the call (`eid`) marks it; the mark is never written
-- on a call that is final or cancelled.
--
-- KEYS[1] the call hash  KEYS[2] the result hash
-- ARGV[1] entry id       ARGV[2] attempt        ARGV[3] now_ms
-- Reply: 1 run it (marked), 0 final already, 3 cancelled (its cancel was admitted), -1 not the
-- entry recorded for the call (nothing written), -2 a key of the wrong type (nothing written).
local recorded = redis.pcall('HMGET', KEYS[1], 'eid', 'cx')
if recorded.err then return -2 end
if recorded[1] ~= ARGV[1] then return -1 end
local final = redis.pcall('EXISTS', KEYS[2])
if type(final) == 'table' then return -2 end
if final == 1 then return 0 end
if recorded[2] then return 3 end
redis.call('HSET', KEYS[1], 'tk', ARGV[2], 'ta', ARGV[3])
return 1
