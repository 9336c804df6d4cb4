#!/usr/bin/env bash
# Which plan for TLS listeners (README, "Choosing G and W"): 2 groups x 1 worker (the echo
# plan) against 1 group x 2 workers (Lua's, the TLS default), the server on CPUs SRV_CPUS (0-1)
# and the loads unpinned beside it (a 2-CPU machine has no CPU to spare them). Each run:
#   1. the p99 of 64 B requests on 50 connections, open loop at R/s (2,000), while full RSA-4096
#      handshakes arrive at HS/s (150) on 8 more connections (lfbench --mode short --tls-resume 0);
#   2. the same without the handshakes;
#   3. the server's CPU per request on 100 long connections, closed loop (an ECDSA P-256
#      certificate: its 100 handshakes are a negligible share).
# The plans alternate, REPS (3) runs each of DUR (6) seconds; about 2 minutes. Prints a line a
# run, then the medians. Knobs: LFEPOLLD, LFBENCH (./lfepolld, ./lfbench, made here), REPS, DUR,
# R, HS, SRV_CPUS.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
bench_binaries "$top" || exit 1
REPS=${REPS:-3} DUR=${DUR:-6} R=${R:-2000} HS=${HS:-150} SRV_CPUS=${SRV_CPUS:-0-1}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
openssl req -x509 -newkey rsa:4096 -nodes -keyout "$d/rsa.key" -out "$d/rsa.pem" -days 2 \
    -subj /CN=localhost 2>/dev/null &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ec.key" \
        -out "$d/ec.pem" -days 2 -subj /CN=localhost 2>/dev/null ||
    { echo "tls_plan.sh: the openssl CLI could not make the certificates" >&2; exit 1; }
hz=$(getconf CLK_TCK)
echo "$(machine_line); REPS=$REPS DUR=$DUR R=$R HS=$HS SRV_CPUS=$SRV_CPUS; lfepolld $LFEPOLLD"
p99_of() { awk '/^  latency/ {for (i = 1; i <= NF; i++) if ($i == "p99") print $(i + 1)}' "$1"; }
serve() { # CERT PLAN-OPTIONS...: starts the server on a free port; sets pid and port
    local c=$1
    shift
    port=$(low_port)
    "$LFEPOLLD" --listen-tls 127.0.0.1:$port --tls-cert "$d/$c.pem" --tls-key "$d/$c.key" \
        --cpus "$SRV_CPUS" -q "$@" 2>"$d/srv.err" &
    pid=$!
    for _ in $(seq 100); do ss -ltn | grep -q ":$port " && return 0; sleep 0.05; done
    echo "tls_plan.sh: lfepolld did not listen: $(tail -n1 "$d/srv.err")" >&2
    exit 1
}
lfb() { timeout $((DUR + 30)) "$LFBENCH" --tls --tls-insecure "$@"; }
run() { # NAME PLAN-OPTIONS...
    local name=$1 hp p99 p99q hsn t0 t1 q
    shift
    serve rsa "$@"
    lfb --mode short -c 8 -R "$HS" --tls-resume 0 -d $((DUR + 2)) --max-errors 1000000 -q \
        "127.0.0.1:$port" >"$d/hs.out" 2>&1 &
    hp=$!
    sleep 1
    lfb -c 50 --size 64 -R "$R" -d "$DUR" --warmup 1 "127.0.0.1:$port" >"$d/lf.out" 2>&1
    wait "$hp"
    p99=$(p99_of "$d/lf.out")
    hsn=$(awk '/^requests/ {print $2}' "$d/hs.out")
    lfb -c 50 --size 64 -R "$R" -d "$DUR" --warmup 1 "127.0.0.1:$port" >"$d/q.out" 2>&1
    p99q=$(p99_of "$d/q.out")
    kill "$pid"
    wait "$pid" 2>/dev/null
    serve ec "$@"
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    q=$(lfb -c 100 --size 64 -d "$DUR" -q "127.0.0.1:$port" | awk '/^requests/ {print $2}')
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"
    wait "$pid" 2>/dev/null
    [ -n "$p99" ] && [ -n "$p99q" ] && [ -n "${q:-}" ] ||
        { echo "tls_plan.sh: $name: a load gave no figure (lfbench's output: $d)" >&2; trap - EXIT; exit 1; }
    echo "$name p99_with_hs_us=$p99 handshakes=$hsn p99_quiet_us=$p99q long_us_per_req=$(
        awk -v t=$((t1 - t0)) -v hz="$hz" -v q="$q" 'BEGIN {printf "%.3f", t / hz * 1e6 / q}')" |
        tee -a "$d/runs"
}
for _ in $(seq "$REPS"); do
    run 2x1 --groups 2 --workers 1
    run 1x2 --groups 1 --workers 2
done
med() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
for n in 2x1 1x2; do
    line="$n medians:"
    for k in p99_with_hs_us p99_quiet_us long_us_per_req; do
        line="$line $k=$(grep "^$n " "$d/runs" | sed "s/.* $k=\([0-9.]*\).*/\1/" | med)"
    done
    echo "$line"
done
