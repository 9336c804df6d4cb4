-- bad.lua: answers "ping" with "pong"; "error" raises, "loop" never returns, "alloc" allocates
-- without end, "close" closes after replying, "stash" keeps the conn object (xloop/xok: xpcall).
local stashed
return {
    framing = "line",
    on_data = function(conn, line)
        if line == "ping" then
            return "pong\n"
        elseif line == "error" then
            error("bad request on purpose")
        elseif line == "loop" then
            local n = 0
            while true do
                n = n + 1
                pcall(function() end) -- a pcall inside must not swallow the abort
            end
        elseif line == "xloop" then
            -- a message handler that loops, called for the timeout's error: stopped too
            xpcall(function() while true do pcall(function() end) end end, function(e)
                local t = os.clock() + 10
                while os.clock() < t do pcall(function() end) end
                return e
            end)
            return "escaped\n"
        elseif line == "xok" then
            local ok, v = xpcall(function(a, b) return a + b end, tostring, 2, 3)
            local bad, m = xpcall(function() error({code = 7}) end, function(e) return e.code end)
            return string.format("%s %s %s %s\n", tostring(ok), tostring(v), tostring(bad),
                tostring(m))
        elseif line == "alloc" then
            local t = {}
            while true do
                t[#t + 1] = string.rep("x", 4096) .. #t
            end
        elseif line == "close" then
            conn:send("bye")
            conn:close()
            return "\n"
        elseif line == "stash" then
            stashed = conn
            return "stashed\n"
        elseif line == "use" then
            return stashed:send("x") -- raises: the stashed conn is dead
        elseif line == "table" then
            return {}
        end
        return "unknown\n"
    end,
}
