-- a handler that keeps a counter and a small table in conn.ctx: the cost of conn.ctx
return {on_data = function(conn, frame)
    local ctx = conn.ctx
    ctx.n = (ctx.n or 0) + 1
    ctx.user = ctx.user or {name = "someone", since = 1700000000}
    return frame
end}
