#!/usr/bin/env bash
# tests/scaleout/run.sh: lfepolld beyond one machine, on one machine (issue 15).
#
# Network namespaces stand in for hosts: three backends running lfepolld, one balancer (HAProxy
# in TCP mode with the PROXY protocol and HTTP health checks; then an nftables numgen/dnat
# ruleset), two client namespaces each running an lfbench agent started together with
# --start-at, merged with `lfbench merge`. Topology, figures and their meaning: docs/scale-out.md.
#
#   tests/scaleout/run.sh            full run (a few minutes)
#   tests/scaleout/run.sh --short    CI run, under 2 minutes (also SCALEOUT_SHORT=1)
#
# Root only. Every namespace and process it starts is removed on exit, failure or Ctrl-C.
# The last line is "N passed, N failed"; the exit status is non-zero on any failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
LFEPOLLD=${LFEPOLLD:-$ROOT/lfepolld}
LFBENCH=${LFBENCH:-$ROOT/lfbench}
HAPROXY=${HAPROXY:-/usr/sbin/haproxy}

SHORT=${SCALEOUT_SHORT:-0}
for a in "$@"; do
    case $a in
    --short) SHORT=1 ;;
    *) echo "usage: $0 [--short]" >&2; exit 2 ;;
    esac
done

