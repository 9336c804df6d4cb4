#!/usr/bin/env bash
# TLS on the server side, side by side (issue 36's goals): lfepolld's TLS listeners against
# nginx's stream module and the TLS peers of tests/bench/peers (tls_epoll_echo, the floor;
# go_tls_echo; tokio_tls_echo). One ECDSA P-256 certificate for everyone (RSA-4096 in the
# leader-follower part), made for the run; lfbench offers TLS 1.3, X25519 and AES-128-GCM alone,
# so that every server negotiates the same (Python's ssl, where lfbench has no --tls: TLS 1.3,
# X25519 first, OpenSSL's suites). Each server is started fresh for each run, pinned to CPU 0 (taskset -c), the load on
# CPU 1; the servers alternate A B C, C B A, so that a drift of the machine touches all alike.
# Server CPU is what the server's processes used (utime + stime from /proc, its whole process
# group: nginx's master and worker and the echo behind it), not a CPU's busy time.
#
#   tests/bench/tls_server.sh                 every part, about 5 minutes after the build
#   PARTS="hs idle" REPS=1 tests/bench/tls_server.sh
#
# The parts (PARTS, default "hs long idle lf"):
#   hs    full and resumed handshakes per server CPU second, one connection at a time (-c 1):
#         lfbench --tls --mode short where lfbench has --tls, else tests/bench/tls_handshakes.py
#         (openssl s_time -reuse does not resume under TLS 1.3: it never reads the tickets).
#         lfepolld, nginx (stream, listen ssl + return), tls_epoll_echo.
#   long  100 long connections, 64 B echo, closed loop (lfbench --tls): server CPU per request.
#         lfepolld, tls_epoll_echo, go, tokio, and nginx (stream, listen ssl + proxy_pass to
#         epoll_st on the same CPU, whose CPU is counted with nginx's).
#   idle  server memory (RSS) per idle TLS connection at IDLE_N connections, each handshaken and
#         then silent (peers/c/tls_idle_conns). nginx twice: stream + proxy_pass (two sockets a
#         connection, so at most 9,000 of them under the 20,000 descriptors) and http (listen
#         ssl, waiting for a request: one socket, TLS state alone).
#   lf    the leader-follower case: 50 established connections sending 64 B requests open loop
#         (lfbench --tls -R LF_RATE) while new connections make full RSA-4096 handshakes at
#         HS_RATE (lfbench --tls --mode short -R), HS_RATE calibrated to keep the server CPU
#         about half busy. p99 of the small requests: lfepolld with one group of LF_WORKERS
#         workers, the same without the handshakes, one worker, one nginx worker.
# Results: build/bench/tls/<time>/ (report.md, raw.txt, a log per run; lf.png where gnuplot is).
#
# Knobs (defaults): REPS=3 DUR=3 (seconds a run measures), IDLE_N=10000, LF_WORKERS=4,
# LF_RATE=2000 (small requests/s over the 50 connections), HS_RATE= (calibrated), PARTS,
# ONLY="lf st go tokio nginx" (servers), SKIP_BUILD=1, LFEPOLLD, LFBENCH (binaries to use),
# PEER_BIN (build/peers), SRV_CPU=0 CLI_CPU=1, PORT_BASE (lib.sh), MAX_S=345: no run starts after
# that many seconds of measuring (each is bounded too), so the whole stays under 6 minutes; the
# runs left out are listed as out_of_time and the exit status is 1.
# Changes no sysctl. The figures are the machine's as it is: on a shared or loaded host they
# mean little (the header prints the load average).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
REPS=${REPS:-3} DUR=${DUR:-3} IDLE_N=${IDLE_N:-10000} LF_WORKERS=${LF_WORKERS:-4}
LF_RATE=${LF_RATE:-2000} HS_RATE=${HS_RATE:-} PARTS=${PARTS:-hs long idle lf}
ONLY=${ONLY:-lf st go tokio nginx} SRV_CPU=${SRV_CPU:-0} CLI_CPU=${CLI_CPU:-1}
LFEPOLLD=${LFEPOLLD:-$top/lfepolld} LFBENCH=${LFBENCH:-$top/lfbench}
bin=$(readlink -m "${PEER_BIN:-$top/build/peers}")
ulimit -n "$(ulimit -Hn)"
MAX_S=${MAX_S:-345}

