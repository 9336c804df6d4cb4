#!/usr/bin/env bash
# The false-positive check of docs/tuning.md: the same `lfbench tune` experiment N times over,
# for a key that cannot matter to its workload, and how many of the N verdicts say an effect.
#   slow-start   net.ipv4.tcp_slow_start_after_idle 1 against 0, 64 B echo on long connections
#                (-c 50): nothing in it ever idles long enough for the key to act
#   aa           A against A: net.ipv4.tcp_tw_reuse 2 against 2, short connections (-c 50)
# lfepolld on CPU 0, the load on CPU 1, each experiment ROUNDS rounds of SECS seconds.
# Knobs: N (10), ROUNDS (6), SECS (3), ONLY (slow-start or aa), OUT (a directory for the JSON),
# LFBENCH and LFEPOLLD (the binaries; by default ./lfbench and ./lfepolld, made first).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
    echo "tune_repeat.sh makes network namespaces: run it as root" >&2
    exit 1
fi
top=$(cd "$(dirname "$0")/../.." && pwd)
N=${N:-10} ROUNDS=${ROUNDS:-6} SECS=${SECS:-3} ONLY=${ONLY:-}
case $ONLY in
'' | slow-start | aa) ;;
*) echo "tune_repeat.sh: ONLY=$ONLY is neither slow-start nor aa" >&2; exit 2 ;;
esac
. "$top/tests/bench/lib.sh"
bench_binaries "$top"
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
machine_line
echo "$N experiments each, lfbench tune --rounds $ROUNDS --round-seconds $SECS; JSON in $OUT"
srv="taskset -c 0 $(printf %q "$LFEPOLLD") --listen 127.0.0.1:{port} -q --cpus 0"

# repeat NAME TUNE-OPTIONS... -- LOAD-OPTIONS...
repeat() {
    local name=$1 i effects=0 t0=$SECONDS line
    shift
    [ -z "$ONLY" ] || [ "$ONLY" = "$name" ] || return 0
    echo
    echo "### $name: lfbench tune $*"
    for i in $(seq "$N"); do
        taskset -c 1 "$LFBENCH" tune -q --rounds "$ROUNDS" --round-seconds "$SECS" \
            --server "$srv" --json "$OUT/$name-$i.json" "$@" >"$OUT/$name-$i.txt"
        # The variant's verdict line: "KEY=V   xMEDIAN [LOW, HIGH]  WORDS"
        line=$({ grep -E ' x[0-9.]+ \[' "$OUT/$name-$i.txt" || true; } | tail -n 1)
        echo "  $i: ${line#"${line%%[! ]*}"}"
        case $line in
        *"no measurable effect"*) ;;
        *" helps" | *" hurts") effects=$((effects + 1)) ;;
        *)
            echo "tune_repeat.sh: experiment $i of $name gave no verdict (${line:-no line}):" \
                "see $OUT/$name-$i.txt; too few ROUNDS for one variant at 95% (6)?" >&2
            exit 1
            ;;
        esac
    done
    echo "$name: $((N - effects)) of $N 'no measurable effect', $effects said an effect" \
        "($((SECONDS - t0)) s)"
}

repeat slow-start --set net.ipv4.tcp_slow_start_after_idle=1,0 -- -c 50
repeat aa --set net.ipv4.tcp_tw_reuse=2,2 -- --mode short -c 50
