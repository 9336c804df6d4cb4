#!/usr/bin/env bash
# test_tune: lfbench tune end to end against lfepolld, each variant in a network namespace of its
# own: the report's shape, its --json, a verdict per key; each bad input refused with one line
# (unknown, read-only and host-wide keys, a value the kernel refuses, not root, a server that
# does not start or dies mid-round); a round with errors said, not averaged away; SIGTERM and
# SIGINT in the middle of a run. --host: a host-wide key set on the host for its rounds only, the
# whole of /proc/sys/net as it was after the run, after SIGTERM, and after a SIGKILL once the
# next start has read the record. After each: no process left in a namespace of the run's, no
# name under `ip netns list`, no TIME_WAIT on the host for the port. No timing is asserted.
# Prints cmocka's result lines for tests/run.sh. Without network namespaces (not root): skipped,
# except in CI.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
lfepolld=${LFEPOLLD:-$top/lfepolld}
lfbench=${LFBENCH:-$top/lfbench}
badserver=${BADSERVER:-$top/build/t/badserver}
# The port inside the namespaces, checked on the host for TIME_WAIT left behind: below the host's
# ephemeral range, so that no other test's client connection can hold it there as its source
# port (one in the range failed CI: another suite's TIME_WAIT on port 34350, sport 34350).
lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
port=$((lo > 12000 ? lo - 1 - $$ % 10000 : 1024 + $$ % (lo > 1124 ? lo - 1024 : 100)))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
names=()
tests=(test_tune_two_variants test_tune_held_key test_tune_refuses_bad_input test_tune_server_that_does_not_start
    test_tune_server_dies_mid_round test_tune_round_with_errors_from_a_daemon
    test_tune_sigint_leaves_nothing test_tune_host_puts_back test_tune_host_after_a_crash)

echo "[==========] Running ${#tests[@]} test(s)."
result() { # NAME passed|failed|skipped [message]
    [ -n "${3:-}" ] && echo "$3"
    case $2 in
    passed) echo "[       OK ] $1"; passed=$((passed + 1)) ;;
    skipped) echo "[  SKIPPED ] $1"; passed=$((passed + 1)) ;;
    *) echo "[  FAILED  ] $1"; failed=$((failed + 1)); names+=("$1") ;;
    esac
}

