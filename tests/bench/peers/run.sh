#!/usr/bin/env bash
# The peers side by side: each echo server of tests/bench/peers (and any given here) under the
# same echoload scenarios, interleaved, and a markdown table of QPS and server CPU per request.
#
#   tests/bench/peers/run.sh                                 build (make peers), run, report
#   tests/bench/peers/run.sh lf='./lfepolld --listen 127.0.0.1:{port} --cpus 0 -q'
#                                                            more servers: NAME='command {port}'
#
# For each repetition, each scenario, each server: the server starts fresh on a new port, pinned
# to SRV_CPUS with taskset, and echoload runs pinned to CLI_CPUS; so servers alternate A B C A
# B C and a slow drift of the machine touches all of them alike. A run fails (FAIL in the table,
# listed below it) when echoload exits non-zero (a mismatched byte, a lost request, a broken
# connection, nothing done), when the server does not start, or when it dies during the run.
# Servers are stopped through their own process group (setsid), never by name.
#
# Knobs (defaults):
#   DUR=5 WARM=1 REPS=3        measured seconds, warm-up seconds, repetitions
#   SRV_CPUS=0 CLI_CPUS=1      taskset CPU lists of the server and of echoload
#   CLI_THREADS=1              echoload threads (-t)
#   SRV_THREADS=               N: the threaded peers run N threads pinned over SRV_CPUS
#                              (epoll_rpN, uringN, go with N procs, tokio with N workers);
#                              unset: epoll_rp1, epoll_rp2, uring1, and go and tokio as the
#                              affinity mask makes them
#   ONLY="epoll_st uv"         only these servers;  SCEN="long_64B_100c": only these scenarios
#   EXTRA_SERVERS=$'a=cmd {port}\nb=cmd {port}'             more servers, one per line
#   EXTRA_SCENARIOS=$'short_400c=-m short -s 64 -c 400'     more scenarios: echoload options
#   SKIP_BUILD=1               do not run make peers first
#   PEER_BIN=build/peers       where the binaries are; results go to $PEER_BIN/results/<time>/
#   BASE_PORT=20000            ports counted up from here, below the ephemeral range (or PORT_BASE)
set -uo pipefail
top=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
. "$top/tests/bench/lib.sh"
DUR=${DUR:-5} WARM=${WARM:-1} REPS=${REPS:-3} SRV_CPUS=${SRV_CPUS:-0} CLI_CPUS=${CLI_CPUS:-1}
CLI_THREADS=${CLI_THREADS:-1} BASE_PORT=${BASE_PORT:-${PORT_BASE:-20000}} SRV_THREADS=${SRV_THREADS:-}
bin=$(readlink -m "${PEER_BIN:-$top/build/peers}")
ulimit -n "$(ulimit -Hn)" # 1000 connections need more than the usual soft limit of 1024

if [ -z "${SKIP_BUILD:-}" ]; then
    make -s --no-print-directory -C "$top" peers PEER_BIN="$bin" >&2 || { echo "run.sh: make peers failed" >&2; exit 1; }
fi
[ -x "$bin/echoload" ] || { echo "run.sh: no $bin/echoload: run make peers (or unset SKIP_BUILD)" >&2; exit 1; }

servers=("epoll_st=$bin/epoll_st {port}")
peer() { # peer NAME BINARY ARGS...: a default server, if its binary was built
    if [ -x "$2" ]; then
        local name=$1
        shift
        servers+=("$name=$*")
    else
        echo "run.sh: no $2 (make peers said why): $1 is left out" >&2
    fi
}
if [ -n "$SRV_THREADS" ]; then
    n=$SRV_THREADS
    peer "epoll_rp$n" "$bin/epoll_reuseport" "{port} $n $SRV_CPUS"
    peer "uring$n" "$bin/uring_echo" "{port} $n $SRV_CPUS"
    peer uv "$bin/uv_echo" "{port}"
    peer go "$bin/go_echo" "{port} $n"
    peer tokio "$bin/tokio_echo" "{port} $n"
else
    peer epoll_rp1 "$bin/epoll_reuseport" "{port} 1"
    peer epoll_rp2 "$bin/epoll_reuseport" "{port} 2"
    peer uring1 "$bin/uring_echo" "{port} 1"
    peer uv "$bin/uv_echo" "{port}"
    peer go "$bin/go_echo" "{port}"
    peer tokio "$bin/tokio_echo" "{port}"
