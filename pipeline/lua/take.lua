-- Take a batch of requests for admission (pipeline.admission.take_call builds the keys and
-- arguments). The request stream is the one key a submitter may write, so nothing about it is
-- trusted: its type is checked before anything else, the admission group is created when it is
-- missing (the stream was trimmed to nothing or never existed), and an entry that is not one
-- field `d` of at most ARGV[4] bytes in all is refused here, inside Redis (acked, deleted and
-- dead-lettered without its data): an oversized request never reaches a worker's memory.
-- Entries another admitter took and left idle longer than ARGV[5] ms (it died between taking
-- and admitting) are taken over first; admitting twice is harmless (admission is idempotent).
-- XADD may name any id above the stream's last, so a submitter can append at the end of the id
-- space (`18446744073709551615-18446744073709551615`), after which no `XADD *` succeeds
-- ("exhausted"), for every session of the partition. No clock writes a millisecond part of 20
-- digits (10^19 ms is 317 million years away): a take that hands over nothing and finds the
-- stream empty with such a last id sets it, and the group's, back to the start.
--
-- KEYS[1] requests      the partition's request stream (group ARGV[1])
-- KEYS[2] dead          the partition's dead-letter stream (eid, reason)
-- ARGV[1] group         ARGV[2] consumer      ARGV[3] count        ARGV[4] max bytes
-- ARGV[5] min idle ms   ARGV[6] dead maxlen  ARGV[7] byte budget of the reply
-- Reply: {refused count, entry id, envelope, entry id, envelope, ...}; {-1} when the request
-- key is not a stream (nothing done).
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then return {0} end
if kind ~= 'stream' then return {-1} end
local want = tonumber(ARGV[3])
local entries = {}
local claimed = redis.pcall('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[5], '0-0',
  'COUNT', want)
if claimed.err then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0')
else
  for _, e in ipairs(claimed[2]) do entries[#entries + 1] = e end
end
local max = tonumber(ARGV[4])
local budget = tonumber(ARGV[7])
local out = {0}
local refused = {}
local bytes = 0
local function keep(e)
  local f = e[2]
  if f and #f == 2 and f[1] == 'd' and #f[2] <= max then
    out[#out + 1] = e[1]
    out[#out + 1] = f[2]
    bytes = bytes + #f[2]
  else
    refused[#refused + 1] = e[1]
  end
end
for _, e in ipairs(entries) do keep(e) end
-- New entries, 16 at a time, until the count or the byte budget is reached: what a worker
-- receives from one take is at most the budget plus 16 requests of the size bound.
local taken = #entries
while taken < want and bytes < budget do
  local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT',
    math.min(16, want - taken), 'STREAMS', KEYS[1], '>')
  if not read then break end
  for _, e in ipairs(read[1][2]) do
    keep(e)
    taken = taken + 1
  end
end
if #refused > 0 then
  redis.call('XACK', KEYS[1], ARGV[1], unpack(refused))
  redis.call('XDEL', KEYS[1], unpack(refused))
  for _, eid in ipairs(refused) do
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'eid', eid,
      'reason', 'not a request of at most the size bound')
  end
  out[1] = #refused
end
if #out == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  local length, last = nil, ''
  for i = 1, #info, 2 do
    if info[i] == 'length' then length = info[i + 1]
    elseif info[i] == 'last-generated-id' then last = info[i + 1] end
  end
  if length == 0 and #string.match(last, '^%d*') >= 20 then
    if redis.pcall('XSETID', KEYS[1], '0-1', 'MAXDELETEDID', '0-1').err then
      redis.call('XSETID', KEYS[1], '0-1')  -- Redis 6.2: no MAXDELETEDID
    end
    redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], '0')
  end
end
return out
