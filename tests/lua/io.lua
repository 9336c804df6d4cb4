-- io.lua: lfe.connect, the socket, lfe.sleep and lfe.now, driven by one-line commands, for
-- tests/integration/test_lua_io.c. Each answers one line.
--   get PORT MSG [T]   connect, send MSG, receive a line (timeout T s), keep it alive
--   raw PORT MSG PAT   connect, send MSG, receive with PAT (a number, *l or *a), close
--   many PORT N        N connections at once, "peer" on each, all kept alive: their answers
--   sleep S            lfe.sleep(S): "slept SECONDS"
--   keep PORT          connect and keep the socket in a global
--   usekept            use that socket from this (another) callback: an error
--   bad WHAT [PORT]    a bad call: port, option, host, timeout; pattern, count (a receive on
--                      a socket to PORT)
--   closesleep         on_close of this connection will call lfe.sleep (an error, logged)
--   lines PORT N       connect, send "go", read N lines: "lines N BYTES"
--   late PORT T        connect, send "late", receive with timeout T, then setkeepalive: what
--                      each said
--   errmem             a local, then allocate until --lua-mem-mb stops the callback
--   hold PORT N        N connections open at once, no I/O: "held N", or "held K ERR" at the
--                      first that failed
local kept
local function try(stage, v, err, part)
    if v == nil then
        error({ line = "ERR " .. stage .. " " .. tostring(err) ..
            (part and part ~= "" and " partial=" .. part or "") })
    end
    return v
end

local function get(port, msg, t)
    local s = try("connect", lfe.connect("127.0.0.1", port, t and { timeout = t } or nil))
    if t then s:settimeout(t) end
    try("send", s:send(msg .. "\n"))
    local r = try("recv", s:receive("*l"))
    try("keepalive", s:setkeepalive())
    return r
end

local cmds = {}
function cmds.get(port, msg, t) return "got " .. get(tonumber(port), msg, tonumber(t)) end
function cmds.raw(port, msg, pat)
    local s = try("connect", lfe.connect("localhost", tonumber(port)))
    try("send", s:send(msg))
    local r = try("recv", s:receive(tonumber(pat) or pat))
    s:close()
    return "raw " .. r
end
function cmds.many(port, n)
    local socks, out = {}, {}
    for i = 1, tonumber(n) do
        socks[i] = try("connect", lfe.connect("127.0.0.1", tonumber(port)))
        try("send", socks[i]:send("peer\n"))
    end
    for i = 1, #socks do
        out[i] = try("recv", socks[i]:receive())
        try("keepalive", socks[i]:setkeepalive())
    end
    return table.concat(out, ",")
end
function cmds.sleep(s)
    local t0 = lfe.now()
    lfe.sleep(tonumber(s))
    return string.format("slept %.3f", lfe.now() - t0)
end
function cmds.spin(s) -- CPU, not waiting: the watchdog's business
    local t0 = os.clock()
    while os.clock() - t0 < tonumber(s) do end
    return "spun"
end
function cmds.keep(port)
    kept = try("connect", lfe.connect("127.0.0.1", tonumber(port)))
    return "kept"
end
function cmds.usekept() kept:send("x\n") return "used" end
function cmds.bad(what, port)
    if what == "port" then lfe.connect("127.0.0.1", 70000)
    elseif what == "option" then lfe.connect("127.0.0.1", 1, { timeuot = 1 })
    elseif what == "host" then lfe.connect("example.com", 80)
    elseif what == "timeout" then lfe.sleep(-1)
    elseif what == "pattern" or what == "count" then
        local s = try("connect", lfe.connect("127.0.0.1", tonumber(port)))
        s:receive(what == "pattern" and "*x" or 64 * 1024 * 1024 + 1)
    end
    return "not reached"
end
function cmds.lines(port, n)
    local s = try("connect", lfe.connect("127.0.0.1", tonumber(port)))
    try("send", s:send("go\n"))
    local bytes = 0
    for i = 1, tonumber(n) do
        bytes = bytes + #try("recv", s:receive("*l"))
    end
    s:close()
    return "lines " .. n .. " " .. bytes
end
function cmds.late(port, t)
    local s = try("connect", lfe.connect("127.0.0.1", tonumber(port)))
    s:settimeout(tonumber(t))
    try("send", s:send("late\n"))
    local r, err = s:receive("*l")
    local ok, kerr = s:setkeepalive()
    return "receive " .. tostring(r or err) .. ", keepalive " .. tostring(ok or kerr)
end
function cmds.errmem()
    local keep = setmetatable({}, {})
    local t = {}
    for i = 1, 1e8 do t[i] = ("x"):rep(100) .. i end
    return tostring(keep)
end
function cmds.hold(port, n)
    local socks = {}
    for i = 1, tonumber(n) do
        local s, err = lfe.connect("127.0.0.1", tonumber(port))
        if not s then return "held " .. (i - 1) .. " " .. tostring(err) end
        socks[i] = s
    end
    return "held " .. n
end
function cmds.closesleep() lfe.shared:set("closesleep", 1) return "ok" end

return {
    framing = "line",
    on_data = function(conn, line)
        local words = {}
        for w in line:gmatch("%S+") do words[#words + 1] = w end
        local f = cmds[words[1]]
        if not f then return "unknown command\n" end
        local ok, r = pcall(f, table.unpack(words, 2))
        if not ok then
            if type(r) == "table" then return r.line .. "\n" end
            error(r, 0)
        end
        return r .. "\n"
    end,
    on_close = function(conn, reason)
        if lfe.shared:get("closesleep") == 1 then
            lfe.shared:delete("closesleep")
            local ok, err = pcall(lfe.sleep, 0.01)
            lfe.log("on_close sleep: " .. tostring(ok) .. " " .. tostring(err))
        end
    end,
}