fi
while IFS= read -r l; do [[ $l == *=* ]] && servers+=("$l"); done <<<"${EXTRA_SERVERS:-}"
for a in "$@"; do
    [[ $a == *=* ]] || { echo "run.sh: server '$a': want NAME='command {port}'" >&2; exit 2; }
    servers+=("$a")
done
scenarios=(
    "long_64B_100c=-m long -s 64 -c 100"
    "long_64B_1000c=-m long -s 64 -c 1000"
    "long_4KB_100c=-m long -s 4096 -c 100"
    "short_64B_50c=-m short -s 64 -c 50"
)
while IFS= read -r l; do [[ $l == *=* ]] && scenarios+=("$l"); done <<<"${EXTRA_SCENARIOS:-}"
chosen() { [ -z "$2" ] || [[ " $2 " == *" $1 "* ]]; }

out=$bin/results/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
raw=$out/raw.txt
: >"$raw"
spid=

alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]; }
stop_server() {
    [ -n "$spid" ] || return 0
    kill -TERM -- "-$spid" 2>/dev/null
    for _ in $(seq 40); do alive "$spid" || break; sleep 0.05; done
    kill -KILL -- "-$spid" 2>/dev/null # and whatever it started
    wait "$spid" 2>/dev/null
    spid=
}
trap stop_server EXIT
trap 'exit 130' INT TERM

start_server() { # start_server COMMAND PORT LOG: up to 10 s for the port to listen
    setsid taskset -c "$SRV_CPUS" sh -c "exec $1" </dev/null >"$3" 2>&1 &
    spid=$!
    for _ in $(seq 200); do
        alive "$spid" || return 1
        listening "$2" && return 0
        sleep 0.05
    done
    return 1
}

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine: $(nproc) CPUs, kernel $(uname -r), \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')\"$(grep -qw hypervisor /proc/cpuinfo && echo ' (virtualized)')"
    echo "tools: $(gcc --version | head -1); $(command -v go >/dev/null && go version | cut -d' ' -f3 || echo 'no go'); $(command -v rustc >/dev/null && rustc --version | cut -d' ' -f1-2 || echo 'no rustc'); libuv $(pkg-config --modversion libuv 2>/dev/null); liburing $(pkg-config --modversion liburing 2>/dev/null)"
    echo "sysctl: $(for k in net.ipv4.tcp_congestion_control net.core.somaxconn net.ipv4.tcp_tw_reuse net.ipv4.ip_local_port_range net.ipv4.tcp_max_tw_buckets; do printf '%s=%s ' "${k##*.}" "$(tr '\t' '-' <"/proc/sys/${k//.//}" 2>/dev/null)"; done)"
    echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "config: DUR=${DUR}s WARM=${WARM}s REPS=$REPS, server on CPUs $SRV_CPUS${SRV_THREADS:+ ($SRV_THREADS threads)}, echoload on CPUs $CLI_CPUS with $CLI_THREADS thread(s)"
} >"$out/header.txt"
cat "$out/header.txt" >&2

