#!/usr/bin/env bash
# Bytes of server memory per idle connection: lfepolld's RSS with N idle connections minus its
# RSS with none, divided by N. Kernel socket memory is not in RSS (see /proc/net/sockstat).
#   tests/bench/idle_rss.sh [N=10000] [extra lfepolld options...]
# Over TLS, beside nginx and the TLS peers: PARTS=idle tests/bench/tls_server.sh (docs/bench.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
n=${1:-10000}; shift || true
make -s -C "$top" lfepolld
mkdir -p "$top/build"
cc -O2 -o "$top/build/idle_conns" "$top/tests/bench/idle_conns.c"
ulimit -n "$(ulimit -Hn)"
. "$top/tests/bench/lib.sh"
port=$(low_port) # PORT_BASE (lib.sh)
"$top/lfepolld" --listen 127.0.0.1:$port -q "$@" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
sleep 0.3
rss() { awk '/^VmRSS:/ {print $2}' /proc/$pid/status; }
r0=$(rss)
coproc IDLE { "$top/build/idle_conns" $port "$n"; }
read -r line <&"${IDLE[0]}"
sleep 1
r1=$(rss)
echo "$line; lfepolld VmRSS ${r0} kB idle, ${r1} kB with $n idle connections:" \
     "$(( (r1 - r0) * 1024 / n )) bytes per idle connection"
echo "kernel: $(grep '^TCP:' /proc/net/sockstat)"
exec {IDLE[1]}>&-
wait "$IDLE_PID" 2>/dev/null || true
