-- close_log.lua: raw echo that logs every on_close with its reason, so that the fault tests see
-- a connection the server dropped still end with exactly one on_close, and why.
return {
    framing = "raw",
    on_data = function(conn, data)
        return data
    end,
    on_close = function(conn, reason)
        lfe.log("on_close " .. reason)
    end,
}
