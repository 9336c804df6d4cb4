#!/usr/bin/env bash
# make bench: lfepolld side by side with the peer echo servers of ../shared/peers (minimal epoll,
# SO_REUSEPORT epoll, libuv, Go, tokio), interleaved A B A B, server on CPU 0, load on CPU 1.
#   lf1 = one worker on CPU 0; lf2 = two workers (one group) sharing CPU 0.
# Knobs pass through to the harness: REPS (default 5), DUR, ONLY, SCEN (see its README).
# Changes no sysctl: the figures are for the machine as it is (printed in the header).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
peers=${PEERS:-$top/../shared/peers}
[ -x "$peers/run.sh" ] || { echo "bench: no peer harness at $peers (set PEERS=DIR)" >&2; exit 1; }
make -s -C "$top" lfepolld
L="$top/lfepolld --listen 127.0.0.1:{port} --cpus 0 -q"
echo "lfepolld $(git -C "$top" rev-parse --short HEAD 2>/dev/null); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); kernel $(uname -r)"
REPS=${REPS:-5} "$peers/run.sh" lf1="$L" lf2="$L --workers 2"
# Latency under load: lfbench's open loop at shares of epoll_st's closed-loop maximum, the same
# servers, interleaved (tests/bench/latency.sh; docs/bench.md "Latency under load"). On a
# 2-CPU machine lfbench saturates its CPU below a quarter of that maximum: those cells are marked.
if [ -z "${SKIP_LATENCY:-}" ]; then
    b=$peers/bin
    REPS=${LAT_REPS:-1} DUR=${LAT_DUR:-4} "$top/tests/bench/latency.sh" st="$b/epoll_st {port}" \
        uv="$b/uv_echo {port}" go="$b/go_echo {port}" tokio="$b/tokio_echo {port}" lf1="$L" \
        lf2="$L --workers 2"
fi
