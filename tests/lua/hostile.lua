-- hostile.lua: what a script must not be able to do to the daemon (issue 9's regression tests).
-- "flood" queues 400 MiB with conn:send; "wedge" (under --lua-unsafe) runs a finalizer that
-- never returns, where no hook can stop it; "bigclose" answers 900,000 bytes and closes, and
-- "hugeclose" 6,000,000 (under --max-pending 8M): the peer must get every one, whatever it
-- sends meanwhile; anything else answers "ok".
-- Under --lua-unsafe: "coloop" loops inside coroutine.wrap, "conested" inside a coroutine that
-- another one resumes, under pcall; "cogen" resumes a generator the main chunk made (it carries
-- the load's hook); each loop gives up after 10 s, so a timeout that cannot reach it shows;
-- "cowall" sleeps 3 s in a coroutine, and must not answer after --lua-wall-timeout-ms ends it.
local function spin()
    local t = os.clock() + 10
    while os.clock() < t do
        pcall(function() end) -- allocates: ThreadSanitizer delivers a signal only at such calls
    end
end
local gen = coroutine and coroutine.wrap(function()
    local i = 0
    while true do
        for _ = 1, 5000 do i = i + 1 end
        coroutine.yield(i)
    end
end)
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
        elseif line == "coloop" then
            coroutine.wrap(spin)()
        elseif line == "conested" then
            local outer = coroutine.create(function()
                local inner = coroutine.create(function() pcall(spin) end)
                pcall(coroutine.resume, inner)
                spin()
            end)
            pcall(coroutine.resume, outer)
            spin()
        elseif line == "coload" then
            -- load() parses in C, where the timeout's signal lands (on the main thread), and
            -- calls its reader between pieces: a coroutine resumed after the signal, whose
            -- last resume loops, must stop too
            local piece, t0 = string.rep("+1", 1 << 19), os.clock()
            load(coroutine.wrap(function()
                coroutine.yield("return 1")
                for _ = 1, 32 do coroutine.yield(piece) end
                while os.clock() - t0 < 10 do pcall(function() end) end
            end))
        elseif line == "cowall" then
            coroutine.resume(coroutine.create(function() lfe.sleep(3) end))
            return "escaped\n"
        elseif line == "cogen" then
            return tostring(gen()) .. "\n"
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
