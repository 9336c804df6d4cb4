#!/usr/bin/env bash
# Lua benchmarks (make bench runs this; the issue-4 figures in the README come from it):
#  1. the cost of one callback without sockets (build/bench/lua_call);
#  2. lua/echo.lua against the C echo: long connections, 64 B, 100 connections, one worker on
#     CPU 0, lfbench -t 1 on CPU 1, alternating A B A B for REPS repetitions; medians and ratio;
#  3. lua/compute.lua with 1% big requests (seed 001): small-request p99 with 1 group x 4
#     workers against 4 groups x 1 worker on the same CPU, open loop at RATE requests/s.
# Knobs: REPS (5), DUR (5 s), RATE (200/s), MIXDUR (10 s), CPUS (0: the server's), ONLY (e.g. 3).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
make -s -C "$top" lfepolld lfbench build/bench/lua_call
REPS=${REPS:-5} DUR=${DUR:-5} RATE=${RATE:-200} MIXDUR=${MIXDUR:-10} CPUS=${CPUS:-0}
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); sysctls untouched"
ulimit -n "$(ulimit -Hn)"
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT
tmp=$(mktemp -d)
start() { # args: lfepolld options
    port=$(low_port) # PORT_BASE (lib.sh)
    taskset -c "$CPUS" "$top/lfepolld" --listen 127.0.0.1:$port --cpus "$CPUS" -q "$@" 2>"$tmp/log" &
    srv=$!
    for _ in $(seq 50); do grep -q . "$tmp/log" 2>/dev/null && break; ss -ltn | grep -q ":$port " && break; sleep 0.1; done
}
stop() { kill $srv; wait $srv 2>/dev/null || true; srv=; }

ONLY=${ONLY:-123}
if [[ $ONLY == *1* ]]; then
echo
echo "## 1. one callback, no sockets (best of 5 runs of 1M calls, CPU 1)"
for s in tests/bench/lua/empty.lua lua/echo.lua tests/bench/lua/ctx.lua; do
    (cd "$top" && taskset -c 1 build/bench/lua_call "$s" 1000000)
done
(cd "$top" && taskset -c 1 build/bench/lua_call tests/bench/lua/ctx.lua 1000000 2)

fi
if [[ $ONLY == *2* ]]; then
echo
echo "## 2. lua/echo.lua against the C echo (long, 64 B, 100 connections, $DUR s, REPS=$REPS)"
declare -A q
for rep in $(seq "$REPS"); do
    for mode in c lua; do
        if [ $mode = c ]; then start; else start --lua "$top/lua/echo.lua"; fi
        sleep 0.3
        r=$(taskset -c 1 "$top/lfbench" -c 100 --size 64 -d "$DUR" --warmup 1 -t 1 -q 127.0.0.1:$port 2>/dev/null)
        stop
        v=$(sed -n 's/^requests .*: \([0-9.]*\) req\/s.*/\1/p' <<<"$r")
        q[$mode]+=" $v"
        echo "rep=$rep $mode qps=$v"
    done
done
mc=$(med <<<"${q[c]}"); ml=$(med <<<"${q[lua]}")
echo "median QPS: C echo $mc, lua/echo.lua $ml, ratio $(awk -v a="$ml" -v b="$mc" 'BEGIN{printf "%.3f", a/b}')"

fi
if [[ $ONLY == *3* ]]; then
echo
echo "## 3. lua/compute.lua, 99% count 10000 + 1% count 3000000, open loop $RATE req/s, 16 connections, $MIXDUR s"
printf '\x10\x27\0\0\0\0\0\0' >"$tmp/small.bin"  # 10000, int64 little-endian
printf '\xc0\xc6\x2d\0\0\0\0\0' >"$tmp/big.bin"    # 3000000
declare -A p
for rep in $(seq "$REPS"); do
    for shape in 1x4 4x1; do
        g=${shape%x*} w=${shape#*x}
        start --lua "$top/lua/compute.lua" --groups "$g" --workers "$w" --lua-timeout-ms 5000
        sleep 0.3
        r=$(taskset -c 1 "$top/lfbench" -c 16 -R "$RATE" -d "$MIXDUR" --warmup 1 --timeout 20000ms -q \
            --mix "$tmp/small.bin:99,$tmp/big.bin:1" --expect bytes 8 127.0.0.1:$port 2>/dev/null || true)
        stop
        # the per-class lines: "    PATH min A  p50 B  p90 C  p99 D  p99.9 E ..."
        cls() { awk -v f="$1" -v k="$2" '$1 ~ f"$" { for (i = 2; i < NF; i++) if ($i == k) print $(i+1) }' <<<"$r"; }
        line="$(cls small.bin p50) $(cls small.bin p99) $(cls small.bin p99.9) $(cls big.bin p99)"
        read -r s50 s99 s999 b99 <<<"$line"
        p[$shape]+=" $s99"; p[$shape,50]+=" $s50"; p[$shape,999]+=" $s999"; p[$shape,b]+=" $b99"
        echo "rep=$rep $shape small p50=${s50}us p99=${s99}us p99.9=${s999}us; big p99=${b99}us"
    done
done
echo
echo "| shape | small p50 µs | small p99 µs | small p99.9 µs | big p99 µs |"
echo "|---|---|---|---|---|"
for shape in 1x4 4x1; do
    echo "| $shape | $(med <<<"${p[$shape,50]}") | $(med <<<"${p[$shape]}") | $(med <<<"${p[$shape,999]}") | $(med <<<"${p[$shape,b]}") |"
done
fi
