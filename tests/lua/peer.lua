-- peer.lua: "peer" answers conn.peer (the client's address: a PROXY header's under
-- --proxy-protocol); "closes REASON" answers how many connections ended for REASON (on_close
-- counts them in lfe.shared); anything else is echoed. For the hygiene tests.
return {
    framing = "line",
    on_data = function(conn, line)
        if line == "peer" then
            return conn.peer .. "\n"
        end
        local why = line:match("^closes (%g+)$")
        if why then
            return tostring(lfe.shared:get("close_" .. why) or 0) .. "\n"
        end
        return line .. "\n"
    end,
    on_close = function(conn, reason)
        lfe.shared:incr("close_" .. reason, 1, 0)
    end,
}