skip() { echo "scaleout: skipped: $*"; echo "0 passed, 0 failed"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
P=lfso$$
ip netns add "$P-probe" 2>/dev/null || skip "ip netns cannot be used here"
ip netns del "$P-probe"
for b in "$LFEPOLLD" "$LFBENCH"; do [ -x "$b" ] || { echo "scaleout: $b missing: run make"; exit 1; }; done
[ -x "$HAPROXY" ] || { echo "scaleout: $HAPROXY missing (apt-get install haproxy)"; exit 1; }
command -v nft >/dev/null || { echo "scaleout: nft missing (apt-get install nftables)"; exit 1; }
command -v jq >/dev/null || { echo "scaleout: jq missing"; exit 1; }

# The rolls and kills run as long in the short mode as in the full one: the harness has stalled
# for up to 10 s under load here (docs/scale-out.md, "Found here"), and a pass only measures
# something if its steps fall inside the agents' window.
if [ "$SHORT" = 1 ]; then D=4; DR=20; DK=15; else D=15; DR=20; DK=15; fi
RATE=${SCALEOUT_RATE:-15000} # requests/s per agent in the long spread passes

# --- cleanup: always ------------------------------------------------------------------------
NSS=(hub bal b1 b2 b3 c1 c2)
PIDS=()
TMP=$(mktemp -d /tmp/lfe-scaleout.XXXXXX)
PASSED=0 FAILED=0 FIRST_FAIL=""
cleanup() {
    local rc=$? n p
    trap - EXIT INT TERM
    exec 2>/dev/null # no "Killed" job notices after the summary
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    for n in "${NSS[@]}"; do
        # anything still running inside our namespaces was started by this script
        for p in $(ip netns pids "$P-$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    for n in "${NSS[@]}"; do ip netns del "$P-$n" 2>/dev/null || true; done
    if [ "${KEEP_TMP:-0}" = 1 ]; then echo "scaleout: logs kept in $TMP"; else rm -rf "$TMP"; fi
    if [ -z "${DONE:-}" ]; then
        [ "$rc" != 0 ] || rc=1
        echo "scaleout: FAILED: aborted (exit $rc) before the checks ended${FIRST_FAIL:+; first failed check: $FIRST_FAIL}"
        FAILED=$((FAILED + 1))
    elif [ "$FAILED" -gt 0 ]; then
        echo "scaleout: FAILED: $FIRST_FAIL"
        rc=1
    fi
    echo "$PASSED passed, $FAILED failed"
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "scaleout: interrupted"; exit 130' INT TERM

ok() { PASSED=$((PASSED + 1)); echo "  ok   $*"; }
bad() { FAILED=$((FAILED + 1)); [ -n "$FIRST_FAIL" ] || FIRST_FAIL=$*; echo "  FAIL $*"; }
check() { # check "description" COND...: COND is a test expression for [[ ]] through eval
    local what=$1; shift
    if eval "[[ $* ]]"; then ok "$what"; else bad "$what ($*)"; fi
}
say() { echo "$*"; }
ts() { echo "$(date +%T.%3N) $*" >>"$TMP/timeline"; } # KEEP_TMP=1 to read it
# nsenter --net, not ip netns exec, for the many short commands (curl, nft): no mount namespace
# and sysfs remount per call, which took seconds now and then on this shared machine
# and at a higher priority: scrapes and HAProxy commands issued under load stalled for seconds
# (2 CPUs, every load process busy), which moved hand-overs and kills past the agents' window
nsx() { local n=$1; shift; nice -n -10 nsenter --net="/run/netns/$P-$n" "$@"; }

# --- the harness's own tools stay in memory ---------------------------------------------------
# This VM pages out file pages that nothing maps once they are a few seconds cold (DAMON,
# action pageout, filter "unmapped"; /sys/kernel/mm/damon). A command the harness runs now and
# then (curl, nsenter, sleep, ...) was then read back from a disk shared with other machines:
# 39 major faults for one curl after 55 s idle here (2 with this). A background process maps
# those binaries, their libraries and the loader's files, which keeps their pages out of that
# reclaim (mapped pages are not its target). The load processes never go cold; the harness's
# tools did. (It is not the whole of the harness's stalls: docs/scale-out.md, "Found here".)
pin_tools() {
    local f files=()
    for f in "$LFEPOLLD" "$LFBENCH" "$HAPROXY" curl nsenter nice sleep date grep awk sed jq cat \
        wc seq tail head cut sort uniq basename timeout ip nft bash; do
        f=$(command -v "$f" 2>/dev/null) || continue
        files+=("$(readlink -f "$f")")
        while read -r l; do files+=("$(readlink -f "$l")"); done < <(ldd "$f" 2>/dev/null |
            awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
    done
    files+=(/etc/ld.so.cache /usr/lib/locale/locale-archive)
    python3 -c '
import mmap, os, signal, sys
maps = []
for f in set(sys.argv[1:]):
    try:
        fd = os.open(f, os.O_RDONLY)
        if os.fstat(fd).st_size:
            m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
            for off in range(0, len(m), 4096):
                m[off]  # fault every page in: mapped from here on
            maps.append(m)
        os.close(fd)
    except OSError:
        pass
signal.sigwait([signal.SIGTERM, signal.SIGINT])
' "${files[@]}" &
    PIDS+=("$!")
}
command -v python3 >/dev/null && pin_tools

# --- topology -------------------------------------------------------------------------------
# hub: two bridges. brb (10.77.0.0/24): the backends and the balancer's back leg. brf
# (10.77.1.0/24): the clients and the balancer's front leg. The balancer routes between them,
# so a DNAT'ed reply goes back through it (the backends' default route is 10.77.0.1).
NET_B=10.77.0 NET_F=10.77.1
BAL_B=$NET_B.1 BAL_F=$NET_F.1
C1=$NET_F.21 C2=$NET_F.22
BK=("" "$NET_B.11" "$NET_B.12" "$NET_B.13")
PORT=9876 HAPORT=9000 NFTPORT=9876 HASTATS=9999

for n in "${NSS[@]}"; do ip netns add "$P-$n"; nsx "$n" ip link set lo up; done
nsx hub ip link add brb type bridge
nsx hub ip link add brf type bridge
nsx hub ip link set brb up
nsx hub ip link set brf up
leg() { # leg NS IFNAME BRIDGE ADDR: a veth from the hub's bridge into NS
    local n=$1 ifn=$2 br=$3 addr=$4
    ip -n "$P-hub" link add "v-$n-$ifn" type veth peer name "$ifn" netns "$P-$n"
    ip -n "$P-hub" link set "v-$n-$ifn" master "$br" up
    ip -n "$P-$n" addr add "$addr/24" dev "$ifn"
    ip -n "$P-$n" link set "$ifn" up
}
leg bal eth0 brb "$BAL_B"
leg bal eth1 brf "$BAL_F"
for i in 1 2 3; do
    leg "b$i" eth0 brb "${BK[$i]}"
    ip -n "$P-b$i" route add default via "$BAL_B"
done
leg c1 eth0 brf "$C1"
leg c2 eth0 brf "$C2"
for c in c1 c2; do ip -n "$P-$c" route add default via "$BAL_F"; done
# sysctls: inside these namespaces only
nsx bal sysctl -qw net.ipv4.ip_forward=1
for n in bal c1 c2; do
    nsx "$n" sysctl -qw net.ipv4.ip_local_port_range="1024 65000"
    nsx "$n" sysctl -qw net.ipv4.tcp_tw_reuse=1
done

say "scaleout: $(uname -r), $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)," \
    "mode $([ "$SHORT" = 1 ] && echo short || echo full), namespaces $P-*"

# --- backends -------------------------------------------------------------------------------
mkdir -p "$TMP/run"
declare -a BPID BADMIN BLOG BGEN
BGEN=(0 0 0 0)
metric() { # metric I NAME: the sum of NAME over its label sets on backend I's /metrics
    nsx "b$1" curl -s --max-time 2 "http://${BK[$1]}:${BADMIN[$1]}/metrics" |
        awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%d\n", s }'
}
health() { nsx "b$1" curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://${BK[$1]}:$2/health" || true; }
start_backend() { # start_backend I ARGS...: a new instance on backend I (a takeover if one runs)
    local i=$1; shift
    local g=$((BGEN[i] + 1)) t
    BGEN[i]=$g
    BADMIN[i]=9878 # the same address for every instance: --takeover hands it over
    BLOG[i]=$TMP/b$i.$g.log
    # nsenter --net, not ip netns exec: the latter's sysfs remount once held a successor back
    # for 12 s under load (see nsx)
    nsenter --net="/run/netns/$P-b$i" "$LFEPOLLD" --listen "${BK[$i]}:$PORT" --admin "${BK[$i]}:${BADMIN[$i]}" \
        --takeover "$TMP/run/b$i.sock" --workers 1 "$@" 2>"${BLOG[$i]}" &
    BPID[i]=$!
    PIDS+=("$!")
    for t in $(seq 50); do
        local code
        # /health alone is not enough: during a hand-over the admin listener is shared, and the
        # old instance answers 200 until its successor is ready. The successor logs its admin
        # address after it has told the old one to go (or, alone, once it serves).
        code=$(health "$i" "${BADMIN[$i]}")
        [ "$code" = 200 ] && grep -q "info: admin HTTP on" "${BLOG[$i]}" && return 0
        ts "b$i: gen $g /health on :${BADMIN[$i]}: '$code', not yet logged ready"
        kill -0 "${BPID[$i]}" 2>/dev/null || break
        sleep 0.1
        ts "b$i: slept" # CI saw ~10 s between these two lines (see docs/scale-out.md)
    done
    echo "scaleout: backend b$i did not start:"; cat "${BLOG[$i]}"
    return 1
}
wait_exit() { # wait_exit PID SECONDS: wait for a process to end by itself
    local p=$1 t
    for t in $(seq $(($2 * 10))); do
        kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null || true; return 0; }
        sleep 0.1
    done
    return 1
}
stop_backends() {
    local i
    for i in 1 2 3; do
        [ -n "${BPID[$i]:-}" ] || continue
        kill "${BPID[$i]}" 2>/dev/null || true
        wait_exit "${BPID[$i]}" 10 || kill -9 "${BPID[$i]}" 2>/dev/null || true
        BPID[i]=""
    done
    rm -f "$TMP"/run/*.sock
}
start_backends() { local i; stop_backends; for i in 1 2 3; do start_backend "$i" "$@"; done; }
stopstat() { # stopstat LOG KEY: KEY's value on the "stats: total" line an instance printed at exit
    grep 'stats: total' "$1" | tail -1 | sed -n "s/.* $2=\([0-9]*\).*/\1/p"
}

# --- balancer -------------------------------------------------------------------------------
# HAProxy sends the PROXY header alone at connect, before the client's first request (its
# default, kept here: an lfepolld draining for --takeover once took such a header-only
# connection for one between requests and closed it). SCALEOUT_HA_WAIT=1 makes HAProxy wait
# for the client's first bytes so that both leave together.
HA_WAIT_CFG=""
if [ "${SCALEOUT_HA_WAIT:-0}" = 1 ]; then
    HA_WAIT_CFG=$'    tcp-request inspect-delay 2s\n    tcp-request content accept if { req.len gt 0 }\n'
fi
cat >"$TMP/haproxy.cfg" <<EOF
global
    maxconn 8000
    stats socket ipv4@127.0.0.1:$HASTATS level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch
frontend fe
    bind $BAL_F:$HAPORT
$HA_WAIT_CFG    default_backend lfe
backend lfe
    balance roundrobin
    option httpchk GET /health
    default-server send-proxy-v2 check port 9878 inter 200ms fall 1 rise 2
    server b1 ${BK[1]}:$PORT
    server b2 ${BK[2]}:$PORT
    server b3 ${BK[3]}:$PORT
EOF
hacmd() { # hacmd COMMAND: HAProxy's runtime API, over TCP inside the balancer namespace
    nsx bal bash -c "exec 3<>/dev/tcp/127.0.0.1/$HASTATS; echo '$1' >&3; timeout 2 cat <&3" 2>/dev/null || true
}
ip netns exec "$P-bal" "$HAPROXY" -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
PIDS+=("$!")
HAPID=$!
checkport() { # point HAProxy's health check of backend I at its admin port (the same for
    # every generation since --takeover hands the admin listener over; kept for other setups)
    hacmd "set server lfe/b$1 check-port ${BADMIN[$1]}" >/dev/null
}
ha_up() { # wait until HAProxy sees all three backends up
    local t
    for t in $(seq 60); do
        kill -0 "$HAPID" 2>/dev/null || { echo "scaleout: HAProxy died:"; cat "$TMP/haproxy.log"; return 1; }
        [ "$(hacmd 'show servers state lfe' | awk '$4 ~ /^b[123]$/ && $6 == 2' | wc -l)" = 3 ] && return 0
        sleep 0.1
    done
    echo "scaleout: HAProxy does not see 3 backends up:"; hacmd 'show servers state lfe'
    return 1
}
cat >"$TMP/nft.conf" <<EOF
table ip lfso {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        ip daddr $BAL_F tcp dport $NFTPORT dnat to numgen inc mod 3 map { 0 : ${BK[1]}, 1 : ${BK[2]}, 2 : ${BK[3]} }
    }
}
EOF
nsx bal nft -f "$TMP/nft.conf"
nsx bal sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_time_wait=10 2>/dev/null || true

# --- clients --------------------------------------------------------------------------------
# agents NAME TARGET ARGS...: both agents at once (--start-at +2), their JSON merged.
# Sets AGENTS_RC; the agents' output is in $TMP/NAME-c[12].out.
agents() {
    local name=$1 target=$2; shift 2
    local p1 p2 r1=0 r2=0
    ip netns exec "$P-c1" "$LFBENCH" -q --start-at +2 --json "$TMP/$name-c1.json" "$@" "$target" >"$TMP/$name-c1.out" 2>&1 &
    p1=$!; PIDS+=("$p1")
    ip netns exec "$P-c2" "$LFBENCH" -q --start-at +2 --json "$TMP/$name-c2.json" "$@" "$target" >"$TMP/$name-c2.out" 2>&1 &
    p2=$!; PIDS+=("$p2")
    AGENT_PIDS="$p1 $p2"
    if [ -n "${DURING:-}" ]; then $DURING; fi
    wait "$p1" || r1=$?
    wait "$p2" || r2=$?
    AGENTS_RC="$r1 $r2"
    "$LFBENCH" merge --json "$TMP/$name-merged.json" "$TMP/$name-c1.json" "$TMP/$name-c2.json" \
        >"$TMP/$name-merged.out" 2>&1
}
j() { jq -r "$2" "$1"; }
jsum() { echo $(($(j "$TMP/$1-c1.json" "$2") + $(j "$TMP/$1-c2.json" "$2"))); }
summary() { # one line from the merged result
    local m=$TMP/$1-merged.json
    echo "    merged: $(j "$m" .requests) requests ($(j "$m" .all_requests) all), $(j "$m" .connections) connections," \
        "$(j "$m" '.qps | floor') req/s, p99 $(j "$m" .latency.p99_us) µs, errors $(j "$m" .errors.total)" \
        "(closed $(j "$m" .errors.closed) reset $(j "$m" .errors.reset) refused $(j "$m" .errors.refused)" \
        "timeout $(j "$m" .errors.timeout)), lost $(j "$m" .lost), reconnects $(j "$m" .reconnects); agents exit $AGENTS_RC"
}

# check 4: the merge is exact, and the backends' counters agree with the clients'
merge_exact() { # merge_exact NAME
    local n=$1 m=$TMP/$1-merged.json k
    for k in requests all_requests bytes_out bytes_in errors.total connections; do
        check "$n: merged $k == sum of the agents' ($(j "$m" ".$k"))" "$(j "$m" ".$k") -eq $(jsum "$n" ".$k")"
    done
}
# backend totals over the three (fresh) instances of a pass
btot() { local i s=0; for i in 1 2 3; do s=$((s + $(metric "$i" "$1"))); done; echo "$s"; }

# check 1: spread, from the backends' /metrics
spread() { # spread NAME [kv]: connections and requests per backend within ±10% of a third
    # (kv: printed, and each backend must serve, but not bound: see kv_pass)
    local n=$1 kv=${2:-} i c r ct=0 rt=0 cs=() rs=() line=""
    for i in 1 2 3; do
        c=$(metric "$i" lfepolld_accept_accepted_total)
        if [ -n "$kv" ]; then # kv.lua: one on_data call a request
            r=$(metric "$i" lfepolld_worker_lua_calls_total)
        else
            r=$(($(metric "$i" lfepolld_worker_bytes_out_total) / 64)) # echo: 64-byte requests
        fi
        cs+=("$c"); rs+=("$r"); ct=$((ct + c)); rt=$((rt + r))
    done
    for i in 0 1 2; do
        line+=" b$((i + 1)): ${cs[$i]} conns ($((cs[i] * 1000 / (ct ? ct : 1)))‰) ${rs[$i]} reqs ($((rs[i] * 1000 / (rt ? rt : 1)))‰);"
    done
    echo "    spread:$line"
    for i in 0 1 2; do
        if [ -n "$kv" ]; then
            check "$n: b$((i + 1)) served (${rs[$i]} requests)" "${rs[$i]} -gt 0"
            continue
        fi
        check "$n: b$((i + 1)) connection share within ±10% of 1/3" "$((cs[i] * 3000)) -ge $((ct * 900)) && $((cs[i] * 3000)) -le $((ct * 1100))"
        check "$n: b$((i + 1)) request share within ±10% of 1/3" "$((rs[i] * 3000)) -ge $((rt * 900)) && $((rs[i] * 3000)) -le $((rt * 1100))"
    done
    SPREAD_CT=$ct SPREAD_RT=$rt
}
counters_agree() { # counters_agree NAME MODE CONNS [RESPONSE-BYTES]: backends' bytes and connections vs the clients'
    local n=$1 mode=$2 c=$3 rb=${4:-64} bo ca cc
    bo=$(btot lfepolld_worker_bytes_out_total)
    ca=$(($(jsum "$n" .all_requests) * rb))
    echo "    backends sent $bo bytes; clients got $ca bytes of verified responses (all_requests x $rb)"
    # a request in flight when an agent stops was answered but not counted: one per connection
    check "$n: backends' bytes out - clients' verified bytes in [0, $c x $rb]" "$((bo - ca)) -ge 0 && $((bo - ca)) -le $((c * rb))"
    if [ "$mode" = long ]; then
        echo "    backends accepted $SPREAD_CT connections for the clients' $c (information)"
    else
        cc=$(jsum "$n" .connections)
        echo "    backends accepted $SPREAD_CT connections; clients completed $cc"
        check "$n: backends' accepted - clients' connections in [0, $c]" "$((SPREAD_CT - cc)) -ge 0 && $((SPREAD_CT - cc)) -le $c"
    fi
}

behind() { # behind BAL [LFEPOLLD-ARGS...]: fresh backends for balancer BAL; sets TARGET
    local bal=$1 i
    shift
    if [ "$bal" = haproxy ]; then
        start_backends --proxy-protocol "$@"
        for i in 1 2 3; do checkport "$i"; done
        ha_up
        TARGET=$BAL_F:$HAPORT
    else
        start_backends "$@"
        TARGET=$BAL_F:$NFTPORT
    fi
}

# --- 1, 4: spread and exact counts, HAProxy then nftables, long then short -----------------------
spread_pass() { # spread_pass BAL MODE
    local bal=$1 mode=$2 n="spread-$1-$2" target args
    say "== $n"
    behind "$bal"
    target=$TARGET
    # long: open loop, the same rate on every connection, so that the request share measures
    # the balancer and not how this 2-CPU box schedules three closed-loop backends
    if [ "$mode" = long ]; then args=(-c 15 -R "$RATE" -d "$D"); else args=(--mode short -c 8 -d "$D"); fi
    agents "$n" "$target" "${args[@]}"
    summary "$n"
    check "$n: both agents exit 0" "'$AGENTS_RC' == '0 0'"
    spread "$n"
    merge_exact "$n"
    if [ "$mode" = long ]; then counters_agree "$n" long 30; else counters_agree "$n" short 16; fi
}
# The same behind HAProxy with lua/kv.lua on every backend: GET of a key nobody set, so each
# answer is "NOT_FOUND\n" (10 bytes) whichever of the three independent stores serves it
# (lfe.shared is per instance: docs/scale-out.md, "What does not span instances"). Its spread
# is printed, not bound: in CI, HAProxy's roundrobin gave this pass's 30 connections as
# 4 / 13 / 13 once (its fall-1 checks at 200 ms flap under load); the bound is the echo passes'.
kv_pass() {
    local n=spread-haproxy-kv
    say "== $n"
    behind haproxy --lua "$ROOT/lua/kv.lua"
    printf 'GET nobody-set-this\n' >"$TMP/kv.req"
    agents "$n" "$BAL_F:$HAPORT" -c 15 -R "$RATE" -d "$D" --payload "$TMP/kv.req" --expect line
    summary "$n"
    check "$n: both agents exit 0" "'$AGENTS_RC' == '0 0'"
    spread "$n" kv
    merge_exact "$n"
    counters_agree "$n" long 30 10
}
want() { [[ " ${SCALEOUT_PASSES:-spread kv peer roll kill} " == *" $1 "* ]]; }
# kv right after the HAProxy passes: once the nftables passes have restarted the backends twice
# under HAProxy's checks, its roundrobin gave 30 new connections as 9/8/13 (HAProxy's
# scheduler after servers flapped, not lfepolld: the same pass alone or here gives 10/10/10)
if want spread; then
    spread_pass haproxy long
    spread_pass haproxy short
fi
if want kv; then kv_pass; fi
if want spread; then
    spread_pass nft long
    spread_pass nft short
fi

# --- 5: the client's address behind HAProxy -------------------------------------------------
if want peer; then
say "== peer address behind HAProxy (--proxy-protocol, tests/scaleout/peer.lua logs conn.peer)"
behind haproxy --lua "$ROOT/tests/scaleout/peer.lua"
agents peer "$BAL_F:$HAPORT" -c 6 -d 1
cat "$TMP"/b[123].*.log | grep -o 'peer [0-9.]*:' | sort | uniq -c | sed 's/^/    /'
np1=$(cat "$TMP"/b[123].*.log | grep -c "peer $C1:" || true)
np2=$(cat "$TMP"/b[123].*.log | grep -c "peer $C2:" || true)
npb=$(cat "$TMP"/b[123].*.log | grep -c "peer $BAL_B:" || true)
check "backends see c1's address $C1 ($np1 connections)" "$np1 -ge 6"
check "backends see c2's address $C2 ($np2 connections)" "$np2 -ge 6"
check "backends never see the balancer's address $BAL_B ($npb)" "$npb -eq 0"

# --max-conns-per-ip counts the PROXY header's address. Every backend allows 2 connections an
# address; c1 opens 12 (4 a backend through roundrobin) and keeps them; then c2 opens 3 (1 a
# backend). Counted against the balancer's one address, c2's would all be shed; counted
# against the clients', only c1's excess is, and every shed is one of c1's failed connections,
# but for the last try of each of its 6 excess connections: shed by a backend as c1's -d ended,
# after c1 stopped counting (a CI run saw 3015 shed and 3009 errors).
say "== per-address limit behind HAProxy (--max-conns-per-ip 2 --proxy-protocol)"
behind haproxy --max-conns-per-ip 2
ip netns exec "$P-c1" "$LFBENCH" -q -c 12 -d 4 --max-errors 1000000 --json "$TMP/perip-c1.json" \
    "$BAL_F:$HAPORT" >"$TMP/perip-c1.out" 2>&1 &
p1=$!; PIDS+=("$p1")
sleep 1.5 # c1's connections are in and held (closed loop), its excess shed and retried
r2=0
ip netns exec "$P-c2" "$LFBENCH" -q -c 3 -d 1 --json "$TMP/perip-c2.json" "$BAL_F:$HAPORT" \
    >"$TMP/perip-c2.out" 2>&1 || r2=$?
r1=0; wait "$p1" || r1=$?
shed=$(btot lfepolld_worker_proxy_shed_per_ip_total)
e1=$(j "$TMP/perip-c1.json" .errors.total) e2=$(j "$TMP/perip-c2.json" .errors.total)
echo "    c1 (-c 12): $(j "$TMP/perip-c1.json" .requests) requests, $e1 errors (closed $(j "$TMP/perip-c1.json" .errors.closed));" \
    "c2 (-c 3): $(j "$TMP/perip-c2.json" .requests) requests, $e2 errors; backends shed $shed by address"
check "per-ip: c2's 3 connections all served (its own address, not the balancer's, is counted)" "$e2 -eq 0 && $r2 -eq 0 && $(j "$TMP/perip-c2.json" .requests) -gt 0"
check "per-ip: c1's excess is shed ($shed), each one a failed connection of c1's ($e1, up to 6 tries at the end uncounted)" "$shed -ge 6 && $shed -ge $e1 && $shed -le $((e1 + 6)) && $r1 -eq 0"
check "per-ip: c1's 6 allowed connections served" "$(j "$TMP/perip-c1.json" .requests) -gt 0"
fi

# --- 2: rolling restart under load through HAProxy ------------------------------------------
ROLL_HELD=0 ROLL_DC=0 ROLL_DR=0 ROLL_INFO=""
logsec() { # logsec LOG TEXT: the time (epoch seconds) of the first line of LOG with TEXT, or ""
    local t
    t=$(grep -m1 -F "$2" "$1" | cut -c1-12) || true
    [ -n "$t" ] && date -d "$t" +%s.%N || true
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "?"; else printf "%.3f\n", b - a }'; }
roll() { # replace b1, b2, b3 in turn, each by a --takeover successor, while the agents run
    local i old oldlog held dc dr t0 tt te
    echo "    roll: agents launched $(date +%T.%3N)"
    sleep 3.5 # the agents' --start-at +2, then a second of load
    for i in 1 2 3; do
        old=${BPID[$i]} oldlog=${BLOG[$i]}
        ts "b$i: scrape"
        held=$(metric "$i" lfepolld_connections)
        ts "b$i: start successor"
        t0=$(date +%s.%N)
        start_backend "$i" "${ROLL_ARGS[@]}"
        ts "b$i: move check"
        checkport "$i"
        ts "b$i: wait for the old one"
        if wait_exit "$old" 15; then ROLL_DONE=$((ROLL_DONE + 1)); else
            echo "    old b$i ($old) did not exit in 15 s"; kill -9 "$old"
        fi
        dc=$(stopstat "$oldlog" drain_closed) dr=$(stopstat "$oldlog" drain_raced)
        ROLL_HELD=$((ROLL_HELD + held)) ROLL_DC=$((ROLL_DC + ${dc:-0})) ROLL_DR=$((ROLL_DR + ${dr:-0}))
        # how long the hand-over took (successor started -> old told to stop) and the drain
        tt=$(logsec "$oldlog" "SIGTERM: stopping") te=$(logsec "$oldlog" "info: stopped")
        ROLL_INFO+=" b$i ($(date +%T.%3N)): held $held, drain_closed ${dc:-?} drain_raced ${dr:-?},"
        ROLL_INFO+=" handed over $(secs "$t0" "$tt") s after the successor started, drained in $(secs "$tt" "$te") s;"
        ROLL_LOGS+=" $oldlog"
        sleep 1
    done
    ROLL_END=$(date +%s.%N)
}
roll_pass() { # roll_pass NAME MAX_ERRORS LFBENCH-ARGS...
    local n=$1 maxe=$2 try inload f again; shift 2
    # The pass tests something only if the three hand-overs (and the second after each) fall
    # inside the agents' measured window. On this shared 2-CPU machine the harness's own steps
    # have stalled for seconds under load (one fresh-clone CI run ended the roll after the
    # agents): such a pass says nothing either way, so it is run once more, saying so, with the
    # old instances' logs; the second try counts. Every try prints how long each hand-over took.
    for try in 1 2; do
        again=""; [ "$try" = 1 ] || again=" (second try)"
        say "== $n: each backend replaced in turn (--takeover) under load through HAProxy$again"
        start_backends "${ROLL_ARGS[@]}"
        for i in 1 2 3; do checkport "$i"; done
        ha_up
        ROLL_HELD=0 ROLL_DC=0 ROLL_DR=0 ROLL_INFO="" ROLL_DONE=0 ROLL_LOGS=""
        DURING=roll agents "$n" "$BAL_F:$HAPORT" --max-errors "$maxe" "$@"
        summary "$n"
        echo "    old instances:$ROLL_INFO total held $ROLL_HELD, drain_closed $ROLL_DC, drain_raced $ROLL_DR"
        inload=$(awk -v a="$ROLL_END" -v b="$(j "$TMP/$n-c1.json" .end_wall)" 'BEGIN { print (a < b) ? 1 : 0 }')
        [ "$inload" = 1 ] && break
        echo "    the roll ended at $(date -d "@$ROLL_END" +%T.%3N), after the agents' window" \
            "($(date -d "@$(j "$TMP/$n-c1.json" .end_wall)" +%T.%3N)); the old instances said:"
        for f in $ROLL_LOGS; do grep -v '^stats:' "$f" | sed "s|^|      $(basename "$f"): |"; done
        sed 's/^/      timeline: /' "$TMP/timeline" | tail -12
    done
    check "$n: the three hand-overs happened under load" "$inload -eq 1"
    merge_exact "$n"
}
if want roll; then
ROLL_ARGS=(--proxy-protocol)
roll_pass roll-short 0 --mode short -c 8 -d "$DR"
m=$TMP/roll-short-merged.json
check "roll-short: zero failed requests" "$(j "$m" .errors.total) -eq 0 && $(j "$m" .lost) -eq 0 && '$AGENTS_RC' == '0 0'"
check "roll-short: zero resets" "$(j "$m" .errors.reset) -eq 0"
check "roll-short: each old instance drained and exited by itself ($ROLL_DONE of 3)" "$ROLL_DONE -eq 3"

ROLL_ARGS=(--proxy-protocol --lua "$ROOT/lua/http_hello.lua")
roll_pass roll-http 0 --expect http -c 16 -d "$DR"
m=$TMP/roll-http-merged.json
check "roll-http: zero failed requests (HTTP keep-alive)" "$(j "$m" .errors.total) -eq 0 && $(j "$m" .lost) -eq 0 && '$AGENTS_RC' == '0 0'"
check "roll-http: zero resets" "$(j "$m" .errors.reset) -eq 0"
check "roll-http: non-2xx responses 0" "$(j "$m" .http_non2xx) -eq 0"
check "roll-http: clients reconnected (Connection: close while draining)" "$(j "$m" .reconnects) -gt 0"

ROLL_ARGS=(--proxy-protocol)
roll_pass roll-long 1000 -c 15 -d "$DR"
m=$TMP/roll-long-merged.json
e=$(j "$m" .errors.total)
echo "    long echo: $e errors for $ROLL_HELD connections held by the old instances (drain_raced $ROLL_DR)"
check "roll-long: errors ($e) <= connections the old instances held ($ROLL_HELD)" "$e -le $ROLL_HELD"
check "roll-long: no resets or mismatches" "$(j "$m" .errors.reset) -eq 0 && $(j "$m" .errors.mismatch) -eq 0"
fi

# --- 3: a backend killed with SIGKILL under load --------------------------------------------
KILL_HELD=0 KILL_BEFORE=0
killer() {
    echo "    agents launched $(date +%T.%3N)"
    sleep 3.5
    ts "scrape"
    KILL_HELD=$(metric 2 lfepolld_connections)
    ts "scrape b1"
    KILL_BEFORE=$(metric 1 lfepolld_worker_bytes_out_total)
    ts "scrape b3"
    KILL_BEFORE=$((KILL_BEFORE + $(metric 3 lfepolld_worker_bytes_out_total)))
    ts "kill b2"
    local t0
    t0=$(date +%s.%N)
    { kill -9 "${BPID[2]}"; wait "${BPID[2]}" || true; } 2>/dev/null # no "Killed" notice
    ts "b2 reaped"
    KILL_AT=$(date +%s.%N)
    echo "    b2 killed at $(date -d "@$t0" +%T.%3N), reaped $(secs "$t0" "$KILL_AT") s later"
    BPID[2]=""
}
kill_pass() { # kill_pass BAL
    local bal=$1 n="kill-$1" target after try inload again
    # As for the rolls: a kill that (with its reaping) ends less than 1 s before the agents'
    # window does says nothing; the pass runs once more, saying so, and the second try counts.
    # Reaping took 2.5-8.5 s in about 1 kill of 8 under load here (bash's wait on the killed
    # backend, in its namespace; the machine itself did not stall: a 20 ms heartbeat beside it
    # saw no gap; not seen outside the namespaces: 20 kills, all under 6 ms). Not understood.
    for try in 1 2; do
        again=""; [ "$try" = 1 ] || again=" (second try)"
        say "== $n: b2 killed with SIGKILL under load ($bal)$again"
        behind "$bal"
        target=$TARGET
        HALINES=$(wc -l <"$TMP/haproxy.log")
        DURING=killer agents "$n" "$target" --max-errors 1000000 --timeout 1000ms -c 15 -d "$DK"
        summary "$n"
        after=$(($(metric 1 lfepolld_worker_bytes_out_total) + $(metric 3 lfepolld_worker_bytes_out_total)))
        KILL_ERR=$(j "$TMP/$n-merged.json" .errors.total)
        echo "    b2 held $KILL_HELD connections when killed; clients' errors $KILL_ERR;" \
            "b1+b3 echoed $(((after - KILL_BEFORE) / 64)) requests after the kill"
        inload=$(awk -v a="$KILL_AT" -v b="$(j "$TMP/$n-c1.json" .end_wall)" 'BEGIN { print (a + 1 < b) ? 1 : 0 }')
        [ "$inload" = 1 ] && break
        echo "    the kill ended at $(date -d "@$KILL_AT" +%T.%3N), less than 1 s before the agents' end" \
            "($(date -d "@$(j "$TMP/$n-c1.json" .end_wall)" +%T.%3N)); timeline:"
        sed 's/^/      /' "$TMP/timeline" | tail -6
    done
    check "$n: the kill happened under load (1 s before the agents' end at least)" "$inload -eq 1"
    check "$n: the run went on after the kill (b1+b3 served more)" "$after -gt $KILL_BEFORE"
    merge_exact "$n"
}
if want kill; then
kill_pass haproxy
check "kill-haproxy: errors ($KILL_ERR) <= connections b2 held ($KILL_HELD)" "$KILL_ERR -le $KILL_HELD"
check "kill-haproxy: agents exit 0 (within --max-errors)" "'$AGENTS_RC' == '0 0'"
tail -n +"$((HALINES + 1))" "$TMP/haproxy.log" | grep 'lfe/b2 is DOWN' | head -1 | sed 's/^/    HAProxy: /' || true
kill_pass nft
echo "    nftables has no health check: numgen keeps sending a third of new connections to b2's" \
    "address, where the kernel refuses them; $KILL_ERR errors (b2 held $KILL_HELD)"
fi
stop_backends

DONE=1 # the summary line is printed by cleanup, last
