-- ctx.lua: conn.ctx survives across events whatever worker runs them; greets on connect.
return {
    framing = "line",
    on_connect = function(conn)
        conn.ctx.n = 0
        conn.ctx.hist = {first = conn.id}
        return "hello " .. conn.id .. "\n"
    end,
    on_data = function(conn, line)
        local ctx = conn.ctx
        ctx.n = ctx.n + 1
        ctx.hist[#ctx.hist + 1] = line
        if line == "fn" then ctx.bad = print end -- cannot be kept: the callback fails
        return ctx.n .. " " .. #ctx.hist .. " " .. ctx.hist.first .. " " .. lfe.worker .. "\n"
    end,
    on_close = function(conn, reason)
        lfe.shared:incr("closed:" .. reason, 1, 0)
    end,
}
