#!/usr/bin/env bash
# Syscalls per request: lfepolld (or any server command) under `strace -c -f` while the peers'
# echoload sends a fixed number of requests. strace slows the server, but the counts are exact.
#   tests/bench/syscalls.sh [long|short] [extra lfepolld options...]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
peers=${PEERS:-$top/build/peers} # the peers' binaries (make peers); ECHOLOAD: another echoload
mode=${1:-long}; shift || true
n=${N:-200000}
[ "$mode" = short ] && n=${N:-20000}
. "$top/tests/bench/lib.sh"
port=$(low_port) # PORT_BASE (lib.sh)
load=${ECHOLOAD:-$peers/echoload}
[ -n "${ECHOLOAD:-}${PEERS:-}" ] || make -s --no-print-directory -C "$top" build/peers/echoload
[ -x "$load" ] || { echo "no echoload at $load: make peers builds build/peers/echoload" >&2; exit 1; }
make -s -C "$top" lfepolld
out=$(mktemp)
taskset -c 0 strace -c -f -o "$out" "$top/lfepolld" --listen 127.0.0.1:$port --cpus 0 -q "$@" &
pid=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
if [ "$mode" = short ]; then args="-m short -c 50"; else args="-m long -c 100"; fi
taskset -c 1 "$load" -p $port $args -s 64 -n "$n" -w 0 -d 600
kill -TERM "$(pgrep -P $pid)"; wait $pid || true  # signal the daemon, not strace
echo "syscalls per request ($mode, $n requests, lfepolld $*):"
awk -v n="$n" '$1 ~ /^[0-9.]+$/ && NF >= 5 { c = $4; name = $NF; if (name != "total" && c / n >= 0.001) printf "  %-14s %6.3f\n", name, c / n; if (name == "total") printf "  %-14s %6.3f\n", "total", c / n }' "$out"
rm -f "$out"
