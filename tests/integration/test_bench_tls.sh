#!/usr/bin/env bash
# test_bench_tls: the TLS benchmarks keep working (tests/bench/tls_libs.sh, tls_client.sh), in
# their QUICK mode, whose figures mean nothing (speed is never asserted): tls_libs.sh runs every
# configuration with OpenSSL's client (the one library make deps installs) and reads callgrind's
# counts; the client refuses to call full handshakes resumed when the server issues no tickets
# (nginx with tickets and its cache off), and bad usage; tls_client.sh refuses an lfbench without
# TLS in one line, or, with one that has it, runs its lfbench-only comparisons end to end;
# make bench-tls-libs names each library it cannot find, with its package, and runs none of them.
# Prints cmocka's result lines for tests/run.sh. About 5 s (2 CPUs, loaded).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${TLS_LIBS_BIN:-$top/build/bench}
cli=${LFBENCH:-$top/lfbench}
dir=$(mktemp -d /tmp/lfe-bench-tls-XXXXXX)
. "$top/tests/bench/lib.sh"
trap 'nginx_stop; rm -rf "$dir"' EXIT
passed=0 skipped=() failed=()

echo "[==========] Running 5 test(s)."
t() { # name: runs the function of that name; its output, if any, is the failure ("SKIP ..." skips)
    echo "[ RUN      ] $1"
    local out
    out=$("$1" 2>&1)
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

test_tls_libs_runs_every_configuration() {
    local out rc n
    [ -x "$bin/tls_libs_openssl" ] || { echo "$bin/tls_libs_openssl not built (make $bin/tls_libs_openssl)"; return; }
    out=$(LIBS=openssl QUICK=1 DUR=0.1 CG_N1=1 CG_N2=3 CG_MODES=resumed TLS_LIBS_BIN=$bin timeout 60 "$top/tests/bench/tls_libs.sh" 2>&1)
    rc=$?
    [ $rc -eq 0 ] || { echo "tls_libs.sh: exit $rc: $out"; return; }
    # the seven configurations, each with the share the library resumed: all or none
    n=$(grep -cE '^full +openssl [12] thr ctx (thread|shared|libctx) .* resumed 0\.00 ' <<<"$out")
    [ "$n" -eq 4 ] || echo "not 4 median lines of full handshakes with none resumed: $out"
    n=$(grep -cE '^resumed openssl [12] thr ctx (thread|shared) .* resumed 1\.00 ' <<<"$out")
    [ "$n" -eq 3 ] || echo "not 3 median lines of resumed handshakes, all resumed: $out"
    grep -qE '^ +[0-9]+ TLSv1\.3 TLS_AES_128_GCM_SHA256 X25519 r$' <<<"$out" ||
        echo "nginx's log has no resumed TLS 1.3 X25519 handshake: $out"
    if command -v valgrind >/dev/null; then
        # a full handshake is millions of instructions, and OpenSSL takes locks and allocates
        n=$(grep -cE '^callgrind resumed +openssl +[0-9]{6,} instructions per handshake \(1\.00x\); locks taken [1-9][0-9]* .*allocations [1-9]' <<<"$out")
        [ "$n" -eq 1 ] || echo "no callgrind line with counts: $out"
    fi
}

test_tls_libs_refuses_a_server_that_does_not_resume() {
    local port out rc
    [ -x "$bin/tls_libs_openssl" ] || { echo "$bin/tls_libs_openssl not built"; return; }
    tls_certs "$dir" || return
    port=$(low_port) || return
    {
        nginx_stream_module || return
        nginx_conf_head "$dir"
        cat <<EOT
stream {
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $dir/srv.pem;
        ssl_certificate_key $dir/srv.key;
        ssl_protocols TLSv1.3;
        ssl_session_tickets off;
        ssl_session_cache off;
        return "x";
    }
}
EOT
    } >"$dir/nginx.conf"
    nginx_start "$dir" "" "$port" || return
    out=$(timeout 20 "$bin/tls_libs_openssl" --port "$port" --ca "$dir/ca.pem" --count 3 2>&1)
    rc=$?
    [ $rc -eq 0 ] || echo "full handshakes against nginx: exit $rc: $out"
    out=$(timeout 20 "$bin/tls_libs_openssl" --port "$port" --ca "$dir/ca.pem" --count 3 --resume 2>&1)
    rc=$?
    [ $rc -eq 1 ] || echo "--resume against a server without tickets: exit $rc, not 1: $out"
    grep -q 'the server resumed 0 of 3 handshakes offered a session' <<<"$out" ||
        echo "--resume against a server without tickets: no line saying so: $out"
    # a CA that did not sign the server's certificate: verification fails, the run with it
    tls_certs "$dir" || return
    out=$(timeout 20 "$bin/tls_libs_openssl" --port "$port" --ca "$dir/ca.pem" --count 1 2>&1)
    rc=$?
    [ $rc -eq 1 ] && grep -q 'certificate verify failed' <<<"$out" ||
        echo "a certificate the CA did not sign: exit $rc, no verification failure named: $out"
    nginx_stop
}

