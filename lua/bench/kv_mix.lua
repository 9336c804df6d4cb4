-- kv_mix.lua: an lfbench script (lfbench --script, --expect line) that drives lua/kv.lua with
-- gets and sets over a set of keys, and checks every answer against what it stored.
--
--   ./lfepolld --lua lua/kv.lua &
--   ./lfbench --expect line --script lua/bench/kv_mix.lua -d 5 127.0.0.1:9876 -- \
--       keys=10000 get=0.9 dist=zipf s=0.99 size=32
--
-- Arguments (after "--", each NAME=VALUE): keys (how many, default 1000), get (the share of
-- gets, 0 to 1, default 0.9), dist (uniform or zipf, default uniform), s (Zipf's exponent,
-- default 0.99), size (value bytes, default 16).
--
-- The check: each lfbench thread owns its keys (the run's name and the thread's number are in
-- their names), so what it reads is what it wrote. A value names its key and a version; a SET
-- must be answered STORED; a GET must return a value of its own key, one this thread had sent,
-- and not one that was certainly overwritten before the GET was sent (a register's rule:
-- SETs of one key on different connections may reach the server in any order, so the newest
-- version need not win, but a SET acknowledged before another SET of the key was even sent is
-- older than it, and once that later one is acknowledged, the earlier value may not come back);
-- NOT_FOUND only while no SET of the key had been acknowledged. request() returns a tag with
-- each request (lfbench's addition to wrk's API), so that response() knows what it answers.

local random, format = math.random, string.format
local keys, get_share, dist, s, size = 1000, 0.9, "uniform", 0.99, 16
local tid -- this thread's number: the global id that setup() sets in each thread
local clock = 0 -- this thread's logical time: one tick per request sent and per answer
local sent = {}   -- per key: the newest version sent
local floor = {}  -- per key: the latest send time among its SETs already STORED
local sent_at, stored_at = {}, {} -- per key, per version: when it was sent, when STORED
local KEEP = 4096 -- versions remembered per key (more than can be in flight)
local cdf -- zipf: the cumulative weights of keys 1..keys
local pad

-- setup() runs in main's state: each thread gets its number, and every thread the run's own
-- name, so that keys an earlier run stored (the server keeps them) are never read as this run's
local counter, run = 1, string.format("%x%04x", os.time(), math.random(0, 0xffff))
function setup(thread)
    thread:set("id", counter)
    thread:set("run", run)
    counter = counter + 1
end

local function arg_number(name, v, lo, hi)
    local n = tonumber(v)
    if not n or n < lo or n > hi then
        error(format("kv_mix.lua: %s=%s: give a number from %g to %g", name, v, lo, hi))
    end
    return n
end

function init(args)
    for i = 1, #args do
        local name, v = args[i]:match("^(%w+)=(.*)$")
        if name == "keys" then keys = math.tointeger(arg_number(name, v, 1, 1e7))
        elseif name == "get" then get_share = arg_number(name, v, 0, 1)
        elseif name == "s" then s = arg_number(name, v, 0.01, 10)
        elseif name == "size" then size = math.tointeger(arg_number(name, v, 24, 4096))
        elseif name == "dist" and (v == "uniform" or v == "zipf") then dist = v
        else error(format("kv_mix.lua: unknown argument '%s': give keys=, get=, dist=uniform|zipf, "
            .. "s= or size=", args[i])) end
    end
    tid = (run or "") .. "." .. (id or 1)
    math.randomseed((id or 1) * 7919)
    pad = string.rep("x", size)
    if dist == "zipf" then
        cdf = {}
        local sum = 0
        for k = 1, keys do sum = sum + 1 / k ^ s; cdf[k] = sum end
        for k = 1, keys do cdf[k] = cdf[k] / sum end
    end
end

local function pick()
    if not cdf then return random(keys) end
    local u, lo, hi = random(), 1, keys
    while lo < hi do -- the first key whose cumulative weight reaches u
        local mid = (lo + hi) // 2
        if cdf[mid] < u then lo = mid + 1 else hi = mid end
    end
    return lo
end

function request()
    local k = pick()
    local key = format("t%s:k%d", tid, k)
    clock = clock + 1
    if random() < get_share then
        return "GET " .. key .. "\n", {get = true, k = k, floor = floor[k] or 0}
    end
    local v = (sent[k] or 0) + 1
    sent[k] = v
    local at, st = sent_at[k], stored_at[k]
    if not at then at, st = {}, {}; sent_at[k], stored_at[k] = at, st end
    at[v], at[v - KEEP], st[v - KEEP] = clock, nil, nil
    -- the value: key, version, then padding up to size bytes
    local value = format("%s:%d:", key, v)
    return "SET " .. key .. " " .. value .. pad:sub(#value + 1) .. "\n", {k = k, v = v}
end

function response(line, tag)
    local k = tag.k
    clock = clock + 1
    if not tag.get then
        if line ~= "STORED\n" then return false, "SET got " .. line end
        stored_at[k][tag.v] = clock
        local t = sent_at[k][tag.v]
        if t and t > (floor[k] or 0) then floor[k] = t end
        return true
    end
    if line == "NOT_FOUND\n" then
        if tag.floor == 0 then return true end
        return false, format("GET of key %d: NOT_FOUND after a SET of it was STORED", k)
    end
    local key, v = line:match("^VALUE (t[%w.]+:k%d+):(%d+):x*\n$")
    v = tonumber(v)
    if key ~= format("t%s:k%d", tid, k) or v > (sent[k] or 0) then
        return false, format("GET of key %d got %q, which this thread never sent", k, line)
    end
    local stored = stored_at[k] and stored_at[k][v]
    if v <= (sent[k] or 0) - KEEP or (stored and stored < tag.floor) then
        return false, format("GET of key %d got version %d, overwritten before the GET was sent", k, v)
    end
    return true
end
