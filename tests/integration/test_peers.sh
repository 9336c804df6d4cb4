#!/usr/bin/env bash
# test_peers: the benchmark's own peers (tests/bench/peers/c, built into PEER_BIN by make) echo
# exactly, and echoload, which judges them, catches a peer that does not. Each C peer serves
# echoload for about two seconds in three ways: long connections with 4 requests in flight
# (pipelining), short connections (one per request), and 4 MB requests, 4 in flight, against a
# 4 KiB client receive buffer: 16 MB owed per connection, more than a socket's send buffer
# (tcp_wmem's 4 MB), so the peer goes through its partial writes, and more than uring_echo's
# 16 MB of provided buffers for two connections, so its buffer ring runs dry. Every byte is verified; a pass needs exit 0, requests done, 0 mismatches,
# 0 lost. Then echoload against epoll_st broken on purpose (--flip: a changed byte; --drop: a
# missing one) must fail, with the fault named in its line. uring_echo is skipped, saying so,
# where liburing was not there to build it or the kernel refuses io_uring. The TLS peers
# (tls_epoll_echo; go_tls_echo and tokio_tls_echo where make peers could build them, skipped
# with a line otherwise) each pass tls_echo_check.py on an ECDSA P-256 certificate made here:
# 6 MB per connection echoed byte for byte through partial writes, close_notify answered for
# the client's close_notify and for its bare EOF, a ticket resumed; and refuse a missing file, a
# certificate that is not one and a key that does not match with one line, exit 1. Then the
# bench's TLS clients: tls_idle_conns holds its handshaken connections and names the one that
# fails against a plain server; tls_handshakes.py resumes. Prints cmocka's result lines for
# tests/run.sh.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${PEER_BIN:-$top/build/peers}
dir=$(mktemp -d /tmp/lfe-peers-XXXXXX)
. "$top/tests/bench/lib.sh"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
ulimit -n "$(ulimit -Hn)"
passed=0 skipped=() failed=()

echo "[==========] Running 11 test(s)."
t() { # name: runs the function of that name; its output, if any, is the failure ("SKIP ..." skips)
    echo "[ RUN      ] $1"
    local out
    out=$(
        "$1" 2>&1
        stop # a peer the test left running
    )
    if [ -z "$out" ]; then
        echo "[       OK ] $1"
        passed=$((passed + 1))
    elif [[ $out == SKIP* ]]; then
        echo "${out#SKIP }"
        echo "[  SKIPPED ] $1"
        skipped+=("$1")
    else
        echo "$out"
        echo "[  FAILED  ] $1"
        failed+=("$1")
    fi
}

# serve COMMAND...: starts a peer on a free port ({port} in COMMAND); sets pid and port. Its
# stderr goes to $dir/server.log. Non-zero (and a line) if it does not listen within 10 s.
serve() {
    port=$(low_port)
    while listening "$port"; do port=$(low_port); done
    "${@//\{port\}/$port}" 2>"$dir/server.log" &
    pid=$!
    wait_listening "$port" && kill -0 "$pid" 2>/dev/null && return 0
    echo "$1 did not listen on 127.0.0.1:$port: $(cat "$dir/server.log")"
    stop
    return 1
}
stop() {
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=
}

# load NAME ECHOLOAD-OPTIONS...: one echoload run against $port; prints why it failed, if it did.
load() {
    local name=$1 res rc
    shift
    res=$(timeout 30 "$bin/echoload" -p "$port" "$@" 2>"$dir/load.err")
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q ' mismatches=0 lost=0 ' <<<"$res" ||
        grep -q '^qps=0 \| requests=0 ' <<<"$res"; then
        echo "$name, echoload $*: exit $rc: $res $(cat "$dir/load.err")"
    fi
    kill -0 "$pid" 2>/dev/null || echo "$name died under echoload $*: $(cat "$dir/server.log")"
}

# check_peer NAME COMMAND...: the three ways, about a second each.
check_peer() {
    local name=$1
    shift
    [ -x "$1" ] || { echo "no $1: make test builds it (make $1)"; return; }
    serve "$@" || return
    load "$name" -m long -c 20 -D 4 -d 0.7 -g 5
    load "$name" -m short -c 10 -d 0.4 -g 5
    load "$name" -m long -c 2 -s 4000000 -D 4 -r 4096 -n 16 -d 20
    stop
}