test_tls_libs_refuses_bad_usage() {
    local args out rc
    [ -x "$bin/tls_libs_openssl" ] || { echo "$bin/tls_libs_openssl not built"; return; }
    for args in "" "--port 0 --ca x" "--port 1 --ca x --threads 0" "--port 1 --ca x --ctx every" \
        "--port 1 --ca x --seconds 0" "--port 1 --ca x --bogus 1"; do
        # shellcheck disable=SC2086 # args is a list of options
        out=$("$bin/tls_libs_openssl" $args 2>&1)
        rc=$?
        [ $rc -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && [[ $out == usage:* ]] ||
            echo "tls_libs_openssl $args: exit $rc, not 2 with one usage line: '$out'"
    done
}

test_make_target_skips_a_missing_library() {
    local out rc n
    mkdir -p "$dir/no-pc"
    # pkg-config finds none of the three: each is named with its package, and nothing runs
    out=$(PKG_CONFIG_LIBDIR=$dir/no-pc PKG_CONFIG_PATH= timeout 60 make -s --no-print-directory -C "$top" bench-tls-libs 2>&1)
    rc=$?
    [ $rc -ne 0 ] || echo "make bench-tls-libs with no library: exit 0"
    n=$(grep -cE '^(libssl-dev|libgnutls28-dev|libwolfssl-dev) not installed: (openssl|gnutls|wolfssl) is skipped \(apt-get install \1\)$' <<<"$out")
    [ "$n" -eq 3 ] || echo "not 3 lines naming the missing libraries and their packages: $out"
    grep -q '^no TLS library to measure' <<<"$out" || echo "no line saying there is nothing to measure: $out"
    grep -q '^lib=' <<<"$out" && echo "a library ran that make did not build: $out"
}

test_tls_client_script() {
    local out rc
    out=$(LFBENCH=$cli "$top/tests/bench/tls_client.sh" z 2>&1)
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ] || echo "tls_client.sh z: exit $rc, not 2 with one line: $out"
    if ! grep -q -- --tls-resume <<<"$("$cli" --help 2>&1)"; then
        out=$(LFBENCH=$cli "$top/tests/bench/tls_client.sh" 2>&1)
        rc=$?
        [ $rc -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q 'has no --tls-resume' <<<"$out" ||
            echo "tls_client.sh with an lfbench without TLS: exit $rc, not 1 with one line naming it: $out"
        return
    fi
    out=$(LFBENCH=$cli QUICK=1 DUR=0.3 CONNS=10 timeout 60 "$top/tests/bench/tls_client.sh" c d 2>&1)
    rc=$?
    [ $rc -eq 0 ] || { echo "tls_client.sh c d: exit $rc: $out"; return; }
    grep -qE '^   nginx: [0-9]+ of [1-9][0-9]* handshakes resumed' <<<"$out" || echo "no share of resumed handshakes: $out"
    grep -qE '^d: client CPU per request +d_tls +[0-9.]+ +d_plain +[0-9.]+ µs +ratio [0-9.]+' <<<"$out" ||
        echo "no median line for TLS against plain: $out"
}

t test_tls_libs_runs_every_configuration
t test_tls_libs_refuses_a_server_that_does_not_resume
t test_tls_libs_refuses_bad_usage
t test_make_target_skips_a_missing_library
t test_tls_client_script
echo "[==========] 5 test(s) run."
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