port=$BASE_PORT
for rep in $(seq "$REPS"); do
    for sc in "${scenarios[@]}"; do
        scn=${sc%%=*}
        chosen "$scn" "${SCEN:-}" || continue
        for srv in "${servers[@]}"; do
            name=${srv%%=*} cmd=${srv#*=}
            chosen "$name" "${ONLY:-}" || continue
            port=$((port + 1))
            while listening "$port"; do port=$((port + 1)); done
            log=$out/$name.$scn.$rep.log
            if ! start_server "${cmd//\{port\}/$port}" "$port" "$log"; then
                echo "rep=$rep scenario=$scn server=$name rc=start_failed" | tee -a "$raw" >&2
                stop_server
                continue
            fi
            # shellcheck disable=SC2086 # the scenario is a list of options
            res=$(timeout $((${DUR%.*} + ${WARM%.*} + 40)) taskset -c "$CLI_CPUS" "$bin/echoload" \
                -p "$port" -t "$CLI_THREADS" -d "$DUR" -w "$WARM" -u ${sc#*=} 2>>"$log")
            rc=$?
            alive "$spid" || rc="$rc,server_died"
            stop_server
            echo "rep=$rep scenario=$scn server=$name rc=$rc $res" | tee -a "$raw" >&2
            sleep 0.5
        done
    done
done

# Medians over the repetitions. Busy % is summed over the pinned CPUs in echoload's measured
# window; server µs per request = server busy / QPS (meaningful even where the client is the
# bottleneck, which on 2 CPUs it often is).
cpus() { local c r=(); for c in ${1//,/ }; do if [[ $c == *-* ]]; then r+=($(seq "${c%-*}" "${c#*-}")); else r+=("$c"); fi; done; echo "${r[*]}"; }
{
    cat "$out/header.txt"
    awk -v scpu="$(cpus "$SRV_CPUS")" -v ccpu="$(cpus "$CLI_CPUS")" -v out="$out" '
    function median(l,   a, n, i, j, t) {
        n = split(l, a, " ")
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function spread(l,   a, n, i, lo, hi, m) {
        n = split(l, a, " "); lo = hi = a[1] + 0
        for (i = 2; i <= n; i++) { if (a[i] + 0 < lo) lo = a[i] + 0; if (a[i] + 0 > hi) hi = a[i] + 0 }
        m = median(l)
        return m > 0 ? 100 * (hi - lo) / m : 0
    }
    function busy(list,   a, n, i, b) { n = split(list, a, " "); for (i = 1; i <= n; i++) b += kv["cpu" a[i] "_busy"]; return b }
    function short(x) { return x >= 1000 ? sprintf("%.1fk", x / 1000) : sprintf("%.0f", x) }
    {
        delete kv
        for (i = 1; i <= NF; i++) { e = index($i, "="); kv[substr($i, 1, e - 1)] = substr($i, e + 1) }
        s = kv["server"]; c = kv["scenario"]; k = s SUBSEP c
        if (!(s in seen_s)) { seen_s[s] = 1; srv[++ns] = s }
        if (!(c in seen_c)) { seen_c[c] = 1; scn[++nc] = c }
        if (kv["rc"] != "0") {
            bad[k]++
            fails = fails sprintf("- %s, %s, rep %s: rc=%s errors=%s connect_errors=%s mismatches=%s lost=%s\n", s, c, kv["rep"], kv["rc"], kv["errors"], kv["connect_errors"], kv["mismatches"], kv["lost"])
        }
        if (kv["qps"] == "") next
        sb = busy(scpu); cb = busy(ccpu)
        qps[k] = qps[k] " " kv["qps"]; p99[k] = p99[k] " " kv["p99_us"]
        sbusy[k] = sbusy[k] " " sb; cbusy[k] = cbusy[k] " " cb
        if (kv["qps"] > 0) us[k] = us[k] " " sb / 100 * 1e6 / kv["qps"]
        cerr[k] += kv["connect_errors"]
    }
    END {
        head = "| server |"; rule = "|---|"
        for (j = 1; j <= nc; j++) { head = head " " scn[j] " |"; rule = rule "---:|" }
        print "\n### QPS, median ±spread (max-min over the repetitions, % of the median) / median p99\n"
        print head; print rule
        for (i = 1; i <= ns; i++) {
            line = "| " srv[i] " |"
            for (j = 1; j <= nc; j++) {
                k = srv[i] SUBSEP scn[j]
                cell = qps[k] == "" ? "n/a" : sprintf("%.1fk ±%.0f%% / %s µs", median(qps[k]) / 1000, spread(qps[k]), short(median(p99[k])))
                if (bad[k]) cell = cell " **FAIL×" bad[k] "**"
                if (cerr[k]) cell = cell " (" cerr[k] " connect errors)"
                line = line " " cell " |"
            }
            print line
        }
        print "\n### Server CPU per request (µs), median — server CPUs busy % / client CPUs busy %\n"
        print head; print rule
        for (i = 1; i <= ns; i++) {
            line = "| " srv[i] " |"
            for (j = 1; j <= nc; j++) {
                k = srv[i] SUBSEP scn[j]
                cell = us[k] == "" ? "n/a" : sprintf("%.2f µs — %.0f%% / %.0f%%", median(us[k]), median(sbusy[k]), median(cbusy[k]))
                line = line " " cell " |"
            }
            print line
        }
        if (fails != "") printf "\nFailed runs (logs in %s):\n%s", out, fails
    }' "$raw"
} | tee "$out/report.md"
! grep -qv ' rc=0 ' "$raw"
