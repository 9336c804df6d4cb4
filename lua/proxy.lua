-- proxy.lua: a request/response proxy. Each request frame goes to one of the backends
-- (round-robin), over a kept-alive connection from the worker's pool, and the backend's one
-- response frame comes back. A backend that refuses, resets, closes or stays silent past the
-- timeout is answered with an error frame ("ERR backend ADDR: REASON"), never with a hang; a
-- pooled connection the backend had closed is retried once on a new one. A connection on which
-- a call timed out is closed, never pooled (its late answer would go to the next request). A
-- backend that answers more than once per request breaks any request/response proxy, this one
-- included: its extra answer may reach the next request sent on that connection.
-- Each request holds its worker while it waits: run enough workers (docs/architecture.md,
-- "Workers that wait"). From the top of a clone, with delay.lua as the backend CONFIG names
-- (lua/README.md runs it):
--
--   ./lfepolld --lua lua/delay.lua --listen 127.0.0.1:7001 --workers 64 &   # the backend
--   ./lfepolld --lua lua/proxy.lua --workers 32 &
--   ./lfbench --expect line -c 50 -d 3 127.0.0.1:9876
--
-- Edit CONFIG (or copy the file).
local CONFIG = {
    framing = "line",                        -- "line" or "len32", both sides
    backends = { "127.0.0.1:7001" },         -- HOST:PORT ([ADDR]:PORT for IPv6), numeric
    timeout = 1.0,                           -- seconds, per connect, send and receive
    max_frame = 16 * 1024 * 1024,            -- len32: a longer answer is an error, not a read
}

local backends = {}
for i, b in ipairs(CONFIG.backends) do
    local host, port = b:match("^%[(.+)%]:(%d+)$")
    if not host then
        host, port = b:match("^([^:]+):(%d+)$")
    end
    assert(host, "proxy.lua: backend '" .. b .. "' is not HOST:PORT")
    backends[i] = { host = host, port = tonumber(port), name = b }
end
assert(#backends > 0, "proxy.lua: CONFIG.backends is empty")

local len32 = CONFIG.framing == "len32"
local next_backend = 0 -- per worker: each keeps its own round-robin

local function frame(s)
    return len32 and string.pack(">s4", s) or s .. "\n"
end

-- One exchange on one connection: the response, or nil and why.
local function exchange(b, request)
    local sock, err = lfe.connect(b.host, b.port, { timeout = CONFIG.timeout })
    if not sock then
        return nil, err, false
    end
    sock:settimeout(CONFIG.timeout)
    local ok
    ok, err = sock:send(frame(request))
    if not ok then
        sock:close()
        return nil, err, true
    end
    local resp
    if len32 then
        local head
        head, err = sock:receive(4)
        if head then
            local n = string.unpack(">I4", head)
            if n > CONFIG.max_frame then
                sock:close()
                return nil, "an answer of " .. n .. " bytes (over max_frame)", true
            end
            resp, err = sock:receive(n)
        end
    else
        resp, err = sock:receive("*l")
    end
    if not resp then
        sock:close()
        return nil, err, true
    end
    sock:setkeepalive()
    return resp
end

return {
    framing = CONFIG.framing,
    on_data = function(conn, request)
        next_backend = next_backend % #backends + 1
        local b = backends[next_backend]
        local resp, err, sent = exchange(b, request)
        if not resp and sent and err == "closed" then
            resp, err = exchange(b, request) -- a pooled connection the backend had closed
        end
        if not resp then
            return frame("ERR backend " .. b.name .. ": " .. err)
        end
        return frame(resp)
    end,
}
