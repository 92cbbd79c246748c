-- presence.lua: read a room's members and presence version, after closing every session whose
-- lease ended, so the answer holds no member whose last lease lapsed.
-- KEYS, ARGV[1..2]  see presence_lib.lua; the reply ends with the announcements (ditto)
-- Returns {version, members}: members as HGETALL gives them, user id then
-- "<arrival version> <since ms> <username>".
sweep()
return reply({ tonumber(redis.call('GET', KEYS[5]) or '0'), redis.call('HGETALL', KEYS[1]) })