-- ack.lua: remove handled alarms, but only those still leased by the claim that handled them.
-- KEYS[1]  the shard's alarm sorted set
-- KEYS[2]  the shard's attempt counts
-- KEYS[3]  the shard's in-flight count
-- ARGV[1]  the lease score the batch was claimed with
-- ARGV[2..] the object ids to acknowledge
-- Returns  how many alarms were removed. An id whose score changed to a whole ms was re-armed
--          by its object while it was handled: the new alarm stays, and its attempts restart.
--          An id with another fractional score was re-claimed by another scheduler: untouched,
--          and still in flight if it has an attempt count (re-claimed after its lease ran out);
--          without one it was re-armed and claimed fresh since, so this batch's flight ended.
--          Every flight that ends here leaves the in-flight count.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and s:match('^%-?%d+$') ~= nil end
local function num(s) return type(s) == 'string' and #s <= 40 and s:match('^%-?%d+%.?%d*$') ~= nil end
if not num(ARGV[1]) then
  return redis.error_reply('ERR ack.lua: the lease score must be a number')
end
-- The members still holding the lease score, found with one range read rather than a ZSCORE
-- per id. Another claim could share the score by chance: only ids of this batch are removed.
local held = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])) do
  held[id] = true
end
local remove, forget, others = {}, {}, {}
local ended = 0 -- flights of this batch that ended with nothing here to forget
for i = 2, #ARGV do
  local id = ARGV[i]
  if held[id] then
    remove[#remove + 1] = id
    forget[#forget + 1] = id
  else
    others[#others + 1] = id
  end
end
-- The rest were removed or re-armed by their object (a domain transition that also clears the
-- alarm leaves nothing to remove: the common case), or re-claimed by another scheduler. One
-- ZMSCORE per thousand ids tells them apart, not one ZSCORE each.
for i = 1, #others, 1000 do
  local last = math.min(i + 999, #others)
  local scores = redis.call('ZMSCORE', KEYS[1], unpack(others, i, last))
  for j = i, last do
    local score = scores[j - i + 1]
    if not score or tonumber(score) % 1 == 0 then
      forget[#forget + 1] = others[j]
    elseif redis.call('HEXISTS', KEYS[2], others[j]) == 0 then
      ended = ended + 1
    end
  end
end
-- Variadic calls in chunks: unpack takes at most a few thousand values (Lua's C stack).
for i = 1, #remove, 1000 do
  redis.call('ZREM', KEYS[1], unpack(remove, i, math.min(i + 999, #remove)))
end
for i = 1, #forget, 1000 do
  redis.call('HDEL', KEYS[2], unpack(forget, i, math.min(i + 999, #forget)))
end
ended = ended + #forget
-- Never below zero (flights counted before the count existed end too); at zero the key goes.
if ended > 0 and redis.call('DECRBY', KEYS[3], ended) <= 0 then
  redis.call('DEL', KEYS[3])
end
return #remove
