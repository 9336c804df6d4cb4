-- sleepy.lua: "sleep N" blocks the callback in C for N seconds (os.execute, so under --lua-unsafe
-- only), where the Lua timeout's hook cannot reach it; anything else answers "ok". For the
-- admin's /health (a stuck worker) and the drain tests.
return {
    framing = "line",
    on_data = function(conn, line)
        local n = line:match("^sleep (%d+)$")
        if n then
            os.execute("sleep " .. n)
            return "slept\n"
        end
        return "ok\n"
    end,
}