if [ -z "${SKIP_BUILD:-}" ]; then
    make -s --no-print-directory -C "$top" lfepolld lfbench peers PEER_BIN="$bin" >&2 ||
        { echo "tls_server.sh: make failed" >&2; exit 1; }
fi
started=$SECONDS
for b in "$bin/tls_epoll_echo" "$bin/tls_idle_conns" "$bin/epoll_st"; do
    [ -x "$b" ] || { echo "tls_server.sh: no $b: make peers builds it" >&2; exit 1; }
done
command -v openssl >/dev/null || { echo "tls_server.sh: no openssl (apt-get install openssl)" >&2; exit 1; }

# What the binaries can do, read from their --help (lfepolld's TLS listeners, lfbench's --tls).
lf_tls=$("$LFEPOLLD" --help 2>&1 | grep -c -- '--tls-cert')
lb_tls=$("$LFBENCH" --help 2>&1 | grep -c -- '--tls')
out=$top/build/bench/tls/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
raw=$out/raw.txt
: >"$raw"
note() { echo "$*" | tee -a "$out/notes.txt" >&2; }
[ "$lf_tls" -gt 0 ] || note "$LFEPOLLD has no TLS listener (--tls-cert in its --help): lfepolld's rows are left out"
[ "$lb_tls" -gt 0 ] || note "$LFBENCH has no --tls: the parts long and lf are left out, hs uses tests/bench/tls_handshakes.py"
chosen() { [[ " $ONLY " == *" $1 "* ]]; }
part() { [[ " $PARTS " == *" $1 "* ]]; }

# The certificates: ECDSA P-256 for everything but lf, RSA-4096 for lf (a few seconds to make).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$out/ec.key" \
    -out "$out/ec.pem" -days 2 -subj /CN=localhost 2>"$out/openssl.log" ||
    { echo "tls_server.sh: openssl cannot make a certificate: $(cat "$out/openssl.log")" >&2; exit 1; }
if part lf && [ "$lb_tls" -gt 0 ]; then
    openssl req -x509 -newkey rsa:4096 -nodes -keyout "$out/rsa.key" -out "$out/rsa.pem" -days 2 \
        -subj /CN=localhost 2>>"$out/openssl.log" || { echo "tls_server.sh: no RSA-4096 certificate" >&2; exit 1; }
fi
head -c 64 /dev/urandom | base64 -w0 | head -c 64 >"$out/req64" # nginx's return says these bytes

# nginx_conf MODE PORT CERT KEY BACKEND: a config for one nginx (one worker) in $out/MODE-PORT/.
# MODE return: stream, listen ssl, return the 64 bytes (req64) and close: the handshake rate.
# MODE proxy: stream, listen ssl, proxy_pass to 127.0.0.1:BACKEND (epoll_st): the echo.
# MODE http: http, listen ssl, an idle connection waiting for its request (idle part only).
nginx_conf() {
    local d=$out/nginx-$1-$2 srv
    mkdir -p "$d"
    case $1 in
    return) srv="stream { $(nginx_ssl "$3" "$4") server { listen 127.0.0.1:$2 ssl; return '$(cat "$out/req64")'; } }" ;;
    proxy) srv="stream { $(nginx_ssl "$3" "$4") server { listen 127.0.0.1:$2 ssl; proxy_pass 127.0.0.1:$5; } }" ;;
    http) srv="http { access_log off; client_header_timeout 1h; keepalive_timeout 1h; $(nginx_ssl "$3" "$4")
            server { listen 127.0.0.1:$2 ssl; location / { return 200 ok; } } }" ;;
    esac
    # error_log at alert: the [crit] line nginx writes when a client's request comes after its
    # close_notify (return) would be a write(2) per connection in the measured CPU
    cat >"$d/nginx.conf" <<EOF
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
daemon off;
worker_processes 1;
pid $d/nginx.pid;
error_log $d/error.log alert;
worker_rlimit_nofile $(ulimit -Hn);
events { worker_connections $(( $(ulimit -Hn) - 100 )); }
$srv
EOF
    echo "$d/nginx.conf"
}
nginx_ssl() { echo "ssl_certificate $1; ssl_certificate_key $2; ssl_protocols TLSv1.2 TLSv1.3; ssl_ecdh_curve X25519;"; }

