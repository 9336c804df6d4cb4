-- pipeline.lua (wrk's example, rewritten for lfbench): HTTP pipelining. init() joins three
-- requests (/?foo, /?bar, /?baz) into one string, and request() returns it each time: the three
-- go out in one write, and the next three once all three are answered.
--
--   lfbench --expect http --script lua/bench/wrk/pipeline.lua 127.0.0.1:8080

function init(args)
    local batch = {}
    for _, query in ipairs({"foo", "bar", "baz"}) do
        batch[#batch + 1] = wrk.format(nil, "/?" .. query)
    end
    req = table.concat(batch)
end

function request()
    return req
end
