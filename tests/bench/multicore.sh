#!/usr/bin/env bash
# multicore: lfepolld side by side with SO_REUSEPORT epoll (one thread per CPU), tokio and Go on a
# machine with 8 or more CPUs: the server on the first half of the CPUs, echoload (the
# independent load generator) on the other half. Long connections (64 B, 1000 connections) and
# short ones (64 B, 400 in flight); lfepolld's default plan and its variants (accept threads,
# groups x workers, a Lua echo); then a scaling curve of short connections at 1, 2, 4... server
# CPUs. Per run: QPS, server CPU per request (the server CPUs' busy time per request, as
# echoload's -u reads it from /proc/stat), busy %, and for lfepolld the accept threads' CPU per
# connection and each accept thread's share of the connections (from its /metrics).
#
#   tests/bench/multicore.sh                   # REPS=2 DUR=3 WARM=1, about 4 minutes on 16 CPUs
#   ONLY="rp lf lf_a1" SCEN=short REPS=3 tests/bench/multicore.sh
#
# Knobs: SRV_CPUS, CLI_CPUS (default: the two halves of this process's CPUs), CLI_THREADS (the
# client CPUs), REPS, DUR, WARM, CURVE ("1 2 4": server CPU counts for the curve, the full half
# is the main table's), CURVE_ARGS (more lfepolld options there), EXTRA (more rows, one a line:
# NAME|CPUS|command, CPUS "all" for the server CPUs), ONLY (names), SCEN (long short), PEERS (the peers' binaries:
# echoload, epoll_reuseport, tokio_echo, go_echo; a missing one is skipped with one line),
# LFEPOLLD, OUT (results folder), BASE_PORT (below the ephemeral range). The machine's network
# settings are left as they are and printed; a benchmark host should have applied sysctl.conf
# (lfepolld --apply-sysctl) and an ip_local_port_range above BASE_PORT.
# Output: $OUT/raw.txt (one line a run), $OUT/report.md (medians), $OUT/curve.dat (gnuplot).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"