test_epoll_st_echoes_exactly() {
    check_peer epoll_st "$bin/epoll_st" {port}
}

test_epoll_reuseport_echoes_exactly() {
    local cpu
    cpu=$(taskset -pc $$ | sed 's/.*: //; s/[-,].*//') # a CPU this process may use: pinning too
    check_peer epoll_reuseport "$bin/epoll_reuseport" {port} 3 "$cpu"
}

test_uv_echo_echoes_exactly() {
    check_peer uv_echo "$bin/uv_echo" {port}
}

test_uring_echo_echoes_exactly() {
    if [ ! -x "$bin/uring_echo" ]; then
        echo "SKIP no $bin/uring_echo: liburing-dev was not installed when it was built"
        return
    fi
    serve "$bin/uring_echo" {port} 2 >"$dir/start.out"
    if grep -q 'io_uring is not available' "$dir/server.log"; then
        echo "SKIP $(cat "$dir/server.log")"
        return
    fi
    [ -s "$dir/start.out" ] && { cat "$dir/start.out"; return; }
    stop
    check_peer uring_echo "$bin/uring_echo" {port} 2
}

# The judge: a changed byte and a missing one each fail echoload, in every mode, named as such.
test_echoload_fails_a_wrong_echo() {
    local mode how res rc
    for how in "--flip mismatches" "--drop lost"; do
        serve "$bin/epoll_st" {port} "${how% *}" 200 || return
        for mode in "-m long -c 10" "-m long -c 10 -D 4" "-m short -c 10"; do
            # shellcheck disable=SC2086 # mode is a list of options
            res=$(timeout 30 "$bin/echoload" -p "$port" $mode -d 0.3 -g 0.5 2>/dev/null)
            rc=$?
            [ $rc -eq 1 ] || echo "epoll_st ${how% *} 200, echoload $mode: exit $rc, not 1: $res"
            grep -q " ${how#* }=[1-9]" <<<"$res" ||
                echo "epoll_st ${how% *} 200, echoload $mode: no ${how#* }: $res"
        done
        stop
    done
}

# Bad input to echoload is one line saying what is wrong, and exit 2.
test_echoload_refuses_bad_input() {
    local args out rc
    for args in "-c 0 -p 1" "-p 70000" "-m medium -p 1" "-p 1 -H 192.0.2.1" "-p 1 -t 4 -c 2" "-c 1"; do
        # shellcheck disable=SC2086 # args is a list of options
        out=$("$bin/echoload" $args 2>&1)
        rc=$?
        [ $rc -eq 2 ] || echo "echoload $args: exit $rc, not 2"
        [ "$(wc -l <<<"$out")" -eq 1 ] && [[ $out == echoload:* ]] ||
            echo "echoload $args: not one line starting echoload: '$out'"
    done
}

# certs: an ECDSA P-256 certificate and key in $dir (cert.pem, key.pem), made once, and a
# second key (other.pem) that does not match it.
certs() {
    [ -s "$dir/cert.pem" ] && return 0
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/key.pem" \
        -out "$dir/cert.pem" -days 1 -subj /CN=localhost 2>"$dir/openssl.err" &&
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/other.pem" \
            2>>"$dir/openssl.err" ||
        { echo "openssl cannot make a certificate: $(cat "$dir/openssl.err")"; return 1; }
}

# check_tls NAME: the TLS peer NAME (a binary in $bin taking --cert --key --port) against
# tls_echo_check.py; a SKIP line where make peers did not build it (its toolchain is missing).
check_tls() {
    local out
    [ -x "$bin/$1" ] || { echo "SKIP no $bin/$1: make peers builds it where ${2:-its toolchain} is installed (make test builds the C peers only)"; return; }
    certs || return
    serve "$bin/$1" --cert "$dir/cert.pem" --key "$dir/key.pem" --port {port} || return
    out=$(timeout 60 python3 "$top/tests/integration/tls_echo_check.py" "$port" 2>&1) ||
        echo "$1: tls_echo_check.py: $out"
    kill -0 "$pid" 2>/dev/null || echo "$1 died under tls_echo_check.py: $(cat "$dir/server.log")"
    stop
}

test_tls_epoll_echo_echoes_exactly() {
    [ -x "$bin/tls_epoll_echo" ] || { echo "no $bin/tls_epoll_echo: make test builds it (make peers)"; return; }
    check_tls tls_epoll_echo
}

