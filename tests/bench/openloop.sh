#!/usr/bin/env bash
# lfbench's open loop, timer against --busy-poll: the same server (lfepolld, one worker on
# CPU 0), lfbench with one thread on CPU 1, -R at each of RATES with 100 connections, the two
# clients alternating (the order swaps every repetition, so drift within a pair favours
# neither). Per run: requests/s done, the client's CPU per request (--busy-poll: its work, the
# polling that found nothing left out, as lfbench reports it), the sends that went out more
# than 1 ms behind schedule, p50 and p99. Then medians per rate and client.
#   tests/bench/openloop.sh
# Knobs: REPS (5), DUR (3 s after 1 s of warm-up), RATES ("20000 40000 60000 80000"), CONNS (100).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-5} DUR=${DUR:-3} RATES=${RATES:-20000 40000 60000 80000} CONNS=${CONNS:-100}
make -s -C "$top" lfepolld lfbench
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR CONNS=$CONNS"
port=$(low_port)
taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:$port --cpus 0 -q 2>/dev/null &
srv=$!
out=$(mktemp)
trap 'kill $srv 2>/dev/null; rm -f "$out"' EXIT
wait_listening "$port" || { echo "$0: lfepolld did not listen on $port" >&2; exit 1; }
run() { # run RATE MODE: one lfbench run; prints "rate mode qps us_per_req behind p50 p99"
    local bp=() r
    [ "$2" = busy ] && bp=(--busy-poll)
    r=$(taskset -c 1 "$top/lfbench" -t 1 --cpus 1 -c "$CONNS" -R "$1" -d "$DUR" --warmup 1 \
        --max-errors 1000000 -q ${bp[@]+"${bp[@]}"} 127.0.0.1:$port 2>&1 || true)
    awk -v rate="$1" -v mode="$2" '
        /^requests/ {for (i = 1; i <= NF; i++) if ($i == "req/s,") q = $(i - 1)}
        /^  latency/ {for (i = 1; i < NF; i++) {if ($i == "p50") a = $(i + 1); if ($i == "p99") b = $(i + 1)}}
        /^schedule/ {for (i = 1; i <= NF; i++) if ($i == "due;") d = $(i + 1)}
        /^client CPU/ {for (i = 1; i <= NF; i++) if ($i == "µs") u = $(i - 1)}
        END {print rate, mode, q, u, d, a, b}' <<<"$r"
}
echo "rate mode req/s client_us_per_req behind_1ms p50_us p99_us"
for rep in $(seq "$REPS"); do
    for rate in $RATES; do
        if [ $((rep % 2)) = 1 ]; then order="timer busy"; else order="busy timer"; fi
        for m in $order; do run "$rate" "$m" | tee -a "$out"; done
    done
done
echo
echo "medians over $REPS runs:"
python3 - "$out" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 7]  # a failed run: fewer
print("| offered (req/s) | client | done (req/s) | client µs per request | sends > 1 ms late | p50 µs | p99 µs |")
print("|---:|---|---:|---:|---:|---:|---:|")
for rate in dict.fromkeys(r[0] for r in rows):
    for mode in ("timer", "busy"):
        rs = [r for r in rows if r[0] == rate and r[1] == mode]
        med = [statistics.median(float(r[k]) for r in rs) for k in range(2, 7)]
        name = "--busy-poll" if mode == "busy" else "timerfd"
        print(f"| {int(rate):,} | {name} | {med[0]:,.0f} | {med[1]:.2f} | {med[2]:,.0f} | {med[3]:.1f} | {med[4]:.1f} |")
EOF
