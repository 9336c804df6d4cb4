#!/usr/bin/env bash
# Latency under load (issue 14, section 2): lfbench's open loop (-R, latency counted from each
# request's intended send time) at fractions of the first server's closed-loop maximum, for each
# server and connection count; p50, p99 and p99.9 per cell. Servers are given as NAME=COMMAND
# ({port} is replaced) and interleaved A B C ... at every rate; each starts fresh, pinned to
# SRV_CPUS; lfbench runs on CLI_CPUS with CLI_THREADS threads.
#   tests/bench/latency.sh st='/tmp/pb/epoll_st {port}' \
#       lf1='./lfepolld --listen 127.0.0.1:{port} --cpus 0 -q' \
#       lf2='./lfepolld --listen 127.0.0.1:{port} --cpus 0 --workers 2 -q'
# The first server is the reference: its closed-loop maximum (median of 3 runs with CONNS'
# first count) sets the rates, unless MAX_RATE gives it.
# Knobs: REPS (1: each cell's figures are medians over REPS interleaved runs), FRACS
# ("25 50 75 90", percent), CONNS ("100 1000"), DUR (5 s), WARM (1 s), SRV_CPUS (0),
# CLI_CPUS (1), CLI_THREADS (1), LFBENCH (./lfbench), OUT (directory for latency.dat, the
# markdown table latency.md and, with gnuplot, latency-cN.png; default a temporary one),
# BUSY_POLL (1: lfbench --busy-poll, its threads spin on their CPUs instead of sleeping on a
# timer per request, which lets one client CPU offer about twice the rate; default 0).
# A cell whose client was saturated (lfbench's own CPU) is marked: there the figure measures the
# client, not the server. Sends that went out late because every connection was busy waiting for
# the server are the server's queueing, and count in its latency (no coordinated omission).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-1} FRACS=${FRACS:-25 50 75 90} CONNS=${CONNS:-100 1000} DUR=${DUR:-5} WARM=${WARM:-1}
SRV_CPUS=${SRV_CPUS:-0} CLI_CPUS=${CLI_CPUS:-1} CLI_THREADS=${CLI_THREADS:-1}
LFBENCH=${LFBENCH:-$top/lfbench}
BP=(); [ "${BUSY_POLL:-0}" = 1 ] && BP=(--busy-poll)
OUT=${OUT:-$(mktemp -d)}
[ $# -ge 1 ] || { echo "usage: $0 NAME='COMMAND {port}' ..." >&2; exit 2; }
[ -x "$LFBENCH" ] || { echo "$0: $LFBENCH is not built: run make" >&2; exit 2; }
mkdir -p "$OUT"
names=() cmds=()
for a in "$@"; do names+=("${a%%=*}"); cmds+=("${a#*=}"); done
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; true' EXIT

start() { # start INDEX: the server, pinned, on a fresh port (sets pid and port)
    port=$(low_port)
    taskset -c "$SRV_CPUS" ${cmds[$1]//\{port\}/$port} >/dev/null 2>&1 &
    pid=$!
    wait_listening "$port" && return 0
    echo "$0: ${names[$1]} did not listen on $port" >&2
    exit 1
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=; }
bench() { # bench ARGS...: lfbench against the running server; its text report on stdout
    taskset -c "$CLI_CPUS" "$LFBENCH" -t "$CLI_THREADS" --cpus "$CLI_CPUS" -d "$DUR" \
        --warmup "$WARM" --timeout 10000ms --max-errors 1000000 ${BP[@]+"${BP[@]}"} "$@" \
        "127.0.0.1:$port" 2>&1 || true
}

echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $(nproc) CPUs;" \
    "load $(cut -d' ' -f1-3 /proc/loadavg); server on CPU $SRV_CPUS, lfbench on $CLI_CPUS" \
    "($CLI_THREADS threads${BP[*]+, ${BP[*]}}); REPS=$REPS DUR=$DUR WARM=$WARM"
read -r c0 _ <<<"$CONNS"
if [ -z "${MAX_RATE:-}" ]; then
    qs=()
    for _ in 1 2 3; do
        start 0
        qs+=("$(bench -c "$c0" -q | sed -n 's/^requests .*: \([0-9.]*\) req\/s.*/\1/p')")
        stop
    done
    MAX_RATE=$(printf '%s\n' "${qs[@]}" | sort -n | sed -n 2p)
    echo "closed-loop maximum of ${names[0]} with $c0 connections: ${qs[*]} req/s; median $MAX_RATE"
fi
: >"$OUT/latency.dat"
for c in $CONNS; do
    for f in $FRACS; do
        rate=$(awk -v m="$MAX_RATE" -v f="$f" 'BEGIN {printf "%d", m * f / 100}')
        for k in $(seq "$REPS"); do for i in "${!names[@]}"; do
            start "$i"
            r=$(bench -c "$c" -R "$rate" -q)
            stop
            # latency      min 10.9  p50 70.9  p90 121.1  p99 273.4  p99.9 1806.3 ...
            read -r p50 p99 p999 <<<"$(awk '/^  latency/ {for (i = 1; i < NF; i++) {
                    if ($i == "p50") a = $(i + 1); if ($i == "p99") b = $(i + 1);
                    if ($i == "p99.9") d = $(i + 1) } print a, b, d; exit}' <<<"$r")"
            flag=ok
            grep -q 'saturated' <<<"$r" && flag=client-saturated
            grep -q '^errors *0:' <<<"$r" || flag="errors($(sed -n 's/^errors *\([0-9]*\):.*/\1/p' <<<"$r"))"
            echo "$c $f $rate ${names[$i]} ${p50:-nan} ${p99:-nan} ${p999:-nan} $flag $k" |
                tee -a "$OUT/latency.dat"
        done; done
    done