test_go_tls_echo_echoes_exactly() {
    check_tls go_tls_echo go
}

test_tokio_tls_echo_echoes_exactly() {
    check_tls tokio_tls_echo "a cargo that can build it (rustup's)"
}

# A missing file, a file that is no certificate, a key that is not the certificate's: one line
# naming the file, exit 1, for each TLS peer there is; bad usage: one line, exit 2.
test_tls_peers_refuse_bad_certificates() {
    local p c k want args out rc
    certs || return
    for p in tls_epoll_echo go_tls_echo tokio_tls_echo; do
        [ -x "$bin/$p" ] || continue
        for args in "$dir/none.pem $dir/key.pem none.pem" "$dir/key.pem $dir/key.pem key.pem" \
            "$dir/cert.pem $dir/other.pem other.pem"; do
            read -r c k want <<<"$args"
            out=$(timeout 10 "$bin/$p" --cert "$c" --key "$k" --port 1 2>&1)
            rc=$?
            [ $rc -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && [[ $out == "$p: "*"$want"* ]] ||
                echo "$p --cert $c --key $k: exit $rc, not 1 with one line naming $want: '$out'"
        done
        for args in "" "--cert $dir/cert.pem --key $dir/key.pem" "--port 80 --cert" "--bogus 1"; do
            # shellcheck disable=SC2086 # args is a list of options
            out=$(timeout 10 "$bin/$p" $args 2>&1)
            rc=$?
            [ $rc -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ] ||
                echo "$p $args: exit $rc, not 2 with one line: '$out'"
        done
    done
}

# tests/bench/tls_server.sh's clients: tls_idle_conns holds N handshaken connections and says
# so; against a server that speaks no TLS it names the connection that failed, exit 1.
# tls_handshakes.py --resume resumes.
test_tls_bench_clients() {
    local out rc
    [ -x "$bin/tls_idle_conns" ] || { echo "no $bin/tls_idle_conns: make test builds it (make peers)"; return; }
    certs || return
    serve "$bin/tls_epoll_echo" --cert "$dir/cert.pem" --key "$dir/key.pem" --port {port} || return
    out=$(timeout 20 "$bin/tls_idle_conns" "$port" 50 </dev/null 2>&1)
    [ "$out" = "open 50" ] || echo "tls_idle_conns $port 50: '$out', not 'open 50'"
    out=$(timeout 20 python3 "$top/tests/bench/tls_handshakes.py" "$port" 0.3 --resume 2>&1)
    [[ $out =~ ^handshakes=([0-9]+)\ resumed=([0-9]+)\ errors=0 ]] && [ "${BASH_REMATCH[2]}" -gt 0 ] &&
        [ "${BASH_REMATCH[2]}" -ge $((BASH_REMATCH[1] - 1)) ] ||
        echo "tls_handshakes.py $port 0.3 --resume: '$out': not every handshake after the first resumed"
    stop
    serve "$bin/epoll_st" {port} || return
    out=$(timeout 20 "$bin/tls_idle_conns" "$port" 5 </dev/null 2>&1)
    rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && [[ $out == "tls_idle_conns: connection 1 of 5 "* ]] ||
        echo "tls_idle_conns against a plain echo: exit $rc, not 1 with one line naming connection 1: '$out'"
    stop
}

t test_epoll_st_echoes_exactly
t test_epoll_reuseport_echoes_exactly
t test_uv_echo_echoes_exactly
t test_uring_echo_echoes_exactly
t test_echoload_fails_a_wrong_echo
t test_echoload_refuses_bad_input
t test_tls_epoll_echo_echoes_exactly
t test_go_tls_echo_echoes_exactly
t test_tokio_tls_echo_echoes_exactly
t test_tls_peers_refuse_bad_certificates
t test_tls_bench_clients
echo "[==========] 11 test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ ${#skipped[@]} -gt 0 ]; then
    echo "[  SKIPPED ] ${#skipped[@]} test(s), listed below:"
    for f in "${skipped[@]}"; do echo "[  SKIPPED ] $f"; done
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "[  FAILED  ] ${#failed[@]} test(s), listed below:"
    for f in "${failed[@]}"; do echo "[  FAILED  ] $f"; done
    exit 1
fi
exit 0
