-- peer.lua (tests/scaleout): echo that logs each connection's peer once, so the scale-out test
-- can show which client address lfepolld sees behind HAProxy (--proxy-protocol).
return {
    framing = "raw",
    on_connect = function(conn)
        lfe.log("peer " .. conn.peer)
    end,
    on_data = function(conn, data)
        return data
    end,
}
