#!/usr/bin/env bash
# Where each server's CPU goes, symbol by symbol (issue 14, section 3). For each NAME='COMMAND
# {port}', the server runs on CPU 0 and lfbench loads it from CPU 1 while `perf record` samples
# all of CPU 0 (cpu-clock: the one event a guest without hardware counters has; kernel, user and
# idle alike). Then one table: per symbol, each server's CPU 0 time per request in ns (its share
# of the samples x the sampled seconds / the requests in them) and the difference of the last
# server to the first, biggest first. Idle (the halt and the idle loop) is a row like any other.
#   tests/bench/profile.sh long st='/path/to/epoll_st {port}' \
#       lf1='./lfepolld --listen 127.0.0.1:{port} --cpus 0 -q'
#   tests/bench/profile.sh short ...   short connections, from 64 source addresses
# long: lfbench --busy-poll closed loop, CONNS (100) connections, 64 B: the server saturated.
# Knobs: DUR (4 s sampled, after 2 s of load), CONNS, TOP (40 rows), FREQ (10000 Hz), KEEP (a
# folder to keep the perf.data files in), COMM (only the threads whose name starts with it, e.g.
# COMM=lfe-accept: the accept threads' time per connection, in short mode).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
mode=${1:-}
[ "$mode" = long ] || [ "$mode" = short ] && [ $# -ge 2 ] ||
    { echo "usage: $0 long|short NAME='COMMAND {port}' ..." >&2; exit 2; }
shift
command -v perf >/dev/null || { echo "$0: perf not found: apt-get install linux-perf" >&2; exit 1; }
DUR=${DUR:-4} TOP=${TOP:-40} FREQ=${FREQ:-10000}
CONNS=${CONNS:-$([ "$mode" = long ] && echo 100 || echo 50)}
make -s -C "$top" lfbench
dir=${KEEP:-$(mktemp -d)}
mkdir -p "$dir"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); $mode, CONNS=$CONNS DUR=$DUR FREQ=$FREQ"
names=()
for arg in "$@"; do
    name=${arg%%=*} cmd=${arg#*=}
    port=$(low_port)
    # shellcheck disable=SC2086 # the command is words
    taskset -c 0 ${cmd//\{port\}/$port} >/dev/null 2>&1 &
    pid=$!
    wait_listening "$port" || { echo "$0: $name did not listen on $port" >&2; exit 1; }
    if [ "$mode" = long ]; then
        load=(--busy-poll -c "$CONNS")
    else
        load=(--mode short -c "$CONNS" --source 127.0.0.2-127.0.0.65)
    fi
    taskset -c 1 "$top/lfbench" "${load[@]}" --cpus 1 -d $((DUR + 3)) -q 127.0.0.1:"$port" \
        >"$dir/$name.lfbench" 2>&1 &
    lb=$!
    sleep 2
    perf record -q -C 0 -e cpu-clock -F "$FREQ" -o "$dir/$name.data" -- sleep "$DUR" 2>/dev/null
    wait "$lb" || { echo "$0: lfbench against $name failed:" >&2; cat "$dir/$name.lfbench" >&2; exit 1; }
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    qps=$(sed -n 's/^requests .*: \([0-9.]*\) req\/s.*/\1/p' "$dir/$name.lfbench")
    echo "$name: $qps requests/s ($cmd)"
    # With COMM, the thread's name is one more column, kept or dropped here by its prefix.
    perf report -i "$dir/$name.data" --no-children --sort "${COMM:+comm,}dso,sym" --stdio 2>/dev/null |
        awk -v c="${COMM:-}" '/^ +[0-9.]+%/ && c != "" {if (index($2, c) != 1) next; $2 = ""; $0 = " " $0} {print}' |
        awk -v q="$qps" -v d="$DUR" '/^ +[0-9.]+%/ {p = $1; sub(/%/, "", p); $1 = ""; $2 = "";
            sub(/^ +\[[.k]\] /, ""); printf "%s\t%.1f\n", $0, p / 100 * 1e9 / q}' \
            >"$dir/$name.ns"
    names+=("$name")
done
python3 - "$dir" "$TOP" "${names[@]}" <<'EOF'
import sys
d, top, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
t = {}
for n in names:
    t[n] = {}
    for line in open(f"{d}/{n}.ns"):
        sym, ns = line.rstrip("\n").rsplit("\t", 1)
        t[n][sym.strip()] = t[n].get(sym.strip(), 0) + float(ns)
first, last = names[0], names[-1]
syms = sorted(set().union(*t.values()), key=lambda s: -abs(t[last].get(s, 0) - t[first].get(s, 0)))
print(f"\nCPU 0 ns per request, by symbol ({top} with the largest difference {last} - {first}):\n")
print("| symbol | " + " | ".join(names) + f" | {last} - {first} |")
print("|---|" + "---:|" * (len(names) + 1))
for s in syms[:top]:
    v = [t[n].get(s, 0) for n in names]
    print(f"| `{s}` | " + " | ".join(f"{x:.0f}" for x in v) + f" | {v[-1] - v[0]:+.0f} |")
tot = [sum(t[n].values()) for n in names]
print("| all | " + " | ".join(f"{x:.0f}" for x in tot) + f" | {tot[-1] - tot[0]:+.0f} |")
EOF
