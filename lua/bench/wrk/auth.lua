-- auth.lua (wrk's example, rewritten for lfbench): a response read by the script. The first
-- request goes to /authenticate; once a 200 answer brings an X-Token header, every later
-- request goes to /resource carrying that token.
--
--   lfbench --expect http --script lua/bench/wrk/auth.lua 127.0.0.1:8080

token = nil
path = "/authenticate"

function request()
    return wrk.format("GET", path)
end

function response(status, headers, body)
    if token == nil and status == 200 and headers["X-Token"] then
        token = headers["X-Token"]
        path = "/resource"
        wrk.headers["X-Token"] = token -- wrk.format() puts it in each request from now on
    end
end
