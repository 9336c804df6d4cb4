#!/usr/bin/env bash
# lfbench over TLS beside the tools its users know (issue 35's goals), each comparison
# alternated A B A B, then medians and ratios. nginx (one worker) on CPU 0, the client on CPU 1;
# an ECDSA P-256 certificate signed by a CA made now with the openssl CLI, TLS 1.3 and X25519
# only. Every tool's CPU is its process's user + system time (its rusage, read the same way for
# all), so the load of a shared machine moves the figures less than wall-clock rates.
#   a  long connections, HTTPS keep-alive, 64 B body, CONNS (100) connections: lfbench's client
#      CPU per request against wrk's (Debian's wrk uses OpenSSL; it verifies nothing)
#   b  short connections against nginx's stream module (`listen ssl` + `return "x"`): lfbench's
#      full handshakes per CPU second against `openssl s_time -new`, resumed (--tls-resume 1)
#      against `s_time -reuse` (both read the server's byte, as -www makes s_time do: without a
#      read TLS 1.3 gets no ticket); HS_CONNS (1, as s_time) connections in flight
#   c  --tls-resume 0.5: the share of resumed handshakes as nginx's access log counts them
#      ($ssl_session_reused), beside lfbench's own count when its JSON has one
#   d  long connections with --tls against the same run in plain text (same nginx, a plain
#      port): client CPU per request, and its ratio
#   e  short connections, full handshakes, -t 1 against -t E_THREADS (2; --cpus E_CPUS, 0-1,
#      the one thread on the first): handshakes per second and per CPU second. On 2 CPUs the
#      server shares one with the client, so the wall-clock ratio says little there; on a
#      machine with CPUs to spare it is the scaling (16 CPUs: NGINX_CPUS=8-15 NGINX_WORKERS=8
#      E_CPUS=0-7 E_THREADS=8, so that the server is not what stops it).
#   f  what b's full handshake costs are made of: lfbench verifying the chain (as in b) against
#      lfbench --tls-insecure, and s_time given the CA (as in b) against s_time given none (so
#      its chain check stops at the unknown issuer, before any signature is checked)
#   tests/bench/tls_client.sh [a b c d e f]   (default: a-e; needs an lfbench with --tls)
# Knobs: LFBENCH (./lfbench), REPS (5 pairs), DUR (3 s a run), CONNS (100), HS_CONNS (1),
# E_CPUS (0-1), E_THREADS (2), NGINX_CPUS (0), NGINX_WORKERS (1), QUICK=1 (REPS=1 DUR=0.5: a
# check that it all runs, in seconds; figures meaningless). The whole run is about 4 minutes at
# the defaults; each command is bounded by timeout (DUR + 20 s).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
if [ "${QUICK:-}" = 1 ]; then REPS=${REPS:-1} DUR=${DUR:-0.5}; fi
REPS=${REPS:-5} DUR=${DUR:-3} CONNS=${CONNS:-100} HS_CONNS=${HS_CONNS:-1} E_CPUS=${E_CPUS:-0-1}
E_THREADS=${E_THREADS:-2} NGINX_CPUS=${NGINX_CPUS:-0} NGINX_WORKERS=${NGINX_WORKERS:-1}
LFBENCH=${LFBENCH:-$top/lfbench}
parts=${*:-a b c d e}
for p in $parts; do
    case $p in [a-f]) ;; *) echo "usage: $0 [a b c d e f] (the comparisons to run; default a-e)" >&2; exit 2 ;; esac
done
[ -x "$LFBENCH" ] || { echo "$LFBENCH: no lfbench there (make, or LFBENCH=PATH)" >&2; exit 1; }
# (the help read whole first: grep -q would end the pipe early, and pipefail call that a failure)
help=$("$LFBENCH" --help 2>&1 || true)
grep -q -- '--tls-resume' <<<"$help" ||
    { echo "$LFBENCH has no --tls-resume: this script needs an lfbench with TLS (issue 35)" >&2; exit 1; }
for t in openssl nginx wrk python3 taskset timeout; do
    command -v $t >/dev/null || { echo "$t is not installed (make deps installs the test packages)" >&2; exit 1; }
