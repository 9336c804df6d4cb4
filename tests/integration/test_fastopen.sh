#!/usr/bin/env bash
# test_fastopen: TCP Fast Open end to end, in a network namespace of the test's own (its
# net.ipv4.tcp_fastopen is set there, never on the host). With 3 (client and server bits),
# lfepolld --fastopen 64 and lfbench --fastopen --mode short: after the first connection asked
# for the cookie, the requests come in the SYNs (TcpExt TCPFastOpenPassive on the server side,
# TCPFastOpenActive on the client's), and lfbench verifies every byte. The same lfbench against
# a server without --fastopen: nothing taken from a SYN, nothing lost. With 1 (the kernel's
# default), lfepolld --fastopen says at start that the kernel takes no data from a SYN.
# Prints cmocka's result lines for tests/run.sh. Without unshare or ip: skipped, except in CI.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
lfepolld=${LFEPOLLD:-$top/lfepolld}
lfbench=${LFBENCH:-$top/lfbench}
slow=${TEST_SLOW:-1}
passed=0 failed=0
names=()

echo "[==========] Running 3 test(s)."
result() { # NAME passed|failed|skipped [message]
    [ -n "${3:-}" ] && echo "$3"
    case $2 in
    passed) echo "[       OK ] $1"; passed=$((passed + 1)) ;;
    skipped) echo "[  SKIPPED ] $1"; passed=$((passed + 1)) ;;
    *) echo "[  FAILED  ] $1"; failed=$((failed + 1)); names+=("$1") ;;
    esac
}
if ! command -v unshare >/dev/null || ! command -v ip >/dev/null || ! unshare -n true 2>/dev/null; then
    for t in test_fastopen_requests_in_the_syn test_fastopen_server_without_it \
        test_fastopen_warns_without_the_server_bit; do
        echo "[ RUN      ] $t"
        if [ "${CI:-}" = true ]; then
            result $t failed "no network namespace here (unshare -n, ip): CI must run this"
        else
            result $t skipped "no network namespace here (unshare -n, ip): skipped"
        fi
    done
else
    # One namespace for all three: a script run by unshare -n, printing KEY=VALUE lines.
    out=$(LFEPOLLD=$lfepolld LFBENCH=$lfbench SLOW=$slow timeout $((120 * slow)) unshare -n bash -c '
        set -u
        ip link set lo up
        netstat() { awk -v k="$1" "/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) if (\$i == k) c = i; h = 1 } else print \$c }" /proc/net/netstat; }
        up() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }
        run() { # PORT SERVER-ARGS...: lfepolld with them, lfbench --fastopen short against it
            local port=$1 pid rc
            shift
            "$LFEPOLLD" --listen 127.0.0.1:$port -q "$@" 2>/tmp/lfe-tfo-$$.log &
            pid=$!
            up $port || { echo "start=failed"; cat /tmp/lfe-tfo-$$.log; return; }
            p0=$(netstat TCPFastOpenPassive) a0=$(netstat TCPFastOpenActive)
            "$LFBENCH" --mode short --fastopen -c 4 -n 400 --timeout 5s -q 127.0.0.1:$port >/tmp/lfe-tfo-$$.b 2>&1
            rc=$?
            echo "lfbench_rc=$rc passive=$(($(netstat TCPFastOpenPassive) - p0)) active=$(($(netstat TCPFastOpenActive) - a0))"
            [ $rc -eq 0 ] || tail -5 /tmp/lfe-tfo-$$.b
            kill $pid; wait $pid
            echo "daemon_rc=$?"
            rm -f /tmp/lfe-tfo-$$.log /tmp/lfe-tfo-$$.b
        }
        sysctl -qw net.ipv4.tcp_fastopen=3
        echo "== with"; run 9876 --fastopen 64
        echo "== without"; run 9877
        sysctl -qw net.ipv4.tcp_fastopen=1
        echo "== bit"
        "$LFEPOLLD" --listen 127.0.0.1:9878 --fastopen 64 -q 2>&1 & pid=$!
        up 9878; kill $pid; wait $pid
    ' 2>&1)
    with=$(sed -n '/^== with/,/^== without/p' <<<"$out")
    without=$(sed -n '/^== without/,/^== bit/p' <<<"$out")
    bit=$(sed -n '/^== bit/,$p' <<<"$out")
    val() { sed -n "s/.*$2=\([0-9]*\).*/\1/p" <<<"$1" | head -1; }

    echo "[ RUN      ] test_fastopen_requests_in_the_syn"
    # 400 connections; the first few ask for the cookie (and a loaded machine may lose one to
    # a retransmitted SYN, which carries no data): most carry their request in the SYN
    if [ "$(val "$with" lfbench_rc)" = 0 ] && [ "$(val "$with" daemon_rc)" = 0 ] &&
        [ "$(val "$with" passive)" -ge 300 ] 2>/dev/null && [ "$(val "$with" active)" -ge 300 ] 2>/dev/null; then
        result test_fastopen_requests_in_the_syn passed "$(grep lfbench_rc <<<"$with")"
    else
        result test_fastopen_requests_in_the_syn failed \
            "want lfbench and lfepolld exit 0 and 300+ of 400 connections opened with data in the SYN:
$with"
    fi
    echo "[ RUN      ] test_fastopen_server_without_it"
    if [ "$(val "$without" lfbench_rc)" = 0 ] && [ "$(val "$without" passive)" = 0 ]; then
        result test_fastopen_server_without_it passed "$(grep lfbench_rc <<<"$without")"
    else
        result test_fastopen_server_without_it failed \
            "want lfbench exit 0 and no SYN data taken by a server without --fastopen:
$without"
    fi
    echo "[ RUN      ] test_fastopen_warns_without_the_server_bit"
    if grep -q "net.ipv4.tcp_fastopen is 1, without the server bit (2)" <<<"$bit"; then
        result test_fastopen_warns_without_the_server_bit passed
    else
        result test_fastopen_warns_without_the_server_bit failed "no warning at start: $bit"
    fi
fi
echo "[==========] 3 test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ $failed -gt 0 ]; then
    echo "[  FAILED  ] $failed test(s), listed below:"
    for n in "${names[@]}"; do echo "[  FAILED  ] $n"; done
    exit 1
fi
exit 0
