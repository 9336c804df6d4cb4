-- compute.lua: the workload of seed 001. A request is an 8-byte little-endian loop count; the
-- reply is 8 bytes, the little-endian double the loop below ends with. Counts of 10,000 are the
-- small requests (a few hundred microseconds); millions make the big ones (tens of ms).
-- Drive it with (examples/ has the two requests):
--   ./lfbench --mix examples/small.bin:99,examples/big.bin:1 --expect bytes 8 127.0.0.1:9876
local unpack, pack = string.unpack, string.pack

return {
    framing = "fixed",
    frame_size = 8,
    on_data = function(conn, req)
        local n = unpack("<i8", req)
        local s = 20181218.333333
        for i = 1, n do
            local f = i * 1.0
            local f2 = f * f
            local s1 = s * f2
            s = s1 / (s + 7.7)
        end
        return pack("<d", s)
    end,
}
