#!/usr/bin/env bash
# The short-connection experiment of docs/tuning.md. Every run happens in a network namespace
# made for it (unshare -n), so each starts from that namespace's defaults with no TIME_WAIT left
# by the run before, and the host's per-namespace settings are never touched. "tuned" applies
# sysctl.conf there (lfepolld --apply-sysctl) and sets the one host-wide key it has,
# net.core.netdev_max_backlog, on the host for the tuned runs only (restored on exit).
# lfepolld echo (or tests/bench/lua/echo_close.lua) on CPU 0, lfbench --mode short on CPU 1.
# Knobs: DUR (5 s), CONNS (50), ONLY (a run name, e.g. "client-close").
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "tuning.sh makes network namespaces: run it as root" >&2; exit 1; }
top=$(cd "$(dirname "$0")/../.." && pwd)
make -s -C "$top" lfepolld lfbench
DUR=${DUR:-5} CONNS=${CONNS:-50} ONLY=${ONLY:-}
backlog0=$(cat /proc/sys/net/core/netdev_max_backlog)
trap 'echo "$backlog0" >/proc/sys/net/core/netdev_max_backlog' EXIT
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "each run in a fresh network namespace; 'tuned' = sysctl.conf applied in it, and netdev_max_backlog 16384 on the host (restored to $backlog0 after)"

# run NAME CONFIG TW_REUSE SERVER_ARGS -- LFBENCH_ARGS; a NAME starting with "stall" stops the
# server (SIGSTOP) for 1 s, 2 s into the run: an accept thread that falls behind (ONLY=stall-burst
# only: one client thread on 2 CPUs cannot open connections fast enough to fill 4096 slots).
run() {
    local name=$1 config=$2 reuse=$3
    shift 3
    local srv=() cli=()
    while [ "$1" != -- ]; do srv+=("$1"); shift; done
    shift
    cli=("$@")
    [ -z "$ONLY" ] || [ "$ONLY" = "$name" ] || return 0
    if [ "$config" = tuned ]; then echo 16384 >/proc/sys/net/core/netdev_max_backlog; else echo "$backlog0" >/proc/sys/net/core/netdev_max_backlog; fi
    echo
    echo "### $name, $config sysctls, tcp_tw_reuse=$reuse"
    echo "lfepolld ${srv[*]}; lfbench --mode short -c $CONNS -d $DUR ${cli[*]}"
    unshare -n bash -s -- "$top" "$config" "$reuse" "$DUR" "$CONNS" "${name%%-*}" "${#srv[@]}" "${srv[@]}" "${cli[@]}" <<'INNER'
set -eu
top=$1 config=$2 reuse=$3 dur=$4 conns=$5 kind=$6 nsrv=$7
shift 7
srv=("${@:1:$nsrv}") cli=("${@:$((nsrv + 1))}")
ip link set lo up
[ "$config" = tuned ] && "$top/lfepolld" --apply-sysctl >/dev/null || true
sysctl -qw net.ipv4.tcp_tw_reuse="$reuse"
echo "namespace: somaxconn $(cat /proc/sys/net/core/somaxconn), ports $(cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' -), tw_reuse $(cat /proc/sys/net/ipv4/tcp_tw_reuse)"
ulimit -n "$(ulimit -Hn)"
taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:9876 --cpus 0 -q "${srv[@]}" 2>/dev/null &
pid=$!
for _ in $(seq 50); do ss -ltn | grep -q ':9876 ' && break; sleep 0.1; done
out=$(mktemp)
taskset -c 1 "$top/lfbench" --mode short -c "$conns" -d "$dur" --warmup 1 -q "${cli[@]}" 127.0.0.1:9876 >"$out" 2>&1 &
bench=$!
if [ "$kind" = stall ]; then sleep 2; kill -STOP "$pid"; sleep 1; kill -CONT "$pid"; fi
wait "$bench" || true
grep -E '^(requests|connections|  connect|errors|client CPU|kernel|hint)' "$out" | sed 's/^/    /' || true
rm -f "$out"
kill "$pid"; wait "$pid" 2>/dev/null || true
INNER
}

for config in default tuned; do
    run client-close "$config" 2 --
    run client-close-noreuse "$config" 0 --
    run server-close-noreuse "$config" 0 --lua "$top/tests/bench/lua/echo_close.lua" --
    run linger0-noreuse "$config" 0 -- --linger0
    run sources-noreuse "$config" 0 -- --source 127.0.0.1-127.0.0.20
    if [ "$ONLY" = stall-burst ]; then run stall-burst "$config" 2 -- -c 8000; fi
done
