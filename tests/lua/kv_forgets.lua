-- kv_forgets.lua: lua/kv.lua's GET and SET, but every 50th SET of a worker is answered STORED
-- and not stored: a broken server that lua/bench/kv_mix.lua must catch
-- (tests/integration/test_lfbench_script.c).
local shared = lfe.shared
local match = string.match
local sets = 0

return {
    framing = "line",
    max_frame = 65536,
    on_data = function(conn, line)
        local cmd, key, rest = match(line, "^(%u+) (%S+) ?(.*)$")
        if cmd == "GET" then
            local v = shared:get(key)
            return v == nil and "NOT_FOUND\n" or ("VALUE " .. v .. "\n")
        elseif cmd == "SET" then
            sets = sets + 1
            if sets % 50 ~= 0 then
                shared:set(key, rest)
            end
            return "STORED\n"
        end
        return "ERROR usage: GET|SET key [value]\n"
    end,
}
