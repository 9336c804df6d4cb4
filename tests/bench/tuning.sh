#!/usr/bin/env bash
# The short-connection experiments of docs/tuning.md, each one call of `lfbench tune`: every
# round of every variant in a network namespace of its own, so the host's settings are never
# touched (host-wide keys are left out: no --host here). lfepolld (C echo, or
# tests/bench/lua/echo_close.lua for "the server closes first") on CPU 0, the load on CPU 1.
#   ablation      sysctl.conf, each key alone against a fresh namespace's defaults, then all
#   tw-reuse      net.ipv4.tcp_tw_reuse 0 against 2 (the default), the client closing first
#   range         ip_local_port_range default against 1024-65535, the client closing first
#   range-*       the same with tcp_tw_reuse 0 held (what a client on another host gets):
#                 client-close, server-close, linger0, sources (20 source addresses)
# Knobs: ROUNDS (lfbench tune's default: the fewest for the intervals, 6 for one variant, 9 for
# the ablation's 7; fewer than that makes every verdict "too few rounds" unless PER_VARIANT=1),
# PER_VARIANT=1 (--per-variant: each verdict at 95% alone, 6 rounds for the ablation too, and
# its 7 verdicts' false ones add up), SECS (5, each round's load), CONNS (50), ONLY (one name
# above), OUT (a directory: each experiment's --json there as NAME.json), LFBENCH and LFEPOLLD
# (the binaries; by default ./lfbench and ./lfepolld, made first).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "tuning.sh makes network namespaces: run it as root" >&2; exit 1; }
top=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-} SECS=${SECS:-5} CONNS=${CONNS:-50} ONLY=${ONLY:-} OUT=${OUT:-}
PER_VARIANT=${PER_VARIANT:-}
case $ONLY in
'' | ablation | tw-reuse | range | range-client-close | range-server-close | range-linger0 | \
    range-sources) ;;
*) echo "tuning.sh: ONLY=$ONLY is none of the experiments named at the top of $0" >&2; exit 2 ;;
esac
. "$top/tests/bench/lib.sh"
bench_binaries "$top"
[ -z "$OUT" ] || mkdir -p "$OUT"
machine_line
rounds=()
[ -z "$ROUNDS" ] || rounds=(--rounds "$ROUNDS")
[ -z "$PER_VARIANT" ] || rounds+=(--per-variant)
echo "lfbench tune ${rounds[*]} --round-seconds $SECS; lfepolld on CPU 0, the load on CPU 1"

# (run by /bin/sh: the paths quoted for it)
srv="taskset -c 0 $(printf %q "$LFEPOLLD") --listen 127.0.0.1:{port} -q --cpus 0"
range='net.ipv4.ip_local_port_range=default,1024 65535'

# tune NAME SERVER-EXTRA TUNE-OPTIONS... -- LOAD-OPTIONS...
tune() {
    local name=$1 extra=$2 t0=$SECONDS json=()
    shift 2
    [ -z "$ONLY" ] || [ "$ONLY" = "$name" ] || return 0
    [ -z "$OUT" ] || json=(--json "$OUT/$name.json")
    echo
    echo "### $name"
    echo "lfbench tune ${rounds[*]} --round-seconds $SECS --server '$srv$extra'$(printf ' %q' "$@")"
    taskset -c 1 "$LFBENCH" tune -q "${rounds[@]}" --round-seconds "$SECS" \
        --server "$srv$extra" "${json[@]}" "$@"
    echo "($((SECONDS - t0)) s)"
}

tune ablation '' --sysctl-conf "$top/sysctl.conf" -- --mode short -c "$CONNS"
tune tw-reuse '' --set net.ipv4.tcp_tw_reuse=0,2 -- --mode short -c "$CONNS"
tune range '' --set "$range" -- --mode short -c "$CONNS"
tune range-client-close '' --set net.ipv4.tcp_tw_reuse=0 --set "$range" -- --mode short -c "$CONNS"
tune range-server-close " --lua $(printf %q "$top/tests/bench/lua/echo_close.lua")" \
    --set net.ipv4.tcp_tw_reuse=0 --set "$range" -- --mode short -c "$CONNS"
tune range-linger0 '' --set net.ipv4.tcp_tw_reuse=0 --set "$range" -- --mode short -c "$CONNS" \
    --linger0
tune range-sources '' --set net.ipv4.tcp_tw_reuse=0 --set "$range" -- --mode short -c "$CONNS" \
    --source 127.0.0.1-127.0.0.20