# server_cmd NAME PORT CERT KEY: sets cmd, the command line that serves TLS echo (nginx: MODE
# return for hs, proxy otherwise; nginx-http for idle) on 127.0.0.1:PORT, and bport: a second
# port to wait for (nginx's echo behind it), or empty.
server_cmd() {
    local c
    bport=
    case $1 in
    lf | lf[0-9]*) # lfW: one group of W workers on the CPU; lf: lfepolld's default plan there
        local w=${1#lf}
        cmd="$LFEPOLLD --listen-tls 127.0.0.1:$2 --tls-cert $3 --tls-key $4 --cpus $SRV_CPU -q${w:+ --workers $w}" ;;
    st) cmd="$bin/tls_epoll_echo --cert $3 --key $4 --port $2" ;;
    go) cmd="$bin/go_tls_echo --cert $3 --key $4 --port $2" ;;
    tokio) cmd="$bin/tokio_tls_echo --cert $3 --key $4 --port $2" ;;
    nginx-return) cmd="nginx -e /dev/null -c $(nginx_conf return "$2" "$3" "$4")" ;;
    nginx-http) cmd="nginx -e /dev/null -c $(nginx_conf http "$2" "$3" "$4")" ;;
    nginx | nginx-proxy)
        bport=$(low_port)
        while [ "$bport" = "$2" ]; do bport=$(low_port); done
        c=$(nginx_conf proxy "$2" "$3" "$4" "$bport")
        cmd="$bin/epoll_st $bport & exec nginx -e /dev/null -c $c" ;;
    esac
}
have() { # have NAME: the server's binary is there (a line and no otherwise)
    case $1 in
    lf*) [ "$lf_tls" -gt 0 ] ;;
    go) [ -x "$bin/go_tls_echo" ] || { note "no $bin/go_tls_echo (make peers says why): go left out"; return 1; } ;;
    tokio) [ -x "$bin/tokio_tls_echo" ] || { note "no $bin/tokio_tls_echo (make peers says why): tokio left out"; return 1; } ;;
    nginx*) [ -f /usr/lib/nginx/modules/ngx_stream_module.so ] && command -v nginx >/dev/null ||
        { note "no nginx with its stream module (apt-get install nginx-light libnginx-mod-stream): nginx left out"; return 1; } ;;
    esac
}

spid=
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]; }
stop_server() {
    [ -n "$spid" ] || return 0
    kill -TERM -- "-$spid" 2>/dev/null
    for _ in $(seq 40); do alive "$spid" || break; sleep 0.05; done
    kill -KILL -- "-$spid" 2>/dev/null # and what it started (nginx's worker, the echo behind it)
    wait "$spid" 2>/dev/null
    spid=
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# start NAME CERT KEY LOG: a fresh server on a free port, pinned; sets port (and spid), or
# why (start_failed; out_of_time once MAX_S seconds of the run are gone: the bound).
start() {
    why=out_of_time
    [ $((SECONDS - started)) -lt "$MAX_S" ] || return 1
    why=start_failed
    port=$(low_port) || return 1
    server_cmd "$1" "$port" "$2" "$3"
    echo "$cmd" >"$4"
    setsid taskset -c "$SRV_CPU" sh -c "exec 2>>'$4'; $cmd" </dev/null >>"$4" 2>&1 &
    spid=$!
    for _ in $(seq 200); do
        alive "$spid" || return 1
        listening "$port" && { [ -z "$bport" ] || listening "$bport"; } && return 0
        sleep 0.05
    done
    return 1
}
# cpu_ticks: utime + stime of every process in the server's process group, in clock ticks.
cpu_ticks() {
    local p s t=0
    for p in $(pgrep -g "$spid"); do
        s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        # shellcheck disable=SC2086 # the fields after the command's name: utime is the 12th
        set -- ${s##*) }
        t=$((t + ${12} + ${13}))
    done
    echo "$t"
}
rss_kb() { # the summed VmRSS of the server's process group
    local p t=0 r
    for p in $(pgrep -g "$spid"); do
        r=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null) && t=$((t + ${r:-0}))
    done
    echo "$t"
}
hz=$(getconf CLK_TCK)
# order REP NAMES...: A B C on odd repetitions, C B A on even ones
order() { local rep=$1; shift; if [ $((rep % 2)) = 1 ]; then echo "$*"; else echo "$*" | tr ' ' '\n' | tac | tr '\n' ' '; fi; }
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@" 2>/dev/null; }
record() { echo "$*" | tee -a "$raw" >&2; }
# lfb ARGS...: lfbench over TLS, pinned, bounded; TLS 1.3, X25519 and AES-128-GCM offered alone,
# so that every server negotiates the same (each would pick its own suite otherwise)
lfb() {
    timeout $((DUR + 60)) taskset -c "$CLI_CPU" "$LFBENCH" --tls --tls-insecure --tls-version 1.3 \
        --tls-groups X25519 --tls-ciphersuites TLS_AES_128_GCM_SHA256 "$@"
}

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); lfepolld $(git -C "$top" rev-parse --short HEAD 2>/dev/null)"
    echo "machine: $(nproc) CPUs, kernel $(uname -r), \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')\"; load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "tools: $(openssl version); $(nginx -v 2>&1); $(command -v go >/dev/null && go version | cut -d' ' -f3); $(command -v rustc >/dev/null && rustc --version | cut -d' ' -f1-2)"
    echo "config: REPS=$REPS DUR=${DUR}s, server on CPU $SRV_CPU, load on CPU $CLI_CPU; PARTS=$PARTS; lfepolld $LFEPOLLD; lfbench $LFBENCH$([ "$lb_tls" -gt 0 ] || echo ' (no --tls)')"
} >"$out/header.txt"
cat "$out/header.txt" >&2

