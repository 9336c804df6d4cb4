-- http_hello.lua: a minimal HTTP/1.1 responder, so that wrk and other HTTP load tools can
-- drive lfepolld. Every request gets "Hello, World!". Connections stay open (HTTP/1.1) unless
-- the request says "Connection: close" or is HTTP/1.0 without "Connection: keep-alive"; then
-- the server closes after the response. Request bodies are not read: such requests get 413.
-- Once lfepolld is stopping (SIGTERM, or a --takeover successor took the listeners), every
-- response says "Connection: close" and the connection ends behind it: the client learns in
-- band that this was the last response here, and sends its next request on a new connection.
local find, lower, match = string.find, string.lower, string.match
local draining = lfe.draining

local body = "Hello, World!\n"
local function response(status, extra, text)
    return "HTTP/1.1 " .. status .. "\r\nServer: lfepolld\r\nContent-Type: text/plain\r\n" ..
        "Content-Length: " .. #text .. "\r\n" .. extra .. "\r\n" .. text
end
local ok_keep = response("200 OK", "", body)
local ok_keep10 = response("200 OK", "Connection: keep-alive\r\n", body)
local ok_close = response("200 OK", "Connection: close\r\n", body)
local head_keep = match(ok_keep, "^(.-\r\n\r\n)")
local head_close = match(ok_close, "^(.-\r\n\r\n)")
local bad = response("400 Bad Request", "Connection: close\r\n", "bad request\n")
local too_large = response("413 Content Too Large", "Connection: close\r\n",
    "request bodies are not accepted\n")

return {
    framing = "line",
    delimiter = "\r\n\r\n", -- a frame is the request head
    max_frame = 16384,
    on_data = function(conn, head)
        local method, version = match(head, "^(%u+) %S+ HTTP/(1%.[01])\r?\n?")
        if not method then
            conn:send(bad)
            return false
        end
        local h = lower(head)
        if find(h, "\ncontent%-length:%s*0*[1-9]") or find(h, "\ntransfer%-encoding:") then
            conn:send(too_large)
            return false
        end
        local c = match(h, "\nconnection:%s*([^\r\n]*)")
        local close
        if draining() then
            close = true
        elseif version == "1.0" then
            close = not (c and find(c, "keep-alive", 1, true))
        else
            close = c ~= nil and find(c, "close", 1, true) ~= nil
        end
        if method == "HEAD" then
            conn:send(close and head_close or head_keep)
        elseif close then
            conn:send(ok_close)
        else
            return version == "1.0" and ok_keep10 or ok_keep
        end
        if close then return false end
    end,
}
