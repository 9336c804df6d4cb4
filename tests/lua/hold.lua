-- hold.lua: a raw echo whose "bigclose" request is answered with 900,000 bytes and a close
-- (conn:close's promise: every byte first), for test_hygiene's clients that hold still.
return {
    framing = "raw",
    on_data = function(conn, data)
        if data:sub(1, 8) == "bigclose" then
            conn:send(string.rep("y", 900000))
            return false
        end
        return data
    end,
}
