-- slow_start.lua: an echo whose main chunk computes for 0.25 s of CPU (give it a --lua-timeout-ms
-- above that), so that a --takeover successor spends that long between taking the
-- listeners and telling its predecessor it is ready (test_takeover).
local t = os.clock()
while os.clock() - t < 0.25 do end
return {
    framing = "raw",
    on_data = function(conn, data)
        return data
    end,
}