# What a run left behind: processes that came from it (each run is given TUNE_TEST_MARK in its
# environment, which every process it starts inherits), names under /run/netns, TIME_WAIT
# sockets of the port on the host. Empty: nothing.
mark=test-tune-$$-$RANDOM
netns0=$(ip netns list 2>/dev/null)
leftovers() {
    local out="" f pid
    for _ in $(seq 50); do # a process being reaped may still show: bounded, 5 s
        out=""
        for f in $(grep -l -s -a "TUNE_TEST_MARK=$mark" /proc/[0-9]*/environ); do
            pid=${f#/proc/}
            pid=${pid%/environ}
            out+="process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null); "
        done
        [ -z "$out" ] && break
        sleep 0.1
    done
    [ "$(ip netns list 2>/dev/null)" = "$netns0" ] || out+="ip netns list: $(ip netns list | tr '\n' ' '); "
    [ -z "$(ss -Htan state time-wait "( sport = :$port or dport = :$port )" 2>/dev/null)" ] ||
        out+="TIME_WAIT on the host for port $port; "
    echo "$out"
}

tune() { # OUT-PREFIX ARGS...: lfbench tune, stdout to PREFIX.out, stderr to PREFIX.err; its rc
    local pre=$1
    shift
    TUNE_TEST_MARK=$mark timeout -k 5 60 "$lfbench" tune --port "$port" "$@" >"$pre.out" 2>"$pre.err"
}

if ! unshare -n true 2>/dev/null || ! command -v ip >/dev/null || ! command -v ss >/dev/null; then
    for t in "${tests[@]}"; do
        echo "[ RUN      ] $t"
        if [ "${CI:-}" = true ]; then
            result "$t" failed "no network namespace here (root, unshare -n): CI must run this"
        else
            result "$t" skipped "no network namespace here (root, unshare -n): skipped"
        fi
    done
    echo "[==========] ${#tests[@]} test(s) run."
    echo "[  PASSED  ] $passed test(s)."
    exit 0
fi

echo "[ RUN      ] test_tune_two_variants"
# 2 variants x 2 rounds x 1 s; at --confidence 0.5 two rounds make an interval, so a verdict
tune "$tmp/two" --set net.ipv4.tcp_tw_reuse=0,2 --rounds 2 --round-seconds 1 --confidence 0.5 \
    --json "$tmp/two.json" --plot "$tmp/two.png" -- --mode short -c 4
rc=$? left=$(leftovers) why=""
out=$(cat "$tmp/two.out") j=$(cat "$tmp/two.json" 2>/dev/null)
[ $rc -eq 0 ] || why+="exit $rc; "
grep -q '^round variant .*conn/s .*p50 us .*p99 us .*cli us/rq .*srv us/rq .*errors$' <<<"$out" || why+="no table header; "
[ "$(grep -cE '^[12] +(baseline net.ipv4.tcp_tw_reuse=0|net.ipv4.tcp_tw_reuse=2) +[0-9]+ ' <<<"$out")" = 4 ] || why+="not 4 rounds in the table; "
grep -qE '^net.ipv4.tcp_tw_reuse=2 +x[0-9.]+ \[[0-9.]+, [0-9.]+\]  (helps|hurts|no measurable effect)$' <<<"$out" || why+="no verdict line; "
grep -q 'sign test' <<<"$out" || why+="the method is not said; "
grep -qE 'run(s)? left, about [0-9]+m[0-9]{2}s' "$tmp/two.err" || why+="no progress line on stderr; "
grep -q '"lfbench_tune": 1' <<<"$j" || why+="no --json; "
[ "$(grep -c '{"round": ' <<<"$j")" = 4 ] || why+="not 4 rounds in the JSON; "
grep -q '"settings": {"net.ipv4.tcp_tw_reuse": "0"}' <<<"$j" || why+="baseline settings missing; "
grep -q '"settings": {"net.ipv4.tcp_tw_reuse": "2"}' <<<"$j" || why+="variant settings missing; "
grep -qE '"verdict": \{"words": "(helps|hurts|no measurable effect)", "median_ratio": [0-9.]+, "low": [0-9.]+, "high": [0-9.]+, "level": 0.5' <<<"$j" || why+="no verdict in the JSON; "
grep -qE '"ActiveOpens": [1-9]' <<<"$j" || why+="no kernel counters of the namespace; "
grep -qE '"server_cpu_us_per_request": [0-9]*[1-9]' <<<"$j" || why+="no server CPU; "
if command -v "${GNUPLOT:-gnuplot}" >/dev/null; then
    [ "$(head -c 4 "$tmp/two.png" 2>/dev/null | od -An -c | tr -d ' ')" = "211PNG" ] || why+="no PNG from --plot; "
fi
[ -z "$left" ] || why+="left behind: $left"
if [ -z "$why" ]; then result test_tune_two_variants passed; else
    result test_tune_two_variants failed "$why
$out
$(cat "$tmp/two.err")"; fi

echo "[ RUN      ] test_tune_held_key"
# --set KEY=V alone: V in every variant, the baseline too. The server reads it from inside each
# round's namespace, so the check is the kernel's value, not lfbench's account of it.
tune "$tmp/held" --set net.ipv4.tcp_fin_timeout=31 --set net.ipv4.tcp_tw_reuse=0,2 --rounds 2 \
    --round-seconds 1 --confidence 0.5 --json "$tmp/held.json" \
    --server "sh -c 'cat /proc/sys/net/ipv4/tcp_fin_timeout /proc/sys/net/ipv4/tcp_tw_reuse >>$tmp/held.seen; exec $lfepolld --listen 127.0.0.1:{port} -q'" \
    -- --mode short -c 2
rc=$? left=$(leftovers) why=""
[ $rc -eq 0 ] || why+="exit $rc; "
seen=$(paste -d' ' - - <"$tmp/held.seen" 2>/dev/null | sort | uniq -c | awk '{print $1 "x" $2 "/" $3}' | tr '\n' ' ')
[ "$seen" = "2x31/0 2x31/2 " ] || why+="the namespaces held (count x fin_timeout/tw_reuse) '$seen', want 2x31/0 2x31/2; "
[ "$(grep -c '"net.ipv4.tcp_fin_timeout": "31"' "$tmp/held.json" 2>/dev/null)" -ge 2 ] ||
    why+="the held key is not in both variants' settings in the JSON; "
grep -qE '^net.ipv4.tcp_fin_timeout=31' "$tmp/held.out" && why+="the held key got a verdict; "
[ -z "$left" ] || why+="left behind: $left"
if [ -z "$why" ]; then result test_tune_held_key passed; else
    result test_tune_held_key failed "$why
$(cat "$tmp/held.out" "$tmp/held.err")"; fi

echo "[ RUN      ] test_tune_refuses_bad_input"
# each: the expected exit status, a word of its one line, the arguments
why=""
check_refusal() { # RC WORDS ARGS...
    local want=$1 words=$2 rc err
    shift 2
    tune "$tmp/bad" "$@"
    rc=$?
    err=$(cat "$tmp/bad.err")
    if [ $rc -ne "$want" ] || [ "$(wc -l <"$tmp/bad.err")" != 1 ] || ! grep -qF -- "$words" <<<"$err" ||
        [ -s "$tmp/bad.out" ]; then
        why+="[$*]: want exit $want and one line with '$words', got exit $rc: $err; "
    fi
}
load=(-- --mode short -c 2)
check_refusal 2 "unknown key net.ipv4.no_such_key" --set net.ipv4.no_such_key=1,2 "${load[@]}"
check_refusal 2 "is read-only" --set net.ipv4.tcp_available_congestion_control=reno,cubic "${load[@]}"
check_refusal 2 "cannot isolate it" --set net.core.netdev_max_backlog=1000,16384 "${load[@]}"
check_refusal 2 "cannot isolate it" --set net.core.rmem_max=212992,4194304 "${load[@]}"
check_refusal 2 "cannot isolate it" --set fs.file-max=100000,200000 "${load[@]}"
check_refusal 2 "the kernel refuses '7' (Invalid argument)" --set net.ipv4.tcp_tw_reuse=0,7 "${load[@]}"
check_refusal 2 "not a sysctl name" --set net/../../kernel.x=0,1 "${load[@]}"
check_refusal 2 "holds one value in every variant" --set net.ipv4.tcp_tw_reuse=0 "${load[@]}"
check_refusal 2 "may not hold -d" --set net.ipv4.tcp_tw_reuse=0,2 -- --mode short -d 3
check_refusal 2 "name a target" --set net.ipv4.tcp_tw_reuse=0,2 -- --mode short 127.0.0.1:80
check_refusal 2 "no load" --set net.ipv4.tcp_tw_reuse=0,2
check_refusal 2 "give one of them" --set net.ipv4.tcp_tw_reuse=0,2 --sysctl-conf "$top/sysctl.conf" "${load[@]}"
if command -v setpriv >/dev/null; then
    rc=0
    (cd / && TUNE_TEST_MARK=$mark setpriv --reuid 65534 --regid 65534 --clear-groups timeout 30 "$lfbench" tune \
        --set net.ipv4.tcp_tw_reuse=0,2 -- --mode short >"$tmp/bad.out" 2>"$tmp/bad.err") || rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/bad.err")" = 1 ] && grep -q "needs root" "$tmp/bad.err" ||
        why+="not root: want exit 1 and one line saying it needs root, got $rc: $(cat "$tmp/bad.err"); "
