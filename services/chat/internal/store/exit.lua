-- exit.lua: close a session (idempotent: a session that is not open changes nothing). The
-- user's last open session makes them leave.
-- KEYS, ARGV[1..2]  see presence_lib.lua; the reply ends with the announcements (ditto)
-- ARGV[3] session id
-- ARGV[4] holder: close it only while this stream holds it ('' closes it whoever holds it),
--         so an old stream's late end does not close a session re-attached elsewhere since
-- Returns {1} closed, {0} not open (or held by another stream).
if not word(ARGV[3]) or type(ARGV[4]) ~= 'string' then
  return redis.error_reply('ERR exit.lua: want a session id and a holder')
end
sweep()
local info = redis.call('HGET', KEYS[4], ARGV[3])
if not info then
  return reply({ 0 })
end
local holder = split(info)
if ARGV[4] ~= '' and holder ~= ARGV[4] then
  return reply({ 0 })
end
return reply({ drop(ARGV[3]) })