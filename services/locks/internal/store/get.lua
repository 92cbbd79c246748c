-- get.lua: describe the lock as the next acquire would see it (settling it first).
-- KEYS[1..4], ARGV[1..2]  as in lib.lua; the reply ends with the grant notices, as in lib.lua
-- Returns  {held, owner, token, exp, wid, wake}: held 0 leaves the rest '' or 0.
local holder, token, exp, wid = settle()
if not holder then
  return reply({0, '', 0, 0, '', wake()})
end
return reply({1, holder, token, exp, wid or '', wake()})
