#!/usr/bin/env bash
# Lua handlers that wait, the case leader-follower exists for (issue 13): clients -> a proxy ->
# a backend where 99% of requests answer at once and 1% after 50 ms (lfepolld with
# lua/delay.lua, 64 workers; each request says its delay: "@0 ..." or "@50 ..."). The proxy is
# lfepolld with lua/proxy.lua in several layouts, or the Go goroutine-per-connection peer
# (tests/bench/peers/goproxy). lfbench drives each in open loop (latency from the intended send
# time) at several rates, 64-byte line requests mixed 99:1 (--mix), every response verified.
# Prints a row per (rate, proxy): throughput, the small requests' p50, p99 and p99.9 (the slow
# ones are 50 ms by design), the slow ones' p99, errors and unsent.
#
# CPUs: the proxy on CPU 0 (lfepolld --cpus 0, goproxy with GOMAXPROCS=1 under taskset -c 0);
# lfbench and the backend share CPU 1.
#   tests/bench/lua_wait.sh                 RATES="1000 3000 6000" DUR=5 CONNS=64 REPS=1
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
RATES=${RATES:-"1000 3000 6000"} DUR=${DUR:-5} CONNS=${CONNS:-64} REPS=${REPS:-1}
LAYOUTS=${LAYOUTS:-"lf-1x2 lf-1x8 lf-1x32 lf-8x1 go"}
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

[ -x ./lfepolld ] && [ -x ./lfbench ] || { echo "build first: make" >&2; exit 2; }
mkdir -p build/bench
(cd tests/bench/peers/goproxy && go build -o "$top/build/bench/goproxy" .) || {
    echo "cannot build tests/bench/peers/goproxy (Go 1.22+ needed)" >&2
    exit 2
}
. "$top/tests/bench/lib.sh"
free_port() { low_port; } # PORT_BASE (lib.sh)
wait_port() { for _ in $(seq 100); do ss -ltn | grep -q "127.0.0.1:$1 " && return 0; sleep 0.05; done; return 1; }

{ printf '@0 '; printf '%060d\n' 0 | tr 0 x; } >"$work/fast" # 64 bytes, one line
{ printf '@50 '; printf '%059d\n' 0 | tr 0 x; } >"$work/slow"
bp=$(free_port)
taskset -c 1 ./lfepolld --listen 127.0.0.1:$bp --cpus 1 --lua lua/delay.lua --workers 64 -q \
    2>"$work/backend.log" &
pids+=($!)
wait_port "$bp" || { echo "backend did not start: $(cat "$work/backend.log")" >&2; exit 1; }
sed "s/\"127.0.0.1:7001\"/\"127.0.0.1:$bp\"/" lua/proxy.lua >"$work/proxy.lua"

echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "backend: lfepolld lua/delay.lua (99% at once, 1% after 50 ms), 64 workers, CPU 1 (with lfbench)"
echo "proxy on CPU 0; lfbench -R RATE -c $CONNS -d $DUR --warmup 1, 64-byte lines 99% @0 1% @50, every response verified"
printf '%-6s %-8s %7s %9s %9s %10s %11s %7s %7s\n' rate proxy qps small_p50 small_p99 small_p999 slow_p99_ms errors unsent

run_one() { # RATE LAYOUT
    local rate=$1 layout=$2 pp pid args
    pp=$(free_port)
    case $layout in
    go)
        GOMAXPROCS=1 taskset -c 0 build/bench/goproxy -listen 127.0.0.1:$pp \
            -backends 127.0.0.1:$bp -framing line -pool 64 -timeout 1s 2>"$work/proxy.log" &
        ;;
    lf-*)
        g=${layout#lf-}
        args=(--groups "${g%x*}" --workers "${g#*x}")
        taskset -c 0 ./lfepolld --listen 127.0.0.1:$pp --cpus 0 --lua "$work/proxy.lua" \
            "${args[@]}" -q 2>"$work/proxy.log" &
        ;;
    esac
    pid=$!
    wait_port "$pp" || { echo "$layout did not start: $(cat "$work/proxy.log")" >&2; kill $pid; return; }
    taskset -c 1 ./lfbench -R "$rate" -c "$CONNS" -d "$DUR" --warmup 1 --mix "$work/fast:99,$work/slow:1" \
        --timeout 2000ms --max-errors 1000000 -q --json "$work/r.json" 127.0.0.1:$pp >/dev/null 2>&1
    kill $pid
    wait $pid 2>/dev/null
    python3 - "$work/r.json" "$rate" "$layout" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print(f"{sys.argv[2]:<6} {sys.argv[3]:<8} no result (lfbench failed to start)")
    sys.exit()
c = {x["name"].rsplit("/", 1)[-1]: x["latency"] for x in d["classes"]}
f, w = c["fast"], c["slow"]
print(f"{sys.argv[2]:<6} {sys.argv[3]:<8} {d['qps']:7.0f} {f['p50_us']:9.0f} {f['p99_us']:9.0f} "
      f"{f['p999_us']:10.0f} {w['p99_us'] / 1000:11.1f} {d['errors']['total']:7d} {d['unsent']:7d}")
EOF
    rm -f "$work/r.json"
}

for rep in $(seq "$REPS"); do
    for rate in $RATES; do
        for layout in $LAYOUTS; do
            run_one "$rate" "$layout"
        done
    done
done
