#!/usr/bin/env bash
# Client TLS 1.3 handshakes with each TLS library (tests/bench/tls_libs/: OpenSSL 3, GnuTLS,
# wolfSSL; make bench-tls-libs builds them and runs this) against one nginx (stream module,
# `listen ssl` + `return "x"`, one worker on CPU 0), the same ECDSA P-256 certificate (signed by a
# CA the client checks, with the name) and X25519 for all, made now with the openssl CLI.
# Per run: handshakes per client CPU second (getrusage of the handshaking threads: the machine's
# load does not count), user µs per handshake, voluntary switches per handshake; full and
# resumed; 1 thread on CPU 1, then 2 threads on CPUs 0-1 with a context per thread and one shared
# (and, for OpenSSL, one OSSL_LIB_CTX per thread). The libraries alternate A B C A B C.
# Then instructions per handshake under valgrind's callgrind (1 thread): the difference of a run
# of CG_N2 and one of CG_N1 handshakes, divided by CG_N2 - CG_N1 (the set-up cancels out), which
# does not move with the load; and from the same runs, the calls per handshake of the lock
# functions (pthread read, write and mutex locks: each an atomic operation on a cache line that
# threads on other cores share, where the library shares the lock) and of the allocator. Last
# the medians, and each library's ratio to OpenSSL.
#   make bench-tls-libs          (or: TLS_LIBS_BIN=build/bench tests/bench/tls_libs.sh)
# Knobs: REPS (5), DUR (2 s a run), CG (1: callgrind runs; 0 skips them), CG_N1 (10), CG_N2 (60),
# CG_MODES ("full resumed"), LIBS ("openssl gnutls wolfssl": those of them built are run; make
# bench-tls-libs passes those it built), QUICK=1 (REPS=1 DUR=0.3 CG_N2=20: a check that it all
# works, in seconds; its figures mean nothing).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
if [ "${QUICK:-}" = 1 ]; then REPS=${REPS:-1} DUR=${DUR:-0.3} CG_N2=${CG_N2:-20}; fi
REPS=${REPS:-5} DUR=${DUR:-2} CG=${CG:-1} CG_N1=${CG_N1:-10} CG_N2=${CG_N2:-60} CG_MODES=${CG_MODES:-full resumed}
BIN=${TLS_LIBS_BIN:-$top/build/bench}
libs=()
for l in ${LIBS-openssl gnutls wolfssl}; do
    if [ -x "$BIN/tls_libs_$l" ]; then libs+=("$l"); else echo "$BIN/tls_libs_$l not built: $l skipped (make bench-tls-libs)"; fi
