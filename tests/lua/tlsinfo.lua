-- tlsinfo.lua: each line is answered with what conn.tls says of the connection, for test_tls's
-- test_lua_conn_tls: "plain" over TCP, else "VERSION CIPHER SNI ALPN CLIENT_SUBJECT" ("-" for
-- each one absent), after a change to the table it gave (which must change nothing on the next
-- read).
return {
    framing = "line",
    on_data = function(conn, line)
        local t = conn.tls
        if t == nil then
            return "plain\n"
        end
        t.version, t.sni, t.alpn = "changed", "changed", "changed"
        t = conn.tls
        return string.format("%s %s %s %s %s\n", t.version, t.cipher, t.sni or "-", t.alpn or "-",
                             t.client_subject or "-")
    end,
}
