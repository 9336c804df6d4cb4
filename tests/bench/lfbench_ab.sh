#!/usr/bin/env bash
# A/B of two lfbench binaries: the same lfepolld (this checkout's, one worker on CPU 0) under
# each, the client with one thread on CPU 1, the order swapped every repetition (A B, B A, ...).
# Per run: QPS and client CPU per request (--json's client_cpu.us_per_request); then the medians
# and the pairwise B/A ratios.
#   tests/bench/lfbench_ab.sh OLD_LFBENCH NEW_LFBENCH [lfbench options, e.g. --mode short -c 20]
# Knobs: REPS (7), DUR (3 s).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_LFBENCH NEW_LFBENCH [lfbench options]" >&2; exit 2; }
a=$1 b=$2
shift 2
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-7} DUR=${DUR:-3}
make -s --no-print-directory -C "$top" lfepolld
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR; options: $*"
port=$(low_port) # PORT_BASE (lib.sh)
json=$(mktemp)
taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:$port --cpus 0 -q 2>/dev/null &
spid=$!
trap 'kill $spid 2>/dev/null; rm -f "$json"' EXIT
for _ in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.05; done
one() { # BINARY: prints "QPS US_PER_REQUEST"
    local bin=$1
    rm -f "$json"
    taskset -c 1 "$bin" -q -t 1 -d "$DUR" "${opts[@]}" --json "$json" 127.0.0.1:$port >/dev/null 2>&1 || true
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f %.3f" % (d["qps"], d["client_cpu"]["us_per_request"]))' "$json"
}
opts=("$@")
ra=() rb=()
for i in $(seq "$REPS"); do
    if ((i % 2)); then x=$(one "$a"); y=$(one "$b"); else y=$(one "$b"); x=$(one "$a"); fi
    echo "rep $i  A qps us/req $x   B qps us/req $y"
    ra+=("$x") rb+=("$y")
done
python3 - "${ra[@]}" -- "${rb[@]}" <<'PY'
import statistics as st, sys
args = sys.argv[1:]
k = args.index("--")
a = [tuple(map(float, x.split())) for x in args[:k]]
b = [tuple(map(float, x.split())) for x in args[k + 1:]]
for i, name in ((0, "qps"), (1, "client us/request")):
    r = [y[i] / x[i] for x, y in zip(a, b)]
    print("%-18s median A %.3f B %.3f; pairwise B/A median %.3f (%.3f-%.3f)" % (
        name, st.median(x[i] for x in a), st.median(y[i] for y in b), st.median(r), min(r), max(r)))
PY
