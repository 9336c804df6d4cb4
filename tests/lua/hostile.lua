-- hostile.lua: what a script must not be able to do to the daemon (issue 9's regression tests).
-- "flood" queues 400 MiB with conn:send; "wedge" (under --lua-unsafe) runs a finalizer that
-- never returns, where no hook can stop it; "bigclose" answers 900,000 bytes and closes, and
-- "hugeclose" 6,000,000 (under --max-pending 8M): the peer must get every one, whatever it
-- sends meanwhile; anything else answers "ok".
return {
    framing = "line",
    on_data = function(conn, line)
        if line == "flood" then
            local mib = string.rep("x", 1024 * 1024)
            for _ = 1, 400 do
                conn:send(mib)
            end
        elseif line == "bigclose" then
            conn:send(string.rep("y", 900000))
            return false
        elseif line == "hugeclose" then
            conn:send(string.rep("z", 6000000))
            return false
        elseif line == "wedge" then
            setmetatable({}, {__gc = function() while true do end end})
            collectgarbage()
        end
        return "ok\n"
    end,
    on_close = function(conn, reason)
        lfe.log("on_close " .. conn.id .. " " .. reason)
    end,
}
