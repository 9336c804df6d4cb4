-- report.lua (wrk's example, rewritten for lfbench): a report of one's own. done() runs once,
-- after the summary, and prints the latency percentiles (in microseconds) as CSV lines after
-- a line of dashes.
--
--   lfbench --expect http --script lua/bench/wrk/report.lua 127.0.0.1:8080

function done(summary, latency, requests)
    io.write(string.rep("-", 30), "\n")
    for _, p in ipairs({50, 90, 99, 99.999}) do
        io.write(string.format("%g%%,%d\n", p, latency:percentile(p)))
    end
end