done
cap=$(awk -v d="$DUR" 'BEGIN {printf "%d", d + 20}')

dir=$(mktemp -d)
trap 'nginx_stop; rm -rf "$dir"' EXIT
tls_certs "$dir"
https=$(low_port) # PORT_BASE (lib.sh)
plain=$(low_port)
stream=$(low_port)
[ "$https" != "$plain" ] && [ "$plain" != "$stream" ] && [ "$https" != "$stream" ] ||
    { echo "low_port gave one port twice: run again" >&2; exit 1; }
body=$(printf '%064d' 0)
{
    nginx_stream_module
    nginx_conf_head "$dir" "$NGINX_WORKERS"
    cat <<EOT
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    keepalive_requests 1000000000;
    keepalive_timeout 120s;
    ssl_certificate $dir/srv.pem;
    ssl_certificate_key $dir/srv.key;
    ssl_protocols TLSv1.3;
    ssl_ecdh_curve X25519;
    server {
        listen 127.0.0.1:$https ssl;
        listen 127.0.0.1:$plain;
        location / { default_type text/plain; return 200 "$body"; }
    }
}
stream {
    log_format hs '\$ssl_protocol \$ssl_curve \$ssl_session_reused';
    server {
        listen 127.0.0.1:$stream ssl;
        ssl_certificate $dir/srv.pem;
        ssl_certificate_key $dir/srv.key;
        ssl_protocols TLSv1.3;
        ssl_ecdh_curve X25519;
        access_log $dir/access.log hs;
        return "x";
    }
}
EOT
} >"$dir/nginx.conf"
nginx_start "$dir" "$NGINX_CPUS" "$https"
wait_listening "$stream" && wait_listening "$plain" || { echo "nginx did not listen on every port" >&2; exit 1; }
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR CONNS=$CONNS HS_CONNS=$HS_CONNS; $("$LFBENCH" --version 2>&1 | head -n1); $(openssl version)"