fi
left=$(leftovers)
[ -z "$left" ] || why+="left behind: $left"
if [ -z "$why" ]; then result test_tune_refuses_bad_input passed; else
    result test_tune_refuses_bad_input failed "$why"; fi

echo "[ RUN      ] test_tune_server_that_does_not_start"
tune "$tmp/ns" --set net.ipv4.tcp_tw_reuse=0,2 --rounds 1 --round-seconds 1 \
    --server "/nonexistent/server {port}" -- --mode short -c 2
rc=$? left=$(leftovers) err=$(cat "$tmp/ns.err")
if [ $rc -eq 1 ] && grep -q "the server exited with status 127 at start.*not found" <<<"$err" &&
    [ -z "$left" ]; then
    result test_tune_server_that_does_not_start passed
else
    result test_tune_server_that_does_not_start failed "want exit 1 and why the server did not start, got $rc: $err; left: $left"
fi

echo "[ RUN      ] test_tune_server_dies_mid_round"
# the server listens, then its command ends it half a second into a 2 s round
tune "$tmp/die" --set net.ipv4.tcp_tw_reuse=0,2 --rounds 1 --round-seconds 2 \
    --server "$lfepolld --listen 127.0.0.1:{port} -q & sleep 0.5; kill \$!; echo dying >&2" -- --mode short -c 2
