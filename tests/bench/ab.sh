#!/usr/bin/env bash
# A/B of two lfepolld binaries, interleaved (A B A B ...): the peers' long scenario (100
# connections, 64 B requests, echoload, tests/bench/peers/c) against each, the server on CPU 0
# with --cpus 0, echoload on CPU 1. Prints each run, then medians of QPS and of server CPU per
# request (the server's utime+stime over the run, divided by the requests it served).
#   tests/bench/ab.sh OLD_LFEPOLLD NEW_LFEPOLLD [lfepolld options, e.g. --lua lua/echo.lua]
# Knobs: REPS (7), DUR (4 s measured, after 1 s of warm-up), CONNS (100), ECHOLOAD (unset:
# build/peers/echoload, made here).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_LFEPOLLD NEW_LFEPOLLD [lfepolld options]" >&2; exit 2; }
a=$1 b=$2
shift 2
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-7} DUR=${DUR:-4} CONNS=${CONNS:-100}
if [ -z "${ECHOLOAD:-}" ]; then
    ECHOLOAD=$top/build/peers/echoload
    make -s --no-print-directory -C "$top" build/peers/echoload
fi
hz=$(getconf CLK_TCK)
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR; options: $*"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
one() { # NAME BINARY OPTIONS...
    local name=$1 bin=$2 port pid t0 t1 res qps
    shift 2
    port=$(low_port) # PORT_BASE (lib.sh)
    taskset -c 0 "$bin" --listen 127.0.0.1:$port --cpus 0 -q "$@" 2>/dev/null &
    pid=$!
    for _ in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.05; done
    t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    res=$(taskset -c 1 "$ECHOLOAD" -p $port -m long -c "$CONNS" -s 64 -d "$DUR" -w 1)
    t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    kill $pid
    wait $pid 2>/dev/null || true
    qps=$(sed -n 's/.*qps=\([0-9.]*\).*/\1/p' <<<"$res")
    # requests over the whole run (warm-up included), as the CPU time covers it
    awk -v n="$name" -v q="$qps" -v t=$((t1 - t0)) -v hz="$hz" -v d="$DUR" \
        'BEGIN {printf "%s qps=%.0f us_per_req=%.3f\n", n, q, t / hz * 1e6 / (q * (d + 1))}' |
        tee -a "$out"
}
for _ in $(seq "$REPS"); do
    one A "$a" "$@"
    one B "$b" "$@"
done
med() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
for n in A B; do
    q=$(grep "^$n " "$out" | sed 's/.*qps=\([0-9.]*\).*/\1/' | med)
    u=$(grep "^$n " "$out" | sed 's/.*us_per_req=\([0-9.]*\).*/\1/' | med)
    echo "$n median: qps $q, server µs per request $u"
done