cpulist() { local c r=(); for c in ${1//,/ }; do [[ $c == *-* ]] && r+=($(seq ${c%-*} ${c#*-})) || r+=("$c"); done; echo "${r[*]}"; }
allowed=($(cpulist "$(taskset -pc $$ | sed 's/.*: //')"))
half=$((${#allowed[@]} / 2))
((half >= 1)) || { echo "multicore: needs 2 CPUs or more" >&2; exit 2; }
join() { local IFS=,; echo "$*"; }
SRV_CPUS=${SRV_CPUS:-$(join "${allowed[@]:0:half}")}
CLI_CPUS=${CLI_CPUS:-$(join "${allowed[@]:half}")}
srv=($(cpulist "$SRV_CPUS"))
nsrv=${#srv[@]}
CLI_THREADS=${CLI_THREADS:-$(cpulist "$CLI_CPUS" | wc -w)}
REPS=${REPS:-2} DUR=${DUR:-3} WARM=${WARM:-1}
PEERS=${PEERS:-$top/build/peers}
LFEPOLLD=${LFEPOLLD:-$top/lfepolld}
BASE_PORT=${BASE_PORT:-${PORT_BASE:-15000}}
OUT=${OUT:-$top/build/multicore/$(date +%Y%m%d-%H%M%S)}
CURVE=${CURVE:-$(for n in 1 2 4 8 16 32; do ((n < nsrv)) && printf '%s ' $n; done)}
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)"

# the servers: NAME|CPUS|command ({port} and {cpus} are replaced)
servers=()
have() { [[ -x $1 ]] || { echo "multicore: $1 not built: its rows are skipped" >&2; return 1; }; }
plan_servers() { # plan_servers N CPULIST SUFFIX: the cases for N server CPUs
    local n=$1 c=$2 s=$3
    have "$PEERS/epoll_reuseport" && servers+=("rp$s|$c|$PEERS/epoll_reuseport {port} $n")
    servers+=("lf$s|$c|$LFEPOLLD --listen 127.0.0.1:{port} --admin 127.0.0.1:{aport} --cpus {cpus} -q")
}
plan_servers "$nsrv" "$SRV_CPUS" ""
have "$PEERS/tokio_echo" && servers+=("tokio|$SRV_CPUS|$PEERS/tokio_echo {port}")
have "$PEERS/go_echo" && servers+=("go|$SRV_CPUS|$PEERS/go_echo {port}")
lf="$LFEPOLLD --listen 127.0.0.1:{port} --admin 127.0.0.1:{aport} --cpus {cpus} -q"
servers+=("lf_a1|$SRV_CPUS|$lf --accept-threads 1")
servers+=("lf_a4|$SRV_CPUS|$lf --accept-threads 4")
servers+=("lf_g4w2|$SRV_CPUS|$lf --groups $((nsrv / 2 > 0 ? nsrv / 2 : 1)) --workers 2")
servers+=("lf_g8w1|$SRV_CPUS|$lf --groups $nsrv --workers 1")
servers+=("lf_lua|$SRV_CPUS|$lf --lua lua/echo.lua")
# EXTRA: more rows, one a line, NAME|CPUS|command (CPUS "all": the server CPUs)
while IFS= read -r l; do
    [[ $l == *\|*\|* ]] && servers+=("${l/|all|/|$SRV_CPUS|}")
done <<<"${EXTRA:-}"
curve=()
for n in $CURVE; do
    c=$(join "${srv[@]:0:n}")
    have "$PEERS/epoll_reuseport" && curve+=("rp_c$n|$c|$PEERS/epoll_reuseport {port} $n")
    curve+=("lf_c$n|$c|$lf ${CURVE_ARGS:-}")
done
declare -A scen=([long]="-m long -s 64 -c 1000" [short]="-m short -s 64 -c 400")
selected() { [[ -z $2 ]] || [[ " $2 " == *" $1 "* ]]; }

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine: $(nproc) CPUs, kernel $(uname -r), CPU '$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')'"
    echo "sysctl: $(for k in net.core.somaxconn net.ipv4.tcp_max_syn_backlog net.ipv4.tcp_tw_reuse net.ipv4.ip_local_port_range net.ipv4.tcp_fastopen net.ipv4.tcp_migrate_req; do printf '%s=%s ' "${k##*.}" "$(sysctl -n $k 2>/dev/null | tr '\t' '-')"; done)"
    echo "config: server CPUs $SRV_CPUS, client CPUs $CLI_CPUS ($CLI_THREADS echoload threads), REPS=$REPS DUR=${DUR}s WARM=${WARM}s, curve at: $CURVE"
    echo "lfepolld: $($LFEPOLLD --version 2>&1 | head -1)"
} | tee "$OUT/header.txt" >&2

pid=
stop_server() {
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=
}
trap stop_server EXIT
trap 'exit 130' INT TERM
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
metrics() { # metrics PORT: lfepolld's /metrics (bash only: the machine may have no curl)
    local m
    exec 4<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf 'GET /metrics HTTP/1.0\r\n\r\n' >&4
    m=$(timeout 2 cat <&4)
    exec 4<&-
    echo "$m"
}
acc_ticks() { # the accept threads' user+system ticks
    local t s=0 c
    for t in /proc/"$1"/task/*; do
        read -r c <"$t/comm" 2>/dev/null || continue
        [[ $c == lfe-accept* ]] || continue
        s=$((s + $(awk '{print $14 + $15}' "$t/stat")))
    done
    echo $s
}
per_thread() { echo "$1" | awk '/^lfepolld_accept_accepted_total\{/ { split($1, a, "\""); printf "%s%s", n++ ? "," : "", $2 }'; }
sum_acc() { echo "$1" | awk '/^lfepolld_accept_accepted_total/ { s += $2 } END { print s + 0 }'; }

port=$BASE_PORT
hz=$(getconf CLK_TCK)
run_one() { # run_one SCEN NAME CPUS CMD REP
    local sc=$1 name=$2 cpus=$3 cmd=$4 rep=$5 aport res rc m0 m1 t0 t1 extra=""
    ((port += 2))
    aport=$((port + 1))
    cmd=${cmd//\{port\}/$port}
    cmd=${cmd//\{aport\}/$aport}
    cmd=${cmd//\{cpus\}/$cpus}
    taskset -c "$cpus" $cmd >"$OUT/$name.$sc.$rep.log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do up $port && break; sleep 0.05; done
    if ! up $port; then
        echo "rep=$rep scen=$sc server=$name rc=start_failed" | tee -a "$OUT/raw.txt" >&2
        stop_server
        return
    fi
    if [[ $cmd == *--admin* ]]; then
        m0=$(metrics $aport)
        t0=$(acc_ticks $pid)
    fi
    res=$(timeout $((DUR + WARM + 30)) taskset -c "$CLI_CPUS" "$PEERS/echoload" -p "$port" \
        -t "$CLI_THREADS" -d "$DUR" -w "$WARM" -u ${scen[$sc]} 2>>"$OUT/$name.$sc.$rep.log")
    rc=$?
    kill -0 "$pid" 2>/dev/null || rc="$rc,server_died"
    if [[ $cmd == *--admin* ]]; then
        m1=$(metrics $aport)
        t1=$(acc_ticks $pid)
        local dc=$(($(sum_acc "$m1") - $(sum_acc "$m0")))
        extra="acc_us_per_conn=$(awk -v t=$((t1 - t0)) -v hz=$hz -v c=$dc 'BEGIN { printf "%.2f", (c > 0 ? t / hz * 1e6 / c : 0) }') conns=$dc threads_accepted=$(per_thread "$m1")"
    fi
    stop_server
    echo "rep=$rep scen=$sc server=$name cpus=$cpus rc=$rc $res $extra" | tee -a "$OUT/raw.txt" >&2
}

for rep in $(seq "$REPS"); do
    for sc in long short; do
        selected $sc "${SCEN:-}" || continue
        for s in "${servers[@]}"; do
            IFS='|' read -r name cpus cmd <<<"$s"
            selected "$name" "${ONLY:-}" || continue
            [[ $sc == long && $name == lf_a[14] ]] && continue # accept threads: a short-connection matter
            run_one $sc "$name" "$cpus" "$cmd" "$rep"
        done
    done
    selected short "${SCEN:-}" || continue
    for s in "${curve[@]}"; do
        IFS='|' read -r name cpus cmd <<<"$s"
        selected "$name" "${ONLY:-}" || continue
        run_one short "$name" "$cpus" "$cmd" "$rep"
    done
done

# medians: QPS, server µs per request (busy of the server CPUs / QPS), busy %, accept µs/conn
awk -v out="$OUT/curve.dat" -v nsrv="$nsrv" '
function med(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
{
    delete v
    for (i = 1; i <= NF; i++) { k = substr($i, 1, index($i, "=") - 1); v[k] = substr($i, index($i, "=") + 1) }
    key = v["server"] " " v["scen"]
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    if (v["rc"] != "0") { bad[key]++; next }
    nc = split(v["cpus"], cl, ","); b = 0
    for (i = 1; i <= nc; i++) {
        if (cl[i] ~ /-/) { split(cl[i], r, "-"); for (c = r[1]; c <= r[2]; c++) b += v["cpu" c "_busy"] }
        else b += v["cpu" cl[i] "_busy"]
    }
    q[key] = q[key] " " v["qps"]; busy[key] = busy[key] " " b
    us[key] = us[key] " " (v["qps"] > 0 ? b / 100 * 1e6 / v["qps"] : 0)
    if (v["acc_us_per_conn"] != "") { acc[key] = acc[key] " " v["acc_us_per_conn"]; share[key] = v["threads_accepted"] }
}
END {
    print "| server | scenario | QPS | server µs/request | server busy % | accept µs/conn | per accept thread (last run) | failed |"
    print "|---|---|---:|---:|---:|---:|---|---:|"
    for (i = 1; i <= n; i++) {
        key = order[i]; split(key, kk, " ")
        printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", kk[1], kk[2],
            q[key] == "" ? "n/a" : sprintf("%.0fk", med(q[key]) / 1000),
            us[key] == "" ? "" : sprintf("%.2f", med(us[key])),
            busy[key] == "" ? "" : sprintf("%.0f%%", med(busy[key])),
            acc[key] == "" ? "" : sprintf("%.2f", med(acc[key])), share[key], bad[key] + 0
        if (kk[2] == "short" && (kk[1] == "rp" || kk[1] == "lf") && q[key] != "")
            printf "%s %s %.0f\n", kk[1], nsrv, med(q[key]) >> out
        if (kk[2] == "short" && kk[1] ~ /_c[0-9]+$/ && q[key] != "") {
            m = kk[1]; sub(/_c[0-9]+$/, "", m); c = kk[1]; sub(/.*_c/, "", c)
            printf "%s %s %.0f\n", m, c, med(q[key]) >> out
        }
    }
}' "$OUT/raw.txt" | tee "$OUT/report.md"
echo "multicore: results in $OUT" >&2