# --- hs: handshakes per server CPU second ------------------------------------------------
hs_run() { # hs_run NAME MODE REP
    local log=$out/hs.$1.$2.$3.log name=$1 c0 c1 res n rc
    [ "$name" = nginx ] && name=nginx-return
    start "$name" "$out/ec.pem" "$out/ec.key" "$log" || { record "part=hs server=$1 mode=$2 rep=$3 rc=$why"; stop_server; return; }
    c0=$(cpu_ticks)
    if [ "$lb_tls" -gt 0 ]; then
        # shellcheck disable=SC2046 # the options for each mode
        lfb --mode short -c 1 -d "$DUR" --payload "$out/req64" --tls-resume $([ "$2" = resumed ] && echo 1 || echo 0) \
            --json "$log.json" -q "127.0.0.1:$port" >>"$log" 2>&1
        rc=$?
        n=$(json "$log.json" 'd["requests"]')
        res="handshakes=${n:-0} resumed=$(json "$log.json" 'd["tls"]["handshakes_resumed"]')"
    else
        res=$(taskset -c "$CLI_CPU" timeout $((DUR + 30)) python3 "$top/tests/bench/tls_handshakes.py" "$port" "$DUR" \
            $([ "$2" = resumed ] && echo --resume) 2>>"$log")
        rc=$?
    fi
    n=$(sed -n 's/^handshakes=\([0-9]*\) resumed=\([0-9]*\).*/\1 \2/p' <<<"$res")
    # a resumed run that resumed less than 9 in 10 measured something else: failed
    [ "$2" = resumed ] && [ "$rc" = 0 ] && [ -n "${n#* }" ] && [ "${n#* }" -lt $((${n% *} * 9 / 10)) ] && rc=not_resumed
    c1=$(cpu_ticks)
    alive "$spid" || rc="$rc,server_died"
    stop_server
    record "part=hs server=$1 mode=$2 rep=$3 rc=$rc $res cpu_s=$(awk -v a="$c0" -v b="$c1" -v h="$hz" 'BEGIN {printf "%.2f", (b - a) / h}')"
}
if part hs; then
    names=()
    for s in lf st nginx; do chosen "$s" && have "$s" && names+=("$s"); done
    for rep in $(seq "$REPS"); do
        for mode in full resumed; do
            for s in $(order "$rep" "${names[@]}"); do hs_run "$s" "$mode" "$rep"; done
        done
    done
fi