rc=$? left=$(leftovers) err=$(cat "$tmp/die.err")
if [ $rc -eq 1 ] && grep -q "round 1 of baseline net.ipv4.tcp_tw_reuse=0: the server exited with status 0 during the round; it said: dying" <<<"$err" &&
    [ -z "$left" ]; then
    result test_tune_server_dies_mid_round passed
else
    result test_tune_server_dies_mid_round failed "want exit 1 and the round the server died in, got $rc: $err; left: $left"
fi

echo "[ RUN      ] test_tune_round_with_errors_from_a_daemon"
# badserver closes every 20th connection without an answer: each round has errors, said per
# variant and per round. It leaves the process group it was started in (setsid), as a daemon
# does: found by its namespace and ended with it.
if [ -x "$badserver" ]; then
    tune "$tmp/err" --set net.ipv4.tcp_tw_reuse=0,2 --rounds 1 --round-seconds 1 \
        --server "setsid $badserver {port} unanswered 20 & exec sleep 60" -- --mode short -c 2 --timeout 500ms
    rc=$? left=$(leftovers) out=$(cat "$tmp/err.out")
    if [ $rc -eq 0 ] && grep -qE '^1 +baseline .* closed [1-9][0-9]*$' <<<"$out" &&
        grep -q "^errors: 1 of 1 rounds of baseline net.ipv4.tcp_tw_reuse=0 had errors" <<<"$out" &&
        grep -q "^errors: 1 of 1 rounds of net.ipv4.tcp_tw_reuse=2 had errors" <<<"$out" && [ -z "$left" ]; then
        result test_tune_round_with_errors_from_a_daemon passed
    else
        result test_tune_round_with_errors_from_a_daemon failed "want each round's errors in the table, a line per variant and nothing left, got $rc: $out
$(cat "$tmp/err.err"); left: $left"
    fi
else
    result test_tune_round_with_errors_from_a_daemon failed "no $badserver (make build/t/badserver)"
fi

echo "[ RUN      ] test_tune_sigint_leaves_nothing"
# (SIGTERM and SIGKILL: test_tune_host_after_a_crash, which checks the same and the host too)
why=""
for sig in INT; do
    TUNE_TEST_MARK=$mark "$lfbench" tune --port "$port" --set net.ipv4.tcp_tw_reuse=0,2 --rounds 5 --round-seconds 3 \
        -- --mode short -c 2 >"$tmp/sig.out" 2>"$tmp/sig.err" &
    pid=$!
    for _ in $(seq 100); do # until the first round began: bounded, 10 s
        grep -q "round 1/5" "$tmp/sig.err" && break
        sleep 0.1
    done
    sleep 0.5 # its server or its load running
    kill -$sig $pid
    wait $pid
    rc=$?
    left=$(leftovers)
    [ $rc -eq 130 ] && grep -q "interrupted (.*) in round 1 of .*; nothing is left behind" "$tmp/sig.err" &&
        [ -z "$left" ] || why+="SIG$sig: want exit 130 and the round it stopped in, got $rc: $(cat "$tmp/sig.err"); left: $left; "
done
if [ -z "$why" ]; then result test_tune_sigint_leaves_nothing passed; else
    result test_tune_sigint_leaves_nothing failed "$why"; fi

snapshot() { grep -r -s . /proc/sys/net | sort; } # every key under /proc/sys/net, as it reads
backlog=/proc/sys/net/core/netdev_max_backlog
b0=$(cat $backlog) b1=$(($(cat $backlog) + 1000))

