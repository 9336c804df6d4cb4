-- stop.lua (wrk's example, rewritten for lfbench): a thread that stops itself. After its
-- 100th response, response() calls wrk.thread:stop(): the thread sends nothing more, and the
-- run ends when every thread has stopped, before -d.
--
--   lfbench --expect http --script lua/bench/wrk/stop.lua -c 1 -d 10 127.0.0.1:8080

local responses = 0

function response()
    responses = responses + 1
    if responses == 100 then
        wrk.thread:stop()
    end
end