done
python3 - "$OUT/latency.dat" "$MAX_RATE" "$OUT" "${names[@]}" >"$OUT/latency.md" <<'EOF'
import statistics, sys
raw = [l.split() for l in open(sys.argv[1]) if l.strip()]
maxr, out, names = float(sys.argv[2]), sys.argv[3], sys.argv[4:]
rows = []  # one per cell: the medians over its repetitions, and the worst flag
for key in dict.fromkeys((r[0], r[1], r[3]) for r in raw):
    rs = [r for r in raw if (r[0], r[1], r[3]) == key]
    med = [statistics.median(float(r[k]) for r in rs) for k in (4, 5, 6)]
    flag = next((r[7] for r in rs if r[7] != "ok"), "ok")
    rows.append([key[0], key[1], rs[0][2], key[2], *med, flag])
for c in dict.fromkeys(r[0] for r in rows):
    for n in names:
        with open(f"{out}/{n}-{c}.xy", "w") as f:
            for r in rows:
                if r[0] == c and r[3] == n:
                    print(r[2], r[5], file=f)
for c in dict.fromkeys(r[0] for r in rows):
    fr = list(dict.fromkeys(r[1] for r in rows if r[0] == c))
    reps = len(raw) // max(len(rows), 1)
    print(f"\n**{c} connections**: p50 / p99 / p99.9 in µs at each share of {names[0]}'s closed-loop "
          f"maximum ({maxr:,.0f} req/s), median of {reps} run{'s' * (reps > 1)}; * the client, not "
          "the server, limited the cell\n")
    print("| server | " + " | ".join(f"{f}% ({int(maxr * int(f) / 100):,}/s)" for f in fr) + " |")
    print("|---|" + "---:|" * len(fr))
    for n in names:
        cells = []
        for f in fr:
            r = next((r for r in rows if r[0] == c and r[1] == f and r[3] == n), None)
            if r is None:
                cells.append("")
                continue
            mark = "" if r[7] == "ok" else " *" if r[7].startswith("client") else f" ({r[7]})"
            cells.append(" / ".join(f"{x:.0f}" for x in r[4:7]) + mark)
        print(f"| {n} | " + " | ".join(cells) + " |")
EOF
cat "$OUT/latency.md"
if command -v gnuplot >/dev/null; then
    for c in $CONNS; do
        plot=""
        for n in "${names[@]}"; do
            plot="$plot${plot:+, }'$OUT/$n-$c.xy' using 1:2 with linespoints title '$n'"
        done
        gnuplot <<GP
set terminal png size 800,500 noenhanced
set output '$OUT/latency-c$c.png'
set title 'p99 latency against offered rate, $c connections (open loop)'
set xlabel 'offered rate (requests/s)'
set ylabel 'p99 (µs)'
set logscale y
set key top left
plot $plot
GP
    done
    echo "plots: $OUT/latency-c*.png"
fi
