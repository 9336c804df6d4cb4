#!/usr/bin/env bash
# A/B of two lfepolld binaries, interleaved (A B A B ...): the peers' long scenario (100
# connections, 64 B requests, echoload, tests/bench/peers/c) against each, the server on CPU 0
# with --cpus 0, echoload on CPU 1. Prints each run, then medians of QPS and of server CPU per
# request (the server's utime+stime over the run, divided by the requests it served).
#   tests/bench/ab.sh OLD_LFEPOLLD NEW_LFEPOLLD [lfepolld options, e.g. --lua lua/echo.lua]
#   TLS=1 tests/bench/ab.sh OLD_LFEPOLLD NEW_LFEPOLLD     # over TLS (see below)
# Knobs: REPS (7), DUR (4 s measured, after 1 s of warm-up), CONNS (100), ECHOLOAD (unset:
# build/peers/echoload, made here). TLS=1: a --listen-tls listener with an ECDSA P-256
# certificate made for the run (openssl CLI), and lfbench --tls (TLS 1.3, X25519,
# TLS_AES_128_GCM_SHA256, as tests/bench/tls_server.sh offers) as the load, since echoload
# speaks no TLS; LFBENCH (unset: ./lfbench, made here); LFB_ARGS (unset: -c CONNS --size 64)
# replaces lfbench's load, e.g. LFB_ARGS='--mode short -c 1 --tls-resume 0' for full handshakes
# (a request is then a connection: "µs per request" is the server's CPU per handshake).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_LFEPOLLD NEW_LFEPOLLD [lfepolld options]" >&2; exit 2; }
a=$1 b=$2
shift 2
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-7} DUR=${DUR:-4} CONNS=${CONNS:-100}
TLS=${TLS:-0}
out=$(mktemp)
certs=$(mktemp -d)
trap 'rm -rf "$out" "$certs"' EXIT
if [ "$TLS" = 1 ]; then
    if [ -z "${LFBENCH:-}" ]; then
        LFBENCH=$top/lfbench
        make -s --no-print-directory -C "$top" lfbench
    fi
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$certs/key.pem" \
        -out "$certs/cert.pem" -days 2 -subj /CN=localhost 2>/dev/null
elif [ -z "${ECHOLOAD:-}" ]; then
    ECHOLOAD=$top/build/peers/echoload
    make -s --no-print-directory -C "$top" build/peers/echoload
fi
hz=$(getconf CLK_TCK)
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR TLS=$TLS; options: $*"
one() { # NAME BINARY OPTIONS...
    local name=$1 bin=$2 port pid t0 t1 res qps
    shift 2
    port=$(low_port) # PORT_BASE (lib.sh)
    if [ "$TLS" = 1 ]; then
        taskset -c 0 "$bin" --listen-tls 127.0.0.1:$port --tls-cert "$certs/cert.pem" \
            --tls-key "$certs/key.pem" --cpus 0 -q "$@" 2>/dev/null &
    else
        taskset -c 0 "$bin" --listen 127.0.0.1:$port --cpus 0 -q "$@" 2>/dev/null &
    fi
    pid=$!
    for _ in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.05; done
    t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    if [ "$TLS" = 1 ]; then
        res=$(taskset -c 1 "$LFBENCH" --tls --tls-insecure --tls-version 1.3 --tls-groups X25519 \
            --tls-ciphersuites TLS_AES_128_GCM_SHA256 ${LFB_ARGS:--c "$CONNS" --size 64} -d "$DUR" \
            --warmup 1 -q "127.0.0.1:$port" | sed -n 's/^requests .*: \([0-9.]*\) req\/s.*/qps=\1/p')
    else
        res=$(taskset -c 1 "$ECHOLOAD" -p $port -m long -c "$CONNS" -s 64 -d "$DUR" -w 1)
    fi
    t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    kill $pid
    wait $pid 2>/dev/null || true
    qps=$(sed -n 's/.*qps=\([0-9.]*\).*/\1/p' <<<"$res")
    [ -n "$qps" ] || { echo "$name: the load gave no figure (port $port, $bin)" >&2; exit 1; }
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
