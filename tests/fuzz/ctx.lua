-- ctx.lua: fuzz_lua's script for conn.ctx. Each line is a program that changes conn.ctx; the
-- reply is conn.ctx as the callback found it and as it left it, written the same way whatever
-- state holds it ("START|END\n"). fuzz_lua checks that each callback finds what the last
-- successful one on that connection left, whichever of its two states runs it: a failed
-- callback's changes are dropped, a table kept in a global and changed later does not leak in.
--
-- Ops, one byte each (those with an argument take the next byte):
--   a-h V   cur[key] = V: 0-9 an integer, f a float (the next byte / 8), s a string (the next
--           byte, three times), t a table, T/F booleans, n nil, N NaN, z -0.0, I maxinteger,
--           m mininteger, x a 300 KB string, u a function (cannot be kept)
--   > K     into the table at cur[K] (made if need be)     <  back to conn.ctx
--   E       keep cur in a global                           M  change every table kept so
--   R       conn.ctx = {}                                  D  tables 40 deep (cannot be kept)
--   Y       cur.y = cur (a cycle: cannot be kept)          !  raise an error
--   C       conn:close()                                   X  return false (close)
--   G       collectgarbage()
local byte, char, rep, format, concat = string.byte, string.char, string.rep, string.format,
    table.concat

local kept = {}

local function canon(v, depth)
    local t = type(v)
    if t == "string" then
        local function hex(s) return (s:gsub(".", function(c) return format("%02x", byte(c)) end)) end
        if #v > 64 then -- long ones by their length and ends: canon stays cheap
            return "S" .. #v .. ":" .. hex(v:sub(1, 32)) .. ":" .. hex(v:sub(-32))
        end
        return "s" .. hex(v)
    elseif t == "number" then
        return (math.type(v) == "integer" and "i" or "d") .. format("%q", v)
    elseif t == "boolean" then
        return v and "b1" or "b0"
    elseif t == "table" then
        if depth > 40 then return "<deep>" end
        local items = {}
        for k, x in pairs(v) do
            items[#items + 1] = canon(k, depth + 1) .. "=" .. canon(x, depth + 1)
        end
        table.sort(items)
        return "{" .. concat(items, ",") .. "}"
    end
    return "<" .. t .. ">"
end

local function value(c, nextc)
    if c >= 48 and c <= 57 then return c - 48 end
    c = char(c)
    if c == "f" then return (nextc() or 0) / 8 + 0.5 end
    if c == "s" then return rep(char(nextc() or 65), 3) end
    if c == "t" then return {} end
    if c == "T" then return true end
    if c == "F" then return false end
    if c == "N" then return 0 / 0 end
    if c == "z" then return -0.0 end
    if c == "I" then return math.maxinteger end
    if c == "m" then return math.mininteger end
    if c == "x" then return rep("x", 300000) end
    if c == "u" then return value end
    return nil
end

local function run(conn, prog)
    local start = canon(conn.ctx, 0)
    local cur, i, close = conn.ctx, 0, nil
    local function nextc()
        i = i + 1
        return byte(prog, i)
    end
    while true do
        local c = nextc()
        if not c then break end
        if c >= 97 and c <= 104 then -- a-h
            local v = nextc()
            if v then cur[char(c)] = value(v, nextc) end
        elseif c == 62 then -- >
            local k = nextc()
            if k then
                k = char(k)
                if type(cur[k]) ~= "table" then cur[k] = {} end
                cur = cur[k]
            end
        elseif c == 60 then cur = conn.ctx -- <
        elseif c == 69 then kept[#kept + 1] = cur -- E
        elseif c == 77 then -- M
            for _, t in ipairs(kept) do t.m = (math.type(t.m) == "integer" and t.m or 0) + 1 end
        elseif c == 82 then conn.ctx = {}; cur = conn.ctx -- R
        elseif c == 68 then -- D
            local t = cur
            for _ = 1, 40 do t.d = {}; t = t.d end
        elseif c == 89 then cur.y = cur -- Y
        elseif c == 33 then error("boom") -- !
        elseif c == 67 then conn:close() -- C
        elseif c == 88 then close = false -- X
        elseif c == 71 then collectgarbage() -- G
        end
    end
    if #kept > 64 then kept = {} end
    local reply = start .. "|" .. canon(conn.ctx, 0) .. "\n"
    if close == false then
        conn:send(reply)
        return false
    end
    return reply
end

return {
    framing = "line",
    max_frame = 4096,
    on_connect = function(conn)
        return run(conn, "a1")
    end,
    on_data = run,
    on_close = function(conn, reason)
        canon(conn.ctx, 0)
    end,
}