# Each run prints one line "NAME work=N cpu_s=S" (and extra=V fields), appended to $out.
out=$dir/runs
tls=(--tls-ca "$dir/ca.pem")
cpu_of() { awk '{printf "%.6f", $1 + $2}' "$dir/cpu"; }
json_get() { # FILE KEY...: the first of the keys (dotted paths) the JSON has, or nothing
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for key in sys.argv[2:]:
    v = d
    for k in key.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        print(v)
        break
PY
}
lfb() { # NAME [lfbench arguments]: one lfbench run on CPU 1 (or on $cpus)
    local name=$1 work
    shift
    rm -f "$dir/lfb.json"
    cpu_run "$dir/cpu" timeout "$cap" taskset -c "${cpus:-1}" "$LFBENCH" -q -d "$DUR" --json "$dir/lfb.json" "$@" \
        >"$dir/lfb.out" 2>&1 || { echo "$name: lfbench failed: $(tail -n2 "$dir/lfb.out" | tr '\n' ' ')" >&2; return 1; }
    # every request it made, as its CPU covers the whole run (warm-up and opening included)
    work=$(json_get "$dir/lfb.json" all_requests requests)
    echo "$name work=$work cpu_s=$(cpu_of)" | tee -a "$out"
}
wrk_run() { # NAME URL
    local work
    cpu_run "$dir/cpu" timeout "$cap" taskset -c 1 wrk -t 1 -c "$CONNS" -d "$(awk -v d="$DUR" 'BEGIN {printf "%d", d < 1 ? 1 : d}')s" "$2" >"$dir/wrk.out" 2>&1 ||
        { echo "$1: wrk failed: $(tail -n1 "$dir/wrk.out")" >&2; return 1; }
    work=$(awk '/requests in/ {print $1}' "$dir/wrk.out")
    echo "$1 work=$work cpu_s=$(cpu_of)" | tee -a "$out"
}
s_time_run() { # NAME -new|-reuse [s_time's trust options: the CA by default]
    local work name=$1 how=$2
    shift 2
    [ $# -gt 0 ] || set -- -CAfile "$dir/ca.pem" -verify 2
    set -- "$name" "$how" "$@"
    cpu_run "$dir/cpu" timeout "$cap" taskset -c 1 openssl s_time -connect 127.0.0.1:$stream "$2" -www / \
        -time "$(awk -v d="$DUR" 'BEGIN {printf "%d", d < 1 ? 1 : d}')" "${@:3}" \
        >"$dir/st.out" 2>&1 || { echo "$1: s_time failed: $(tail -n1 "$dir/st.out")" >&2; return 1; }
    # its first count (it prints a second one in real seconds); its CPU, as lfbench's, includes
    # its start (a few ms: a small share of a DUR of seconds, a large one of QUICK's)
    work=$(awk '/connections in/ {print $1; exit}' "$dir/st.out")
    echo "$1 work=$work cpu_s=$(cpu_of) s_time_user_rate=$(sed -n 's/.*; \([0-9.]*\) connections\/user sec.*/\1/p' "$dir/st.out" | head -n1)" |
        tee -a "$out"
}
pairs() { # A_NAME "A command" B_NAME "B command": REPS pairs, the order swapped every pair
    local rep
    for rep in $(seq "$REPS"); do
        if ((rep % 2)); then eval "$2"; eval "$4"; else eval "$4"; eval "$2"; fi
    done
}
short=(--mode short -c "$HS_CONNS" --expect bytes 1 --size 16 --tls "${tls[@]}" 127.0.0.1:$stream)
log_share() { # nginx's access log since the last call: "resumed/total"
    awk '{n++; if ($3 == "r") r++} END {printf "%d/%d", r, n}' "$dir/access.log"
    : >"$dir/access.log"
}

for p in $parts; do
    case $p in
    a)
        echo "== a: HTTPS keep-alive, $CONNS connections, 64 B body: lfbench against wrk (client CPU per request)"
        pairs a_lfbench 'lfb a_lfbench -t 1 -c "$CONNS" "${tls[@]}" https://127.0.0.1:$https/' \
            a_wrk 'wrk_run a_wrk https://127.0.0.1:$https/'
        ;;
    b)
        echo "== b: full handshakes, lfbench against openssl s_time -new (per client CPU second)"
        : >"$dir/access.log"
        pairs b_full_lfbench 'lfb b_full_lfbench "${short[@]}"' b_full_s_time 's_time_run b_full_s_time -new'
        echo "   nginx saw resumed/all: $(log_share) (all full: 0/N)"
        echo "== b: resumed handshakes, lfbench --tls-resume 1 against openssl s_time -reuse"
        pairs b_res_lfbench 'lfb b_res_lfbench --tls-resume 1 "${short[@]}"' \
            b_res_s_time 's_time_run b_res_s_time -reuse'
        echo "   nginx saw resumed/all: $(log_share) (all but the first of each run: N-runs/N)"
        ;;
    c)
        echo "== c: --tls-resume 0.5, the share nginx resumed"
        : >"$dir/access.log"
        lfb c_lfbench --tls-resume 0.5 "${short[@]}" >/dev/null
        share=$(log_share)
        own=$(json_get "$dir/lfb.json" tls.resumed handshakes.resumed tls.handshakes_resumed || true)
        awk -v s="$share" -v own="$own" 'BEGIN {split(s, x, "/")
            if (x[2] == 0) {print "   nginx logged no handshake of lfbench --tls-resume 0.5"; exit 1}
            printf "   nginx: %d of %d handshakes resumed, %.1f%% (goal 50%% +- 2%%: %s)%s\n",
            x[1], x[2], 100 * x[1] / x[2], (x[1] / x[2] >= 0.48 && x[1] / x[2] <= 0.52) ? "within" : "OUTSIDE",
            own == "" ? "; lfbench JSON: no resumed count found" : "; lfbench counted " own " resumed"}'
        ;;
    d)
        echo "== d: long connections, --tls against plain text (client CPU per request)"
        pairs d_tls 'lfb d_tls -t 1 -c "$CONNS" "${tls[@]}" https://127.0.0.1:$https/' \
            d_plain 'lfb d_plain -t 1 -c "$CONNS" http://127.0.0.1:$plain/'
        ;;
    e)
        echo "== e: full handshakes, 1 thread against $E_THREADS (--cpus $E_CPUS, 2 connections a thread; nginx on CPUs $NGINX_CPUS)"
        e1=${E_CPUS%%[-,]*}
        pairs e_t1 'cpus=$e1 lfb e_t1 -t 1 --cpus "$e1" --mode short -c 2 --expect bytes 1 --size 16 --tls "${tls[@]}" 127.0.0.1:$stream' \
            e_tn 'cpus=$E_CPUS lfb e_tn -t "$E_THREADS" --cpus "$E_CPUS" --mode short -c "$((2 * E_THREADS))" --expect bytes 1 --size 16 --tls "${tls[@]}" 127.0.0.1:$stream'
        ;;
    f)
        echo "== f: full handshakes: lfbench verifying against --tls-insecure; s_time given the CA against none"
        insecure=(--mode short -c "$HS_CONNS" --expect bytes 1 --size 16 --tls --tls-insecure 127.0.0.1:$stream)
        pairs f_lfbench_verify 'lfb f_lfbench_verify "${short[@]}"' \
            f_lfbench_insecure 'lfb f_lfbench_insecure "${insecure[@]}"'
        pairs f_s_time_ca 's_time_run f_s_time_ca -new' \
            f_s_time_no_ca 's_time_run f_s_time_no_ca -new -no-CAfile -no-CApath -no-CAstore'
        ;;
    esac
