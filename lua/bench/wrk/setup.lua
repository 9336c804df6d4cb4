-- setup.lua (wrk's example, rewritten for lfbench): data passed to and from the threads.
-- setup() gives each thread a number (the global id); each thread counts its requests and
-- responses in globals of its own; done() reads them back from every thread and prints
-- "thread N made R requests and got S responses".
--
--   lfbench --expect http --script lua/bench/wrk/setup.lua -t 2 127.0.0.1:8080

local next_id = 1
local threads = {}

function setup(thread)
    thread:set("id", next_id)
    threads[#threads + 1] = thread
    next_id = next_id + 1
end

function init(args)
    requests = 0
    responses = 0
    print(string.format("thread %d created", id))
end

function request()
    requests = requests + 1
    return wrk.request()
end

function response(status, headers, body)
    responses = responses + 1
end

function done(summary, latency, requests)
    for _, thread in ipairs(threads) do
        print(string.format("thread %d made %d requests and got %d responses",
            thread:get("id"), thread:get("requests"), thread:get("responses")))
    end
end
