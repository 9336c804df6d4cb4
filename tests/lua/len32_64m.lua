-- len32_64m.lua: a 64 MiB max_frame, which cannot fit in the default --lua-mem-mb 64 state.
return {
    framing = "len32",
    max_frame = 64 * 1024 * 1024,
    on_data = function(conn, frame) return frame end,
}
