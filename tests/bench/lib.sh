# tests/bench/lib.sh: what the bench scripts share; sourced, not run.

# A port for a server, chosen at random where nothing listens: by default from 10000 up to the
# ephemeral range (a port there is never taken by a client's connect(), and a port a client's
# TIME_WAIT still holds cannot be bound by a server without SO_REUSEADDR); with PORT_BASE=N from
# N to N + PORT_SPAN - 1 (PORT_SPAN 1000): on a shared host, a block of ports of your own
# (docs/bench.md, "Ports"). Prints the port, or a line on stderr and returns 1.
low_port() {
    local lo base span p
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
    base=${PORT_BASE:-10000}
    span=${PORT_SPAN:-$([ -n "${PORT_BASE:-}" ] && echo 1000 || echo $((lo > 12000 ? lo - 10000 : 2000)))}
    case $base$span in *[!0-9]* | "")
        echo "PORT_BASE=$base PORT_SPAN=$span: both are numbers (PORT_BASE=20000 PORT_SPAN=1000)" >&2
        return 1 ;;
    esac
    if [ "$base" -lt 1024 ] || [ "$span" -lt 1 ] || [ "$span" -gt 30000 ] ||
        [ $((base + span - 1)) -gt 65535 ]; then
        echo "PORT_BASE=$base PORT_SPAN=$span: the ports must lie within 1024-65535 (span 1-30000)" >&2
        return 1
    fi
    for _ in $(seq 100); do
        p=$((base + (RANDOM * 32768 + RANDOM) % span))
        listening "$p" || { echo "$p"; return 0; }
    done
    echo "low_port: nothing free found in $base-$((base + span - 1)) (PORT_BASE, PORT_SPAN)" >&2
    return 1
}

# listening PORT: a TCP socket listens on it (from /proc: no ss on minimal hosts).
listening() {
    awk -v p="$(printf ':%04X' "$1")" '$4 == "0A" && substr($2, length($2) - 4) == p {f = 1}
        END {exit !f}' /proc/net/tcp /proc/net/tcp6
}

# wait_listening PORT: up to 10 s; non-zero if nothing listens by then.
wait_listening() {
    for _ in $(seq 200); do listening "$1" && return 0; sleep 0.05; done
    return 1
}

# interleave OUT FN A B: REPS repetitions of FN A and FN B, the order swapped every repetition
# (so that drift within a pair favours neither); each line FN prints is appended to OUT and shown.
interleave() {
    local out=$1 fn=$2 a=$3 b=$4 rep x
    for rep in $(seq "$REPS"); do
        for x in $([ $((rep % 2)) = 1 ] && echo "$a $b" || echo "$b $a"); do
            "$fn" "$x" >>"$out"
            tail -n1 "$out"
        done
    done
}

# tls_certs DIR: a CA and a server certificate it signed (ECDSA P-256, names localhost and
# 127.0.0.1) made now with the openssl CLI: DIR/ca.pem, DIR/srv.pem, DIR/srv.key.
tls_certs() {
    local d=$1
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=lfepoll-bench-ca -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
            -keyout "$d/srv.key" -out "$d/srv.csr" 2>/dev/null &&
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$d/srv.ext" &&
        openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
            -days 2 -extfile "$d/srv.ext" -out "$d/srv.pem" 2>/dev/null ||
        { echo "tls_certs: the openssl CLI could not make the certificates (apt-get install openssl)" >&2; return 1; }
}

# nginx_stream_module: prints the line that loads nginx's stream module, for a configuration of
# one's own; a line on stderr and 1 when libnginx-mod-stream is not installed.
nginx_stream_module() {
    local m=/usr/lib/nginx/modules/ngx_stream_module.so
    [ -r $m ] && { echo "load_module $m;"; return 0; }
    echo "nginx's stream module is not installed (apt-get install libnginx-mod-stream)" >&2
    return 1
}

# nginx_start DIR CPUS PORT: nginx in the foreground of a background job, on CPUS (taskset -c;
# empty: anywhere), with DIR/nginx.conf (which writes its pid, logs and temp files under DIR);
# waits until PORT listens. Sets NGINX_PID; nginx_stop ends it.
nginx_start() {
    command -v nginx >/dev/null || { echo "nginx is not installed (apt-get install nginx-light)" >&2; return 1; }
    ${2:+taskset -c "$2"} nginx -p "$1" -c "$1/nginx.conf" -e "$1/error.log" 2>>"$1/error.log" &
    NGINX_PID=$!
    wait_listening "$3" && return 0
    echo "nginx did not listen on 127.0.0.1:$3: $(tail -n1 "$1/error.log")" >&2
    nginx_stop
    return 1
}
nginx_stop() {
    [ -n "${NGINX_PID:-}" ] || return 0
    kill "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=
}

# nginx_conf_head DIR [WORKERS]: the top of a configuration that keeps everything under DIR
# (WORKERS, 1 by default: one process whose CPU a script can read).
nginx_conf_head() {
    cat <<EOT
daemon off;
worker_processes ${2:-1};
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
EOT
}

# cpu_run FILE COMMAND...: runs COMMAND (its output passes through) and writes to FILE the user
# and system CPU seconds it used, "USER SYS" (the child's rusage: what a tool says of its own CPU
# is not always the same measure). Returns the command's status.
cpu_run() {
    python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%.6f %.6f\n" % (r.ru_utime, r.ru_stime))
sys.exit(rc)' "$@"
}

# bench_binaries TOP: sets LFBENCH and LFEPOLLD, making in TOP each one that was not given (a path
# given is used as it is, so that a long run can use copies that nothing rebuilds under it).
bench_binaries() {
    local mk=()
    LFBENCH=${LFBENCH:-} LFEPOLLD=${LFEPOLLD:-}
    [ -n "$LFBENCH" ] || mk+=(lfbench)
    [ -n "$LFEPOLLD" ] || mk+=(lfepolld)
    [ ${#mk[@]} -eq 0 ] || make -s -C "$1" "${mk[@]}" || return 1
    LFBENCH=${LFBENCH:-$1/lfbench} LFEPOLLD=${LFEPOLLD:-$1/lfepolld}
}

# machine_line: the kernel, the CPU model, the CPUs and the load average, for a run's first line.
machine_line() {
    echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2);" \
        "$(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
}
