#!/usr/bin/env bash
# The accept thread's scheduling policy when it has a CPU of its own (issue 14, section 1):
# lfepolld's workers on SRV_CPU (--cpus), its accept thread moved to ACC_CPU (taskset -p on the
# "lfe-accept" thread), once as it starts (SCHED_BATCH) and once set back to SCHED_OTHER
# (chrt -o), alternating (the order swaps every repetition). lfbench short connections
# (closed loop, CONNS in flight, from 64 source addresses: runs back to back would run one
# address out of ports) on CLI_CPUS. Per run: connections/s, server CPU per connection
# (all its threads) and the accept thread's share of it. Then medians, and the ratio of
# SCHED_BATCH to SCHED_OTHER.
#   tests/bench/accept_policy.sh                  # this 2-CPU machine: worker CPU 0, accept
#                                                 # thread and lfbench sharing CPU 1
#   SRV_CPU=2 ACC_CPU=3 CLI_CPUS=4-11 CLI_THREADS=8 tests/bench/accept_policy.sh
# Knobs: REPS (5), DUR (4 s after 1 s of warm-up), CONNS (50), LFEPOLLD, LFBENCH.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-5} DUR=${DUR:-4} CONNS=${CONNS:-50}
SRV_CPU=${SRV_CPU:-0} ACC_CPU=${ACC_CPU:-1} CLI_CPUS=${CLI_CPUS:-1} CLI_THREADS=${CLI_THREADS:-1}
LFEPOLLD=${LFEPOLLD:-$top/lfepolld} LFBENCH=${LFBENCH:-$top/lfbench}
for b in "$LFEPOLLD" "$LFBENCH"; do [ -x "$b" ] || { echo "$0: $b is not built: run make" >&2; exit 2; }; done
command -v chrt >/dev/null || { echo "$0: chrt missing (util-linux)" >&2; exit 2; }
hz=$(getconf CLK_TCK)
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $(nproc) CPUs;" \
    "load $(cut -d' ' -f1-3 /proc/loadavg); workers on CPU $SRV_CPU, accept thread on CPU $ACC_CPU," \
    "lfbench on $CLI_CPUS ($CLI_THREADS threads); REPS=$REPS DUR=$DUR CONNS=$CONNS"
out=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$out"' EXIT
ticks() { awk '{print $14 + $15}' "$1"; } # utime + stime of a /proc stat file
run() { # run POLICY (batch|other): one run; prints "policy conn/s us_per_conn accept_share"
    local port tid t a0 a1 s0 s1 r q n want
    port=$(low_port)
    "$LFEPOLLD" --listen 127.0.0.1:$port --cpus "$SRV_CPU" -q 2>/dev/null &
    pid=$!
    tid=
    for _ in $(seq 100); do
        for t in /proc/$pid/task/*; do
            [ "$(cat "$t/comm" 2>/dev/null)" = lfe-accept ] && tid=${t##*/}
        done
        [ -n "$tid" ] && break
        sleep 0.05
    done
    [ -n "$tid" ] || { echo "$0: no lfe-accept thread in $pid" >&2; kill "$pid"; exit 1; }
    # the thread is named by its creator: wait until it has set SCHED_BATCH itself, so that
    # chrt -o is not undone after it
    for _ in $(seq 100); do chrt -p "$tid" | grep -q SCHED_BATCH && break; sleep 0.02; done
    taskset -p -c "$ACC_CPU" "$tid" >/dev/null
    if [ "$1" = other ]; then chrt -o -p 0 "$tid"; fi
    want="SCHED_$([ "$1" = other ] && echo OTHER || echo BATCH)"
    chrt -p "$tid" | grep -q "$want" ||
        { echo "$0: the accept thread's policy is not $want: $(chrt -p "$tid")" >&2; kill "$pid"; exit 1; }
    sleep 0.3
    s0=$(ticks /proc/$pid/stat) a0=$(ticks /proc/$pid/task/$tid/stat)
    r=$(taskset -c "$CLI_CPUS" "$LFBENCH" --mode short -t "$CLI_THREADS" --cpus "$CLI_CPUS" \
        -c "$CONNS" -d "$DUR" --warmup 1 --source 127.0.0.2-127.0.0.65 -q 127.0.0.1:$port 2>&1 ||
        true)
    s1=$(ticks /proc/$pid/stat) a1=$(ticks /proc/$pid/task/$tid/stat)
    chrt -p "$tid" | grep -q "$want" ||
        { echo "$0: the accept thread's policy changed during the run: $(chrt -p "$tid")" >&2; kill "$pid"; exit 1; }
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    q=$(sed -n 's/^requests .*: \([0-9.]*\) req\/s.*/\1/p' <<<"$r")
    [ -n "$q" ] && [ "${q%.*}" -gt 0 ] || { echo "$0: lfbench failed:" >&2; echo "$r" >&2; exit 1; }
    # the server's CPU is over the whole run (warm-up included): per connection over all of them
    n=$(awk -v q="$q" -v d="$DUR" 'BEGIN {printf "%d", q * (d + 1)}')
    awk -v p="$1" -v q="$q" -v n="$n" -v s=$((s1 - s0)) -v a=$((a1 - a0)) -v hz="$hz" \
        'BEGIN {printf "%s %.0f %.2f %.3f\n", p, q, s / hz * 1e6 / n, s ? a / s : 0}'
}
echo "policy conn/s server_us_per_conn accept_thread_share"
interleave "$out" run batch other
python3 - "$out" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = {p: [statistics.median(float(r[k]) for r in rows if r[0] == p) for k in (1, 2, 3)]
       for p in ("batch", "other")}
print("\n| accept thread | connections/s | server µs per connection | accept thread's share |")
print("|---|---:|---:|---:|")
for p, name in (("other", "SCHED_OTHER"), ("batch", "SCHED_BATCH (default)")):
    m = med[p]
    print(f"| {name} | {m[0]:,.0f} | {m[1]:.2f} | {m[2]:.2f} |")
print(f"\nSCHED_BATCH / SCHED_OTHER: connections/s {med['batch'][0] / med['other'][0]:.3f}, "
      f"server CPU per connection {med['batch'][1] / med['other'][1]:.3f} (medians of {len(rows) // 2})")
EOF
