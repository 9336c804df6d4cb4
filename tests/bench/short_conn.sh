#!/usr/bin/env bash
# Short connections (connect, 64 B request, echo, close), the peers' short_64B_50c scenario:
# servers given as NAME=COMMAND ({port} is replaced), interleaved A B C ... per repetition, each
# on CPU 0, echoload (tests/bench/peers/c) on CPU 1 with 50 connections in flight. Per run: QPS,
# server CPU per connection (utime+stime over the run), voluntary and involuntary context
# switches per connection (all the server's threads), and for lfepolld the accept threads' share
# of that CPU (acc_us_per_conn, their utime+stime: the cost that serialises, which on a big
# machine sets each accept thread's ceiling); syscalls are not counted (strace would change what
# is measured). Then medians per server and the ratio to the first.
#   tests/bench/short_conn.sh base='./lfepolld --listen 127.0.0.1:{port} --cpus 0 -q' \
#       st='build/peers/epoll_st {port}'   (make peers builds it)
# Knobs: REPS (9), DUR (4 s after 1 s of warm-up), CONNS (50), ECHOLOAD (unset:
# build/peers/echoload, made here).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-9} DUR=${DUR:-4} CONNS=${CONNS:-50}
if [ -z "${ECHOLOAD:-}" ]; then
    ECHOLOAD=$top/build/peers/echoload
    make -s --no-print-directory -C "$top" build/peers/echoload
fi
[ $# -ge 1 ] || { echo "usage: $0 NAME='COMMAND {port}' ..." >&2; exit 2; }
names=() cmds=()
for a in "$@"; do names+=("${a%%=*}"); cmds+=("${a#*=}"); done
hz=$(getconf CLK_TCK)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR CONNS=$CONNS"

ctx() { # PID: voluntary and involuntary switches of all its threads
    cat /proc/"$1"/task/*/status 2>/dev/null |
        awk '/^voluntary_ctxt_switches/ {v += $2} /^nonvoluntary_ctxt_switches/ {n += $2} END {print v + 0, n + 0}'
}

acc() { # PID: user+system ticks of its accept threads (lfe-accept*), 0 for another server
    local t c s=0
    for t in /proc/"$1"/task/*; do
        read -r c <"$t/comm" 2>/dev/null || continue
        [[ $c == lfe-accept* ]] && s=$((s + $(awk '{print $14 + $15}' "$t/stat")))
    done
    echo $s
}

for rep in $(seq "$REPS"); do
    for i in "${!names[@]}"; do
        port=$(low_port) # PORT_BASE (lib.sh)
        cmd=${cmds[$i]//\{port\}/$port}
        taskset -c 0 $cmd 2>/dev/null &
        pid=$!
        for _ in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.05; done
        t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
        a0=$(acc $pid)
        read -r v0 n0 <<<"$(ctx $pid)"
        res=$(taskset -c 1 "$ECHOLOAD" -p $port -m short -c "$CONNS" -s 64 -d "$DUR" -w 1)
        t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
        a1=$(acc $pid)
        read -r v1 n1 <<<"$(ctx $pid)"
        kill $pid
        wait $pid 2>/dev/null || true
        qps=$(sed -n 's/.*qps=\([0-9.]*\).*/\1/p' <<<"$res")
        # connections over the whole run (warm-up included), as the CPU time and switches cover it
        awk -v n="${names[$i]}" -v q="$qps" -v t=$((t1 - t0)) -v hz="$hz" -v d="$DUR" \
            -v v=$((v1 - v0)) -v nv=$((n1 - n0)) -v a=$((a1 - a0)) \
            'BEGIN {c = q * (d + 1); printf "%s qps=%.0f us_per_conn=%.3f vcsw_per_conn=%.3f ivcsw_per_conn=%.3f acc_us_per_conn=%.3f\n", n, q, t / hz * 1e6 / c, v / c, nv / c, a / hz * 1e6 / c}' |
            tee -a "$out"
    done
done
python3 - "$out" "${names[@]}" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, rest = line.split(" ", 1)
    rows.setdefault(name, []).append({k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", rest)})
base = None
for name in sys.argv[2:]:
    r = rows.get(name, [])
    if not r:
        continue
    med = {k: statistics.median(x[k] for x in r) for k in r[0]}
    base = base or med
    print(f"{name:10} median qps {med['qps']:8.0f}  us/conn {med['us_per_conn']:6.2f} "
          f"({med['us_per_conn'] / base['us_per_conn']:.2f}x the first)  "
          f"vcsw/conn {med['vcsw_per_conn']:.2f}  ivcsw/conn {med['ivcsw_per_conn']:.2f}"
          + (f"  accept us/conn {med['acc_us_per_conn']:.2f}" if med['acc_us_per_conn'] else ""))
EOF
