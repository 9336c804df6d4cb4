#!/usr/bin/env bash
# TCP Fast Open on short connections (connect, 64 B request, echo, close): lfepolld on CPU 0
# (--cpus 0), lfbench --mode short on CPU 1 with 50 connections in flight, four ways,
# interleaved per repetition: plain, --fastopen on both sides, and each with --defer-accept.
# Runs in a network namespace of its own with net.ipv4.tcp_fastopen=3 (the host's settings are
# not touched). Per run: connections/s, the server's CPU per connection (utime+stime over the
# run), lfbench's CPU per connection, and how many connections carried their request in the
# SYN (TcpExt TCPFastOpenPassive); then medians and the ratio to plain.
#   tests/bench/fastopen.sh          REPS=7 DUR=4 CONNS=50
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
REPS=${REPS:-7} DUR=${DUR:-4} CONNS=${CONNS:-50}
[ -x "$top/lfepolld" ] && [ -x "$top/lfbench" ] || make -s --no-print-directory -C "$top"
command -v unshare >/dev/null || { echo "fastopen: needs unshare (util-linux)" >&2; exit 2; }
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR CONNS=$CONNS"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
TOP=$top REPS=$REPS DUR=$DUR CONNS=$CONNS unshare -n bash -c '
    set -euo pipefail
    ip link set lo up
    sysctl -qw net.ipv4.tcp_fastopen=3 net.core.somaxconn=4096
    hz=$(getconf CLK_TCK)
    tfo() { awk "/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) if (\$i == \"TCPFastOpenPassive\") c = i; h = 1 } else print \$c }" /proc/net/netstat; }
    port=20000
    for rep in $(seq "$REPS"); do
        for way in plain tfo plain+defer tfo+defer; do
            srv=() cli=()
            [[ $way == tfo* ]] && srv+=(--fastopen 256) && cli+=(--fastopen)
            [[ $way == *defer ]] && srv+=(--defer-accept)
            port=$((port + 1))
            taskset -c 0 "$TOP/lfepolld" --listen 127.0.0.1:$port --cpus 0 -q "${srv[@]}" 2>/dev/null &
            pid=$!
            for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
            t0=$(awk "{print \$14 + \$15}" /proc/$pid/stat) f0=$(tfo)
            taskset -c 1 "$TOP/lfbench" --mode short -c "$CONNS" -d "$DUR" -q "${cli[@]}" \
                --json /tmp/lfe-tfo-bench-$$.json 127.0.0.1:$port >/dev/null 2>&1 || true
            t1=$(awk "{print \$14 + \$15}" /proc/$pid/stat) f1=$(tfo)
            kill $pid; wait $pid 2>/dev/null || true
            python3 - "$way" $((t1 - t0)) "$hz" $((f1 - f0)) /tmp/lfe-tfo-bench-$$.json <<EOF
import json, sys
way, ticks, hz, syn, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
d = json.load(open(path))
conns = d["connections"]  # measured window; the server CPU covers the whole run: scale by wall
allc = conns * d["wall_s"] / d["measured_s"]
cps, cli, errs = d["qps"], d["client_cpu"]["us_per_request"], d["errors"]["total"]
srv = ticks / hz * 1e6 / allc
print(f"{way} cps={cps:.0f} srv_us={srv:.2f} cli_us={cli:.2f} syn_data={syn / allc:.2f} errors={errs}")
EOF
        done
    done
    rm -f /tmp/lfe-tfo-bench-$$.json
' | tee "$out"
python3 - "$out" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    way, rest = line.split(" ", 1)
    rows.setdefault(way, []).append({k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", rest)})
base = None
for way in ("plain", "tfo", "plain+defer", "tfo+defer"):
    r = rows.get(way)
    if not r:
        continue
    m = {k: statistics.median(x[k] for x in r) for k in r[0]}
    base = base or m
    print(f"{way:12} median conn/s {m['cps']:7.0f} ({m['cps'] / base['cps']:.2f}x)  server us/conn "
          f"{m['srv_us']:6.2f} ({m['srv_us'] / base['srv_us']:.2f}x)  lfbench us/conn {m['cli_us']:6.2f} "
          f"({m['cli_us'] / base['cli_us']:.2f}x)  SYN data {m['syn_data']:.2f}  errors {m['errors']:.0f}")
EOF
