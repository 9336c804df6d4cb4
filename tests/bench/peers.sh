#!/usr/bin/env bash
# make bench: lfepolld side by side with the peer echo servers of tests/bench/peers (minimal
# epoll, SO_REUSEPORT epoll, io_uring, libuv, Go, tokio; tests/bench/peers/run.sh, built into
# build/peers by make peers), interleaved A B A B, server on CPU 0, load on CPU 1.
#   lf1 = one worker on CPU 0; lf2 = two workers (one group) sharing CPU 0.
# Knobs pass through to the harness: REPS (default 5), DUR, ONLY, SCEN, SKIP_BUILD (see its
# header); PEERS: the directory of the peers' binaries (build/peers).
# Changes no sysctl: the figures are for the machine as it is (printed in the header).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
peers=${PEERS:-$top/build/peers}
make -s -C "$top" lfepolld
[ -n "${SKIP_BUILD:-}" ] || make -s --no-print-directory -C "$top" peers
[ -x "$peers/echoload" ] || { echo "bench: no $peers/echoload: make peers builds the peers" >&2; exit 1; }
rc=0
L="$top/lfepolld --listen 127.0.0.1:{port} --cpus 0 -q"
echo "lfepolld $(git -C "$top" rev-parse --short HEAD 2>/dev/null); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); kernel $(uname -r)"
# A failed run is marked in the table; the latency part still runs, and the exit status says so.
PEER_BIN=$peers SKIP_BUILD=1 REPS=${REPS:-5} "$top/tests/bench/peers/run.sh" lf1="$L" \
    lf2="$L --workers 2" || rc=$?
# Latency under load: lfbench's open loop at shares of epoll_st's closed-loop maximum, the same
# servers, interleaved (tests/bench/latency.sh; docs/bench.md "Latency under load"). On a
# 2-CPU machine lfbench saturates its CPU below a quarter of that maximum: those cells are marked.
if [ -z "${SKIP_LATENCY:-}" ]; then
    b=$peers
    REPS=${LAT_REPS:-1} DUR=${LAT_DUR:-4} "$top/tests/bench/latency.sh" st="$b/epoll_st {port}" \
        uv="$b/uv_echo {port}" go="$b/go_echo {port}" tokio="$b/tokio_echo {port}" lf1="$L" \
        lf2="$L --workers 2" || rc=$?
fi
exit $rc
