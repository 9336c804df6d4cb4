-- kv.lua: a line protocol on lfe.shared, the dictionary every worker shares.
--
--   GET key            VALUE <value>  | NOT_FOUND
--   SET key value      STORED         (the value is the rest of the line, spaces included)
--   DEL key            DELETED        | NOT_FOUND
--   INCR key [n]       <new value>    (a missing key counts from 0; n defaults to 1)
--
-- Lines end with \n (a \r before it is dropped). Errors: "ERROR <why>". Try it:
--   ./lfepolld --lua lua/kv.lua, then in bash: exec 3<>/dev/tcp/127.0.0.1/9876;
--   printf 'SET a 1\nINCR a 41\nGET a\n' >&3; head -n 3 <&3   (lua/README.md)
local shared = lfe.shared
local find, sub, upper = string.find, string.sub, string.upper

local function reply_get(key)
    local v = shared:get(key)
    if v == nil then
        return "NOT_FOUND\n"
    end
    return "VALUE " .. v .. "\n"
end

local commands = {
    GET = function(key, rest)
        if rest ~= "" then return "ERROR usage: GET key\n" end
        return reply_get(key)
    end,
    SET = function(key, rest)
        -- Integers are stored as numbers, so that INCR works on them (as in Redis).
        local v = rest
        if find(rest, "^%-?%d+$") and #rest < 19 then v = math.tointeger(tonumber(rest)) end
        local ok, err = shared:set(key, v)
        if not ok then return "ERROR " .. err .. "\n" end
        return "STORED\n"
    end,
    DEL = function(key, rest)
        if rest ~= "" then return "ERROR usage: DEL key\n" end
        return shared:delete(key) and "DELETED\n" or "NOT_FOUND\n"
    end,
    INCR = function(key, rest)
        local n = 1
        if rest ~= "" then
            n = math.tointeger(tonumber(rest))
            if not n then return "ERROR usage: INCR key [integer]\n" end
        end
        local v, err = shared:incr(key, n, 0)
        if not v then return "ERROR " .. err .. "\n" end
        return v .. "\n"
    end,
}

return {
    framing = "line",
    max_frame = 65536,
    on_data = function(conn, line)
        -- "CMD key rest..." with single spaces; the value keeps its own spaces.
        local s1 = find(line, " ", 1, true)
        if not s1 then
            if line == "" then return "ERROR empty line\n" end
            return "ERROR usage: GET|SET|DEL|INCR key [value]\n"
        end
        local cmd = commands[upper(sub(line, 1, s1 - 1))]
        if not cmd then return "ERROR unknown command\n" end
        local s2 = find(line, " ", s1 + 1, true)
        local key = sub(line, s1 + 1, (s2 or 0) - 1)
        if key == "" then return "ERROR empty key\n" end
        return cmd(key, s2 and sub(line, s2 + 1) or "")
    end,
}
