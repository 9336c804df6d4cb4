-- delay.lua: a mock service for load tests. Each request is answered with itself (so lfbench
-- verifies every byte), after a delay: drawn from the distribution configured below, or given
-- by the request itself when it starts with "@MS " (e.g. "@50 hello" waits 50 ms).
-- The wait is lfe.sleep: it holds one worker, so run enough of them (docs/architecture.md,
-- "Workers that wait"). From the top of a clone (lua/README.md runs it):
--
--   ./lfepolld --lua lua/delay.lua --workers 64 &
--   ./lfbench --expect line -c 50 -d 3 127.0.0.1:9876     # 1% of the answers 50 ms late
--
-- Edit CONFIG (or copy the file) to change the distribution. Delays are in milliseconds.
local CONFIG = {
    framing = "line",          -- "line" or "len32"
    dist = "fixed",            -- "fixed", "uniform", "exponential" or "lognormal"
    ms = 0,                    -- fixed: the delay
    min_ms = 0, max_ms = 10,   -- uniform: between these
    mean_ms = 5,               -- exponential: the mean
    median_ms = 5, sigma = 0.5, -- lognormal: the median and the sigma of log(delay)
    slow_fraction = 0.01,      -- this fraction of requests is an outlier...
    slow_ms = 50,              -- ...answered after this long instead
    cap_ms = 60000,            -- no delay is longer (a request's own "@MS" included)
}

local random, log, exp, sqrt, cos, pi = math.random, math.log, math.exp, math.sqrt, math.cos, math.pi

local function draw()
    if CONFIG.slow_fraction > 0 and random() < CONFIG.slow_fraction then
        return CONFIG.slow_ms
    end
    local d = CONFIG.dist
    if d == "fixed" then
        return CONFIG.ms
    elseif d == "uniform" then
        return CONFIG.min_ms + (CONFIG.max_ms - CONFIG.min_ms) * random()
    elseif d == "exponential" then
        return -CONFIG.mean_ms * log(1 - random())
    elseif d == "lognormal" then
        local z = sqrt(-2 * log(1 - random())) * cos(2 * pi * random()) -- Box-Muller
        return CONFIG.median_ms * exp(CONFIG.sigma * z)
    end
    error("delay.lua: CONFIG.dist '" .. tostring(d) .. "' is not fixed, uniform, exponential or lognormal")
end

local function reply(frame)
    if CONFIG.framing == "len32" then
        return string.pack(">s4", frame)
    end
    return frame .. "\n"
end

return {
    framing = CONFIG.framing,
    on_data = function(conn, frame)
        local own = frame:match("^@(%d+%.?%d*) ")
        local ms = own and tonumber(own) or draw()
        if ms > CONFIG.cap_ms then
            ms = CONFIG.cap_ms
        end
        if ms > 0 then
            lfe.sleep(ms / 1000)
        end
        return reply(frame)
    end,
}