echo "[ RUN      ] test_tune_host_puts_back"
snapshot >"$tmp/before"
tune "$tmp/host" --host --restore-file "$tmp/restore" --set net.core.netdev_max_backlog=default,$b1 \
    --rounds 1 --round-seconds 1 --write-sysctl "$tmp/host.conf" -- --mode short -c 2
rc=$? left=$(leftovers) why=""
snapshot >"$tmp/after"
[ $rc -eq 0 ] || why+="exit $rc: $(cat "$tmp/host.err"); "
grep -qE "^net.core.netdev_max_backlog=$b1 +x[0-9.]+ \[" "$tmp/host.out" || why+="no verdict on the host key; "
grep -qE "^1 +net.core.netdev_max_backlog=$b1 " "$tmp/host.out" || why+="no round of it; "
cmp -s "$tmp/before" "$tmp/after" || why+="/proc/sys/net changed: $(diff "$tmp/before" "$tmp/after" | head -5 | tr '\n' ' '); "
[ ! -e "$tmp/restore" ] || why+="the record is left; "
head -1 "$tmp/host.conf" 2>/dev/null | grep -q "^# written by lfbench tune --write-sysctl" || why+="no --write-sysctl file; "
grep -q "net.core.netdev_max_backlog = $b1" "$tmp/host.conf" 2>/dev/null || why+="the key is not named in it; "
[ -z "$left" ] || why+="left behind: $left"
if [ -z "$why" ]; then result test_tune_host_puts_back passed; else
    result test_tune_host_puts_back failed "$why
$(cat "$tmp/host.out")"; fi

echo "[ RUN      ] test_tune_host_after_a_crash"
why=""
for sig in TERM KILL; do
    TUNE_TEST_MARK=$mark "$lfbench" tune --port "$port" --host --restore-file "$tmp/restore" \
        --set net.core.netdev_max_backlog=$b1,default --rounds 3 --round-seconds 3 \
        -- --mode short -c 2 >"$tmp/crash.out" 2>"$tmp/crash.err" &
    pid=$!
    for _ in $(seq 150); do # until the baseline's round has set it: bounded, 15 s
        [ "$(cat $backlog)" = $b1 ] && break
        sleep 0.1
    done
    [ "$(cat $backlog)" = $b1 ] || why+="SIG$sig: the key was never set on the host; "
    kill -$sig $pid
    { wait $pid; } 2>/dev/null # no "Killed" line from bash
    rc=$?
    left=$(leftovers)
    [ -z "$left" ] || why+="SIG$sig: left behind: $left; "
    if [ $sig = TERM ]; then
        [ $rc -eq 130 ] && [ "$(cat $backlog)" = "$b0" ] && [ ! -e "$tmp/restore" ] ||
            why+="SIGTERM: want exit 130 and $b0 back at once, got $rc and $(cat $backlog); "
        continue
    fi
    # SIGKILL: nothing could run; the record is read by the next start, whatever it is asked
    [ -e "$tmp/restore" ] || why+="SIGKILL: no record left; "
    tune "$tmp/next" --restore-file "$tmp/restore" --set net.ipv4.tcp_tw_reuse=0,2 -- --mode bogus
    [ "$(cat $backlog)" = "$b0" ] && grep -q "put back" "$tmp/next.err" && [ ! -e "$tmp/restore" ] ||
        why+="SIGKILL: want $b0 put back by the next start, got $(cat $backlog): $(cat "$tmp/next.err"); "
done
echo "$b0" >$backlog # whatever happened above, the host as it was
left=$(leftovers)
[ -z "$left" ] || why+="left behind: $left"
if [ -z "$why" ]; then result test_tune_host_after_a_crash passed; else
    result test_tune_host_after_a_crash failed "$why"; fi

echo "[==========] ${#tests[@]} test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ $failed -gt 0 ]; then
    echo "[  FAILED  ] $failed test(s), listed below:"
    for n in "${names[@]}"; do echo "[  FAILED  ] $n"; done
    exit 1
fi
exit 0
