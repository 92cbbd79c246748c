-- lib.lua: the argument checks every lobby script shares; prepended to each of them at
-- construction (New), so a script's own text starts after it.
-- int reports whether s is an integer argument of at most 16 characters, nat a non-negative one.
local function int(s) return type(s) == 'string' and #s <= 16 and (s == '0' or s:match('^%-?[1-9]%d*$') ~= nil) end
local function nat(s) return int(s) and s:sub(1, 1) ~= '-' end