# --- long: 64 B echo on 100 long connections, server CPU per request --------------------------
long_run() { # long_run NAME REP
    local log=$out/long.$1.$2.log prev now c0= c1= n=0 line r rc
    start "$1" "$out/ec.pem" "$out/ec.key" "$log" || { record "part=long server=$1 rep=$2 rc=$why"; stop_server; return; }
    # The CPU counted is the measured window's alone, not the 100 handshakes of the opening (at
    # OpenSSL 3.0's cost they would be several % of a 3 s run): the server's CPU is read as each
    # of lfbench's per-second lines arrives, and a "measure" line's interval began at the line
    # before it; its requests are summed.
    prev=$(cpu_ticks)
    while IFS= read -r line; do
        now=$(cpu_ticks)
        if [[ $line == *'"phase": "measure"'* ]]; then
            [ -n "$c0" ] || c0=$prev
            c1=$now
            r=${line#*\"requests\": }
            n=$((n + ${r%%,*}))
        fi
        prev=$now
    done < <(lfb -c 100 --size 64 -d "$DUR" --warmup 1 --json "$log.json" --json-stream - -q "127.0.0.1:$port" 2>>"$log")
    wait $!
    rc=$?
    alive "$spid" || rc="$rc,server_died"
    stop_server
    [ -n "$c0" ] || { c0=0 c1=0 n=0; } # no measured line: the record says requests=0
    record "part=long server=$1 rep=$2 rc=$rc requests=$n errors=$(json "$log.json" 'd["errors"]["total"]') cpu_s=$(awk -v a="$c0" -v b="$c1" -v h="$hz" 'BEGIN {printf "%.2f", (b - a) / h}')"
}
if part long && [ "$lb_tls" -gt 0 ]; then
    names=()
    for s in lf st go tokio nginx; do chosen "$s" && have "$s" && names+=("$s"); done
    for rep in $(seq "$REPS"); do
        for s in $(order "$rep" "${names[@]}"); do long_run "$s" "$rep"; done
    done
fi

# --- idle: memory per idle TLS connection ----------------------------------------------------
idle_run() { # idle_run NAME: one run (memory does not drift as CPU does)
    local log=$out/idle.$1.log n=$IDLE_N r0 r1 line
    [ "$1" = nginx-proxy ] && [ "$n" -gt 9000 ] && n=9000 # two descriptors a connection in nginx
    start "$1" "$out/ec.pem" "$out/ec.key" "$log" || { record "part=idle server=$1 rc=$why"; stop_server; return; }
    sleep 0.5
    r0=$(rss_kb)
    coproc IDLE { taskset -c "$CLI_CPU" timeout 120 "$bin/tls_idle_conns" "$port" "$n" 2>>"$log"; }
    read -r -t 120 line <&"${IDLE[0]}"
    sleep 1
    r1=$(rss_kb)
    [ -n "${IDLE[1]:-}" ] && exec {IDLE[1]}>&-
    wait "$IDLE_PID" 2>/dev/null
    alive "$spid" || line="$line,server_died"
    stop_server
    if [ "$line" = "open $n" ]; then
        record "part=idle server=$1 rc=0 conns=$n rss0_kb=$r0 rss1_kb=$r1"
    else
        record "part=idle server=$1 rc=failed conns=$n ($line: $(tail -n1 "$log"))"
    fi
}
if part idle; then
    for s in lf st go tokio nginx-proxy nginx-http; do
        chosen "${s%%-*}" && have "$s" && idle_run "$s"
    done
fi

# --- lf: small requests' p99 while RSA-4096 handshakes arrive ------------------------------------
lf_run() { # lf_run NAME REP: NAME lfW, lfW-quiet (no handshakes), lf1, nginx
    local log=$out/lf.$1.$2.log srv=${1%-quiet} hs= rc hrc=0 c0 c1
    [ "$srv" = lfW ] && srv=lf$LF_WORKERS
    [ "$srv" = lf1 ] && srv=lf1
    start "$srv" "$out/rsa.pem" "$out/rsa.key" "$log" || { record "part=lf server=$1 rep=$2 rc=$why"; stop_server; return; }
    if [[ $1 != *-quiet ]]; then # the handshakes: a second lfbench, a connection per request
        lfb --tls-resume 0 --mode short -c 16 -R "$HS_RATE" -d $((DUR + 3)) --max-errors 1000000 --json "$log.hs.json" -q \
            "127.0.0.1:$port" >"$log.hs" 2>&1 &
        hs=$!
        sleep 1 # the handshakes under way before the window opens
    fi
    c0=$(cpu_ticks)
    lfb -c 50 --size 64 -R "$LF_RATE" -d "$DUR" --warmup 1 --json "$log.json" -q "127.0.0.1:$port" >>"$log" 2>&1
    rc=$?
    c1=$(cpu_ticks)
    [ -n "$hs" ] && { wait "$hs"; hrc=$?; }
    alive "$spid" || rc="$rc,server_died"
    stop_server
    record "part=lf server=$1 rep=$2 rc=$rc hs_rc=$hrc p99_us=$(json "$log.json" 'd["latency"]["p99_us"]') p50_us=$(json "$log.json" 'd["latency"]["p50_us"]') requests=$(json "$log.json" 'd["requests"]') unsent=$(json "$log.json" 'd["unsent"]') handshakes=$(json "$log.hs.json" 'd["requests"]' || echo 0) busy=$(awk -v a="$c0" -v b="$c1" -v h="$hz" -v d="$DUR" 'BEGIN {printf "%.0f", 100 * (b - a) / h / (d + 1)}')%"
}
if part lf && [ "$lb_tls" -gt 0 ] && [ "$lf_tls" -gt 0 ]; then
    if [ -z "$HS_RATE" ]; then # half of what the server signs in a CPU second, measured here
        start st "$out/rsa.pem" "$out/rsa.key" "$out/lf.calibrate.log" || { echo "tls_server.sh: calibration: no server" >&2; exit 1; }
        c0=$(cpu_ticks)
        lfb --mode short -c 1 -d 2 --tls-resume 0 --json "$out/lf.calibrate.json" -q "127.0.0.1:$port" >>"$out/lf.calibrate.log" 2>&1
        c1=$(cpu_ticks)
        stop_server
        HS_RATE=$(awk -v n="$(json "$out/lf.calibrate.json" 'd["requests"]')" -v t=$((c1 - c0)) -v h="$hz" \
            'BEGIN {r = t > 0 ? n / (t / h) / 2 : 0; printf "%d", r < 1 ? 1 : r}')
        note "lf: RSA-4096 handshakes at $HS_RATE/s, half of what tls_epoll_echo signs per CPU second here"
    fi
    names=(lfW-quiet lfW lf1)
    chosen nginx && have nginx && names+=(nginx)
    for rep in $(seq "$REPS"); do
        for s in $(order "$rep" "${names[@]}"); do lf_run "$s" "$rep"; done
    done
fi

# --- the report ------------------------------------------------------------------------------
{
    cat "$out/header.txt"
    [ -s "$out/notes.txt" ] && sed 's/^/note: /' "$out/notes.txt"
    python3 - "$raw" "$out" "$LF_WORKERS" <<'EOF'
import statistics as st, sys, re
raw, out, lfw = sys.argv[1], sys.argv[2], sys.argv[3]
rows = []
for line in open(raw):
    rows.append(dict(kv.split("=", 1) for kv in line.split() if "=" in kv))
ok = [r for r in rows if r.get("rc") == "0"]
bad = [r for r in rows if r.get("rc") != "0" or r.get("hs_rc", "0") != "0"]
def med(xs):
    return st.median(xs) if xs else None
def ratio(a, b):
    return f"{a / b:.3g}×" if a and b else "n/a"
names = {"lf": "lfepolld", "st": "tls_epoll_echo", "go": "go_tls_echo", "tokio": "tokio_tls_echo",
         "nginx": "nginx stream", "nginx-proxy": "nginx stream → epoll_st", "nginx-http": "nginx http",
         "lfW": f"lfepolld, 1 group × {lfw} workers", "lfW-quiet": f"lfepolld, 1 group × {lfw} workers, no handshakes",
         "lf1": "lfepolld, 1 worker", }
hs = [r for r in ok if r["part"] == "hs"]
if hs:
    print("\n### Handshakes per server CPU second (median over the runs; ratio: lfepolld's to each)\n")
    print("| server | full | resumed | full: lfepolld ÷ it | resumed: lfepolld ÷ it |")
    print("|---|---:|---:|---:|---:|")
    m = {}
    for r in hs:
        c = float(r["cpu_s"])
        if c > 0:
            m.setdefault((r["server"], r["mode"]), []).append(int(r.get("handshakes") or 0) / c)
    for s in dict.fromkeys(r["server"] for r in hs):
        f, v = med(m.get((s, "full"), [])), med(m.get((s, "resumed"), []))
        lf_f, lf_v = med(m.get(("lf", "full"), [])), med(m.get(("lf", "resumed"), []))
        print(f"| {names[s]} | {f or 0:,.0f} | {v or 0:,.0f} | {ratio(lf_f, f)} | {ratio(lf_v, v)} |")
lg = [r for r in ok if r["part"] == "long" and r.get("requests") not in (None, "", "0")]
if lg:
    print("\n### Long connections, 64 B echo: server CPU per request (µs, median; ratio: lfepolld's to each)\n")
    print("| server | µs per request | lfepolld ÷ it |")
    print("|---|---:|---:|")
    m = {}
    for r in lg:
        m.setdefault(r["server"], []).append(float(r["cpu_s"]) * 1e6 / int(r["requests"]))
    for s, v in m.items():
        print(f"| {names[s]} | {med(v):.2f} | {ratio(med(m.get('lf', [])), med(v))} |")
idle = [r for r in ok if r["part"] == "idle"]
if idle:
    print("\n### Memory per idle TLS connection (RSS of the server's processes; kernel socket memory not in it)\n")
    print("| server | connections | bytes per connection | lfepolld ÷ it |")
    print("|---|---:|---:|---:|")
    per = {r["server"]: (int(r["rss1_kb"]) - int(r["rss0_kb"])) * 1024 / int(r["conns"]) for r in idle}
    for r in idle:
        s = r["server"]
        print(f"| {names[s]} | {int(r['conns']):,} | {per[s]:,.0f} | {ratio(per.get('lf'), per[s])} |")
# a run that fell behind its rates (lfbench's unsent, timeouts: of the handshakes or of the
# small requests) stays in the table, marked: a server that cannot keep up is a result too
lf = [r for r in rows if r.get("part") == "lf" and r.get("p99_us")]
if lf:
    print("\n### The leader-follower case: 64 B requests' p99 while RSA-4096 handshakes arrive (median)\n")
    print("| server | p99 µs | p50 µs | handshakes in a run | server CPU busy | p99 ÷ several workers' |")
    print("|---|---:|---:|---:|---:|---:|")
    m = {}
    for r in lf:
        m.setdefault(r["server"], []).append(r)
    base = med([float(r["p99_us"]) for r in m.get("lfW", [])])
    with open(f"{out}/lf.dat", "w") as dat:
        for s, rs in m.items():
            p99 = med([float(r["p99_us"]) for r in rs])
            p50 = med([float(r["p50_us"]) for r in rs])
            n = med([float(r["handshakes"] or 0) for r in rs])
            busy = med([float(r["busy"].rstrip("%")) for r in rs])
            behind = sum(r.get("hs_rc", "0") != "0" or r.get("rc") != "0" for r in rs)
            mark = f" (fell behind in {behind} of {len(rs)} runs: see below)" if behind else ""
            print(f"| {names[s]}{mark} | {p99:,.0f} | {p50:,.0f} | {n:,.0f} | {busy:.0f}% | {ratio(p99, base)} |")
            short = {"lfW-quiet": f"lfepolld {lfw}w, no handshakes", "lfW": f"lfepolld {lfw}w",
                     "lf1": "lfepolld 1w", "nginx": "nginx 1 worker"}[s]
            dat.write(f'"{short}" {p99 / 1000:.3f}\n')
    p = {s: med([float(r["p99_us"]) for r in rs]) for s, rs in m.items()}
    if base:
        print("\nissue 36's goals: several workers' p99 ÷ its own without handshakes "
              f"{ratio(base, p.get('lfW-quiet'))} (≤ 2×); ÷ one worker's {ratio(base, p.get('lf1'))}, "
              f"÷ nginx's {ratio(base, p.get('nginx'))} (each ≤ 0.33×)")
if bad:
    print(f"\nFailed runs (logs in {out}):")
    for r in bad:
        print("- " + " ".join(f"{k}={v}" for k, v in r.items()))
EOF
    echo
    echo "took $((SECONDS - started)) s; raw figures in $raw"
} | tee "$out/report.md"
if [ -s "$out/lf.dat" ] && command -v gnuplot >/dev/null; then
    gnuplot -e "set terminal png size 900,420; set output '$out/lf.png'; set style fill solid; set boxwidth 0.6;
        set ylabel 'p99 of 64 B requests (ms, log scale)'; set logscale y; set yrange [0.01:*];
        set title 'RSA-4096 handshakes at $HS_RATE/s beside 50 connections at $LF_RATE req/s (median p99)';
        set xtics noenhanced; plot '$out/lf.dat' using 0:2:xtic(1) with boxes notitle" 2>>"$out/notes.txt" &&
        echo "plot: $out/lf.png"
fi
! grep -qv ' rc=0 ' "$raw" && ! grep -q ' hs_rc=[^0]' "$raw"
