-- delay.lua (wrk's example, rewritten for lfbench): requests spaced out. Before each request a
-- connection waits a random 10 to 50 ms (closed loop only: with -R the schedule decides, and
-- lfbench refuses a script with delay()).
--
--   lfbench --expect http --script lua/bench/wrk/delay.lua -c 1 127.0.0.1:8080

function delay()
    return math.random(10, 50)
end
