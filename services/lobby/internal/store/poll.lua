-- poll.lua: the lobby's version and its changes after a cursor, with the changed rooms read in
-- the same step: a listing after changes costs one round trip, not a poll and then a read.
-- Nothing is written.
-- KEYS[1]  version
-- KEYS[2]  changes
-- KEYS[3]  activity
-- KEYS[4]  info
-- KEYS[5]  viewers
-- KEYS[6]  leaders
-- ARGV[1]  the cursor's change id: the changes after it are read
-- ARGV[2]  the cursor's version
-- ARGV[3]  the most changes read; that many means a full reload is cheaper
-- Returns  {version, complete, next id, next version, rooms} where version is the counter ('' when
--          unset); complete is 0 when the log cannot say what changed (its first change after
--          the cursor is not the cursor's version + 1, or it holds ARGV[3] changes or more), and
--          then nothing else is read; next is the last change read (the cursor when none);
--          rooms is, for each changed code once in the order of its first change, the flat
--          code, activity score, info, viewers, leaders ('' for each one missing).
-- u64 is the digits s without leading zeros, and whether they are at most 2^64 - 1 (each part
-- of a stream id is).
local function u64(s)
  s = s:gsub('^0+(%d)', '%1')
  return s, #s < 20 or (#s == 20 and s <= '18446744073709551615')
end
local ms, seq
if type(ARGV[1]) == 'string' and #ARGV[1] <= 41 then
  ms, seq = ARGV[1]:match('^(%d+)%-(%d+)$')
end
local msOK, seqOK
if ms then
  ms, msOK = u64(ms)
  seq, seqOK = u64(seq)
end
if not msOK or not seqOK or not int(ARGV[2]) or not int(ARGV[3]) or tonumber(ARGV[3]) < 1 then
  return redis.error_reply('ERR poll.lua: want a change id, a version and a count')
end
local version = redis.call('GET', KEYS[1]) or ''
local log = {}
-- Nothing comes after the greatest stream id (and Redis refuses an interval that starts past it).
if ms ~= '18446744073709551615' or seq ~= '18446744073709551615' then
  log = redis.call('XRANGE', KEYS[2], '(' .. ms .. '-' .. seq, '+', 'COUNT', ARGV[3])
end
if #log == 0 then
  return { version, 1, ARGV[1], ARGV[2], {} }
end
-- field returns the value of an entry's field name ('' when it has none).
local function field(entry, name)
  local f = entry[2]
  for i = 1, #f, 2 do
    if f[i] == name then
      return f[i + 1]
    end
  end
  return ''
end
if tonumber(field(log[1], 'v')) ~= tonumber(ARGV[2]) + 1 or #log >= tonumber(ARGV[3]) then
  return { version, 0, ARGV[1], ARGV[2], {} }
end
local seen, rooms = {}, {}
for _, entry in ipairs(log) do
  for code in string.gmatch(field(entry, 'c'), '%S+') do
    if not seen[code] then
      seen[code] = true
      rooms[#rooms + 1] = code
      rooms[#rooms + 1] = redis.call('ZSCORE', KEYS[3], code) or ''
      rooms[#rooms + 1] = redis.call('HGET', KEYS[4], code) or ''
      rooms[#rooms + 1] = redis.call('HGET', KEYS[5], code) or ''
      rooms[#rooms + 1] = redis.call('HGET', KEYS[6], code) or ''
    end
  end
end
local last = log[#log]
return { version, 1, last[1], field(last, 'v'), rooms }
