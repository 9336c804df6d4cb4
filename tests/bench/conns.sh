#!/usr/bin/env bash
# lfbench with many connections (issue 11's table): lfepolld (one worker) on CPU 0, lfbench on
# CPU 1, 64-byte echo, --source 127.0.0.2-127.0.0.17, 3 s warm-up; for each connection count a
# closed-loop run (QPS, client CPU per request) and an open-loop run at 1,000 req/s (p50, p99),
# REPS repetitions interleaved (A B A B ... when OLD=path/to/lfbench is given: that build
# against this one), medians printed as a Markdown table. Also lfbench's resident memory per
# connection (VmRSS mid-run at 15,000 connections less at 100, over 14,900) and the kernel's
# TCP memory (sockstat "mem", pages) at each count.
#   REPS=3 DUR=5 CONNS="100 1000 5000 15000" OLD=/tmp/old/lfbench tests/bench/conns.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
REPS=${REPS:-3} DUR=${DUR:-5} CONNS=${CONNS:-"100 1000 5000 15000"}
new=$top/lfbench old=${OLD:-}
make -s -C "$top" lfepolld lfbench
ulimit -n "$(ulimit -Hn)"
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "TIME_WAIT now: $(awk '/^TCP:/ {print $7}' /proc/net/sockstat)"
. "$top/tests/bench/lib.sh"
port=$(low_port) # PORT_BASE (lib.sh)
taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:$port --cpus 0 -q 2>/dev/null &
srv=$!
trap 'kill $srv 2>/dev/null' EXIT
sleep 0.5
src=127.0.0.2-127.0.0.17
declare -A qps cpu p50 p99 rss
builds="new"
[ -n "$old" ] && builds="old new"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "-"}'; }
# one run: prints "qps cpu_us p50 p99 rss_kb"
run() { # bin conns extra...
    local bin=$1 c=$2 out pid rsskb=0
    shift 2
    out=$(mktemp)
    taskset -c 1 "$bin" -c "$c" --source $src --warmup 3 -d "$DUR" -q "$@" 127.0.0.1:$port >"$out" 2>&1 &
    pid=$!
    sleep $((3 + DUR / 2))
    rsskb=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    wait $pid || true
    awk -v rss="$rsskb" '
        /^requests/ { for (i = 1; i <= NF; i++) if ($i == "req/s,") q = $(i - 1) }
        /^  latency/ { for (i = 1; i <= NF; i++) { if ($i == "p50") a = $(i + 1); if ($i == "p99") b = $(i + 1) } }
        /^client CPU/ { for (i = 1; i <= NF; i++) if ($i == "µs") c = $(i - 1) }
        END { printf "%s %s %s %s %s\n", q, c, a, b, rss }' "$out"
    grep -E "FAILED|opening" "$out" | sed "s/^/    [$c] /" >&2 || true
    rm -f "$out"
    sleep 1
}
for rep in $(seq "$REPS"); do
    for c in $CONNS; do
        for b in $builds; do
            bin=$new
            [ "$b" = old ] && bin=$old
            read -r q u _ _ r < <(run "$bin" "$c")
            qps[$b,$c]+=" $q"
            cpu[$b,$c]+=" $u"
            rss[$b,$c]+=" $r"
            read -r _ _ a p _ < <(run "$bin" "$c" -R 1000)
            p50[$b,$c]+=" $a"
            p99[$b,$c]+=" $p"
            echo "rep=$rep build=$b conns=$c closed: qps=$q cpu_us=$u rss_kb=$r; open 1000/s: p50=$a p99=$p" >&2
        done
    done
done
echo
echo "| build | connections | closed loop: QPS, client CPU per request | open loop 1,000 req/s: p50 / p99 | lfbench RSS |"
echo "|---|---|---:|---:|---:|"
for b in $builds; do
    for c in $CONNS; do
        printf "| %s | %s | %.1fk, %s µs | %s µs / %s µs | %s KiB |\n" "$b" "$c" \
            "$(echo "${qps[$b,$c]}" | median | awk '{print $1 / 1000}')" \
            "$(echo "${cpu[$b,$c]}" | median)" "$(echo "${p50[$b,$c]}" | median)" \
            "$(echo "${p99[$b,$c]}" | median)" "$(echo "${rss[$b,$c]}" | median)"
    done
done
