-- append.lua: gives a message the room's next id, keeps it in the room's log (trimmed to the
-- configured length) and publishes it, in one atomic step, so the log, the sequence and the
-- live feed never disagree. A post repeated with the same idempotency key is stored once.
--
-- KEYS[1] the room's log: a stream, entry id "<n>-0", one field "m" = the encoded message
-- KEYS[2] the room's sequence counter: the last id given
-- KEYS[3] the post's idempotency key (read and written only when ARGV[4] is not "0")
-- ARGV[1] the encoded message, without its id
-- ARGV[2] how many messages the log keeps (exact MAXLEN)
-- ARGV[3] the room's channel
-- ARGV[4] how long to remember the idempotency key, in ms; "0" when the post has none
-- Returns {id, 0} for a new message, or {id, 1} for a repeated post: the first post's id.
-- Arguments are checked before the first write: a script that faults halfway keeps its writes.
local function int(s) return type(s) == 'string' and #s <= 16 and (s == '0' or s:match('^%-?[1-9]%d*$') ~= nil) end
local function nat(s) return int(s) and s:sub(1, 1) ~= '-' end
if type(ARGV[1]) ~= 'string' or not nat(ARGV[2]) or type(ARGV[3]) ~= 'string' or not nat(ARGV[4]) then
  return redis.error_reply('ERR append.lua: want a message, a length, a channel and a TTL')
end
if ARGV[4] ~= "0" then
  local seen = redis.call("GET", KEYS[3])
  if seen then
    return {tonumber(seen), 1}
  end
end
local id = redis.call("INCR", KEYS[2])
redis.call("XADD", KEYS[1], "MAXLEN", ARGV[2], id .. "-0", "m", ARGV[1])
redis.call("PUBLISH", ARGV[3], id .. ":" .. ARGV[1])
if ARGV[4] ~= "0" then
  redis.call("SET", KEYS[3], id, "PX", ARGV[4])
end
return {id, 0}
