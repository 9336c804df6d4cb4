-- echo.lua: raw echo through Lua, byte for byte; the Lua-overhead benchmark against the C echo.
return {
    framing = "raw",
    on_data = function(conn, data)
        return data
    end,
}