done

python3 - "$out" "$DUR" <<'PY'
import re, statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    name, rest = line.split(" ", 1)
    runs.setdefault(name, []).append({k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", rest)})
def med(name, f):
    return st.median(f(r) for r in runs[name]) if name in runs else None
def per_cpu(r): return r["work"] / r["cpu_s"]
def us_per(r): return r["cpu_s"] * 1e6 / r["work"]
print("== medians (per run: the tool's own count of requests or connections over its process's CPU)")
def line(label, a, b, f, unit, goal):
    x, y = med(a, f), med(b, f)
    if x is None or y is None:
        return
    print("%-40s %s %10.2f  %s %10.2f %s  ratio %.2f  (goal %s; %d runs each)"
          % (label, a, x, b, y, unit, x / y, goal, len(runs[a])))
line("a: client CPU per request", "a_lfbench", "a_wrk", us_per, "µs", "lfbench/wrk <= 1.0")
line("b: full handshakes per CPU second", "b_full_lfbench", "b_full_s_time", per_cpu, "/s", "lfbench/s_time >= 1.0")
line("b: resumed handshakes per CPU second", "b_res_lfbench", "b_res_s_time", per_cpu, "/s", "lfbench/s_time >= 1.0")
for n in ("b_full_s_time", "b_res_s_time"):
    if n in runs:
        print("   %s's own figure (connections per user second): %.0f" % (n, med(n, lambda r: r["s_time_user_rate"])))
line("d: client CPU per request", "d_tls", "d_plain", us_per, "µs", "tls/plain <= 1.5")
line("e: handshakes per CPU second", "e_tn", "e_t1", per_cpu, "/s", "N threads/1 near 1.0: no lock cost")
line("f: lfbench, verifying or not", "f_lfbench_verify", "f_lfbench_insecure", per_cpu, "/s", "the chain check's share")
line("f: s_time, given the CA or not", "f_s_time_ca", "f_s_time_no_ca", per_cpu, "/s", "the chain check's share")
line("f: lfbench against s_time, both verifying", "f_lfbench_verify", "f_s_time_ca", per_cpu, "/s", "lfbench/s_time >= 1.0")
line("f: lfbench against s_time, neither", "f_lfbench_insecure", "f_s_time_no_ca", per_cpu, "/s", "lfbench/s_time >= 1.0")
dur = float(sys.argv[2])
line("e: handshakes per second (wall, ~)", "e_tn", "e_t1", lambda r: r["work"] / dur, "/s",
     "N (threads) within 15%, where CPUs are spare")
PY
