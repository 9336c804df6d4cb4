-- counter.lua (wrk's example, rewritten for lfbench): a request made anew each time. Each
-- request goes to the path /N with an X-Counter: N header, N counting up from 0. Each thread
-- runs its own copy of the script, so each thread has its own counter. (Like wrk, lfbench calls
-- the first thread's request() once before the run to see what it returns: that thread's first
-- path sent is /1, every other thread's /0.)
--
--   lfbench --expect http --script lua/bench/wrk/counter.lua 127.0.0.1:8080

counter = 0

function request()
    local path = "/" .. counter
    wrk.headers["X-Counter"] = counter
    counter = counter + 1
    return wrk.format(nil, path)
end