done
[ ${#libs[@]} -gt 0 ] || { echo "no TLS library to measure (LIBS='${LIBS-}'; make bench-tls-libs builds those installed)" >&2; exit 1; }
if [ "$CG" = 1 ] && ! command -v valgrind >/dev/null; then
    echo "valgrind not installed: no instruction counts (apt-get install valgrind)"
    CG=0
fi
dir=$(mktemp -d)
trap 'nginx_stop; rm -rf "$dir"' EXIT
tls_certs "$dir"
port=$(low_port) # PORT_BASE (lib.sh)
{
    nginx_stream_module
    nginx_conf_head "$dir"
    cat <<EOT
stream {
    log_format hs '\$ssl_protocol \$ssl_cipher \$ssl_curves \$ssl_session_reused';
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $dir/srv.pem;
        ssl_certificate_key $dir/srv.key;
        ssl_protocols TLSv1.3;
        ssl_ecdh_curve X25519;
        ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
        access_log $dir/access.log hs;
        return "x";
    }
}
EOT
} >"$dir/nginx.conf"
nginx_start "$dir" 0 "$port"
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR; libraries: ${libs[*]}"
for l in "${libs[@]}"; do echo "$l: $("$BIN/tls_libs_$l" --port "$port" --ca "$dir/ca.pem" --count 1 | sed 's/.*version=//')"; done

out=$dir/runs
# CONFIG: "MODE THREADS CTX"; every library in turn, REPS times, each line kept in $out
measure() {
    local mode=$1 threads=$2 ctx=$3 cpus=1 rep l flag=
    [ "$mode" = resumed ] && flag=--resume
    [ "$threads" -gt 1 ] && cpus=0-1
    for rep in $(seq "$REPS"); do
        for l in "${libs[@]}"; do
            [ "$ctx" = libctx ] && [ "$l" != openssl ] && continue
            taskset -c $cpus "$BIN/tls_libs_$l" --port "$port" --ca "$dir/ca.pem" --seconds "$DUR" \
                --threads "$threads" --ctx "$ctx" $flag | tee -a "$out" || { echo "$l failed" >&2; exit 1; }
        done
    done
}
measure full 1 thread
measure resumed 1 thread
measure full 2 thread
measure full 2 shared
measure full 2 libctx
measure resumed 2 thread
measure resumed 2 shared

cg=$dir/cg
if [ "$CG" = 1 ]; then
    for mode in $CG_MODES; do
        for l in "${libs[@]}"; do
            flag=$([ $mode = resumed ] && echo --resume || true)
            for n in "$CG_N1" "$CG_N2"; do
                valgrind --tool=callgrind --callgrind-out-file="$dir/cg.$n" "$BIN/tls_libs_$l" \
                    --port "$port" --ca "$dir/ca.pem" --count "$n" $flag >/dev/null 2>"$dir/cg.err" ||
                    { echo "callgrind run of $l failed: $(tail -n1 "$dir/cg.err")" >&2; exit 1; }
            done
            echo "callgrind lib=$l mode=$mode $(python3 - "$dir/cg.$CG_N1" "$dir/cg.$CG_N2" $((CG_N2 - CG_N1)) <<'PY'
# instructions, and calls of the lock and allocator functions, per handshake: the difference of
# the two runs' totals over the difference of their handshakes
import collections, re, sys
def read(path):
    names, calls, ir, fn = {}, collections.Counter(), 0, None
    for line in open(path):
        m = re.match(r"c?fn=\((\d+)\)(?: (\S+))?", line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith("cfn"):
                fn = names.get(m.group(1))
        elif line.startswith("calls=") and fn:
            calls[fn.split("@")[0]] += int(line[6:].split()[0])
        elif line.startswith("summary:"):
            ir = int(line.split()[1])
    return ir, calls
(ia, ca), (ib, cb) = read(sys.argv[1]), read(sys.argv[2])
n = int(sys.argv[3])
def per(pattern):
    return sum(cb[k] - ca[k] for k in cb if re.fullmatch(pattern, k)) / n
print("instr_per_hs=%d locks_per_hs=%.0f wrlocks_per_hs=%.0f allocs_per_hs=%.0f" % (
    (ib - ia) / n, per(r"pthread_(rwlock_rdlock|rwlock_wrlock|mutex_lock)"),
    per(r"pthread_rwlock_wrlock"), per(r"malloc|calloc|realloc")))
PY
)" | tee -a "$cg"
        done
    done
fi
echo "nginx's view (protocol cipher groups resumed):"
sort "$dir/access.log" | uniq -c
python3 - "$out" "$cg" <<'PY'
import os, re, statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    d = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
    key = (d["mode"], int(d["threads"]), d["ctx"])
    hs = float(d["hs"])
    runs.setdefault(key, {}).setdefault(d["lib"], []).append(
        (float(d["hs_per_cpu_s"]), float(d["usr_s"]) * 1e6 / hs, float(d["vcsw_per_hs"]),
         float(d["resumed"]) / hs))
print("medians: handshakes per client CPU second (ratio to openssl), user µs per handshake, "
      "voluntary switches per handshake, share the library says was resumed")
for key in sorted(runs, key=lambda k: (k[1], k[0], k[2])):
    libs = runs[key]
    base = st.median(x[0] for x in libs["openssl"]) if "openssl" in libs else None
    for lib, r in libs.items():
        m = [st.median(x[i] for x in r) for i in range(4)]
        ratio = " (%.2fx)" % (m[0] / base) if base else ""
        print("%-7s %-6s %d thr ctx %-6s %8.0f hs/cpu-s%-8s usr %6.1f µs  vcsw %.2f  resumed %.2f  (%d runs)"
              % (key[0], lib, key[1], key[2], m[0], ratio, m[1], m[2], m[3], len(r)))
if os.path.exists(sys.argv[2]):
    ir = {}
    for line in open(sys.argv[2]):
        d = dict(re.findall(r'(\w+)=(\S+)', line))
        ir[(d["mode"], d["lib"])] = {k: int(float(v)) if k.endswith("_hs") else v for k, v in d.items()}
    for (mode, lib), d in ir.items():
        base = ir.get((mode, "openssl"))
        print("callgrind %-7s %-7s %10d instructions per handshake%s; locks taken %s (of them "
              "write locks %s), allocations %s" % (mode, lib, d["instr_per_hs"],
              " (%.2fx)" % (d["instr_per_hs"] / base["instr_per_hs"]) if base else "",
              d["locks_per_hs"], d["wrlocks_per_hs"], d["allocs_per_hs"]))
PY
