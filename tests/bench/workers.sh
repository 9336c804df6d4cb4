#!/usr/bin/env bash
# One worker against two sharing one CPU (issue 14, section 3): lfepolld --cpus 0 with
# --workers 1 and --workers 2, long 64 B echo from lfbench --busy-poll (closed loop, CONNS
# connections) on CPU 1, alternating (the order swaps every repetition). Per run: requests/s,
# server CPU per request and voluntary and involuntary context switches per request (all its
# threads, over the whole run, warm-up included). Then medians.
#   tests/bench/workers.sh
# Knobs: REPS (5), DUR (4 s after 1 s of warm-up), CONNS (1000), RATE (open loop at RATE
# requests/s, so that the workers sleep between events; default: closed loop, saturated).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-5} DUR=${DUR:-4} CONNS=${CONNS:-1000}
make -s -C "$top" lfepolld lfbench
hz=$(getconf CLK_TCK)
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR CONNS=$CONNS"
ulimit -n "$(ulimit -Hn)"
out=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$out"' EXIT
ctx() { cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v + 0, n + 0}'; }
run() { # run WORKERS: prints "workers req/s us_per_req vcsw_per_req ivcsw_per_req"
    local port r q t0 t1 v0 n0 v1 n1
    port=$(low_port)
    taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:$port --cpus 0 --workers "$1" -q 2>/dev/null &
    pid=$!
    wait_listening "$port" || { echo "$0: lfepolld did not listen on $port" >&2; return; }
    t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    read -r v0 n0 <<<"$(ctx $pid)"
    r=$(taskset -c 1 "$top/lfbench" --busy-poll --cpus 1 -c "$CONNS" -d "$DUR" --warmup 1 -q \
        ${RATE:+-R "$RATE"} 127.0.0.1:$port 2>&1 || true)
    t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    read -r v1 n1 <<<"$(ctx $pid)"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    q=$(sed -n 's/^requests .*: \([0-9.]*\) req\/s.*/\1/p' <<<"$r")
    [ -n "$q" ] || { echo "$0: lfbench failed: $r" >&2; return; }
    # the server's counters span the whole run, warm-up and opening included: per request of it
    awk -v w="$1" -v q="$q" -v d="$DUR" -v t=$((t1 - t0)) -v v=$((v1 - v0)) -v n=$((n1 - n0)) \
        -v hz="$hz" 'BEGIN {r = q * (d + 1); printf "%s %.0f %.3f %.3f %.3f\n", w, q,
            t / hz * 1e6 / r, v / r, n / r}'
}
echo "workers req/s server_us_per_req vcsw_per_req ivcsw_per_req"
interleave "$out" run 1 2
python3 - "$out" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 5]
print("\n| workers on CPU 0 | requests/s | server µs per request | voluntary / involuntary switches per request |")
print("|---:|---:|---:|---|")
for w in ("1", "2"):
    m = [statistics.median(float(r[k]) for r in rows if r[0] == w) for k in range(1, 5)]
    print(f"| {w} | {m[0]:,.0f} | {m[1]:.2f} | {m[2]:.3f} / {m[3]:.3f} |")
EOF
