#!/usr/bin/env bash
# test_newcomer: what a newcomer runs first says what it does. make run installs only the run
# packages (make test the test stack too) and README.md lists the same two sets as the Makefile;
# make integration builds the peers it runs; LDLIBS is appended; etc/lfepolld.conf shows every
# option of lfepolld --help; make sysctl-check is a report that exits 0 whatever the kernel says,
# and fails only when the checker does; make sysctl-apply is done when it set what it can; the
# bench scripts' ports follow PORT_BASE. Prints cmocka's result lines for tests/run.sh.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/lfe-newcomer-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$top" || exit 1
# Under make test -jN the parent's jobserver flags would reach these makes as a warning.
unset MAKEFLAGS MFLAGS MAKELEVEL
bin=${LFEPOLLD:-$top/lfepolld}
passed=0 failed=()

echo "[==========] Running 8 test(s)."
t() { # name: runs the function of that name; its output, if any, is the failure
    echo "[ RUN      ] $1"
    local out
    out=$("$1" 2>&1)
    if [ -z "$out" ]; then
        echo "[       OK ] $1"; passed=$((passed + 1))
    else
        echo "$out"; echo "[  FAILED  ] $1"; failed+=("$1")
    fi
}
# A Makefile variable as make expands it.
var() { printf 'show:\n\t@echo $(%s)\n' "$1" | make -s --no-print-directory -f Makefile -f - show; }

test_make_run_installs_run_pkgs_only() {
    local run test deps p
    run=$(make -n --no-print-directory run 2>/dev/null | grep -m1 'deps.sh debs ')
    deps=$(make -n --no-print-directory deps 2>/dev/null | grep -m1 'deps.sh debs ')
    [ -n "$run" ] && [ -n "$deps" ] || { echo "no scripts/deps.sh debs line in make -n run / deps"; return; }
    for p in $(var RUN_PKGS); do
        grep -q " $p " <<<"$run " || echo "make run does not install $p"
        grep -q " $p " <<<"$deps " || echo "make deps does not install $p"
    done
    test=$(var TEST_PKGS)
    [ -n "$test" ] || echo "TEST_PKGS is empty"
    for p in $test; do
        grep -q " $p " <<<"$run " && echo "make run installs the test package $p"
        grep -q " $p " <<<"$deps " || echo "make deps (make test) does not install $p"
    done
    make -n --no-print-directory test 2>/dev/null | grep -q " nginx-light " ||
        echo "make test does not install the test packages"
}

# make integration builds the peers test_peers.sh runs, as make test does: the peers' list
# was read after the rule that names it, so on a fresh clone make integration built none of
# them and test_peers.sh failed for want of its binaries.
test_make_integration_builds_the_peers() {
    local peers p out
    peers=$(var PEERS_C)
    [ -n "$peers" ] || { echo "PEERS_C is empty"; return; }
    out=$(make -n -B --no-print-directory integration 2>/dev/null)
    for p in $peers; do
        grep -q -- "-o $p " <<<"$out" || echo "make integration does not build $p"
    done
}

# LDLIBS from the command line is added to what a binary links, never in its place: test_hdr's
# zlib was a target's LDLIBS += -lz, which a command-line LDLIBS overrides, so make test
# LDLIBS=... failed to link it (undefined reference to `uncompress').
test_user_ldlibs_are_appended() {
    local out bin line
    # the plain build's rules (its paths), whatever SANITIZER the suite runs under
    out=$(make -n -B --no-print-directory SANITIZER= LDLIBS=-lLFE_USER build/t/test_hdr \
        build/t/test_plot lfbench 2>/dev/null | sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}')
    for bin in build/t/test_hdr build/t/test_plot lfbench; do
        line=$(grep -- "-o $bin " <<<"$out")
        [ -n "$line" ] || { echo "no link line for $bin"; continue; }
        grep -q -- " -lz " <<<"$line " || echo "$bin lost -lz under LDLIBS=...: $line"
        grep -q -- " -lLFE_USER " <<<"$line " || echo "$bin ignores LDLIBS: $line"
    done
}

# README.md's two lines, "`make run` needs: ..." and "`make test` adds: ...", name exactly the
# Makefile's RUN_PKGS and TEST_PKGS.
test_readme_pkgs_match_makefile() {
    local line want got
    for line in 'run` needs:RUN_PKGS' 'test` adds:TEST_PKGS'; do
        got=$(grep "^\`make ${line%%:*}: " README.md | sed 's/^[^:]*: //; s/\.$//' | tr ' ' '\n' |
            sed '/^$/d' | sort)
        want=$(var "${line##*:}" | tr ' ' '\n' | sed '/^$/d' | sort)
        [ -n "$got" ] || { echo "README.md has no line '\`make ${line%%:*}: ...'"; continue; }
        [ "$got" = "$want" ] || echo "README.md's \`make ${line%%:*} list differs from ${line##*:}:
$(diff <(echo "$want") <(echo "$got"))"
    done
}

# Every option of lfepolld --help but the commands has its line in etc/lfepolld.conf, and each
# line is either the default or marked an example (every line enabled parses: test_install).
test_conf_covers_every_option() {
    local opts o
    opts=$("$bin" --help | grep -oE '^  (-[a-zA-Z], )?--[a-z0-9-]+' | sed 's/.*--//' | sort -u)
    [ "$(wc -l <<<"$opts")" -ge 30 ] || echo "too few options read from lfepolld --help: $opts"
    for o in $opts; do
        case $o in help | version | config | check-sysctl | apply-sysctl | dry-run | undo-sysctl | undo-file | sysctl-conf) continue ;; esac
        grep -q "^#$o = " etc/lfepolld.conf || echo "etc/lfepolld.conf has no line for --$o"
    done
    # the lines that are not defaults say so: the ones whose value --help calls no default
    for o in groups workers cpus max-conns lua admin user takeover; do
        grep -B1 "^#$o = " etc/lfepolld.conf | head -1 | grep -q '^# example: the default is' ||
            echo "etc/lfepolld.conf: #$o is not the default and is not marked an example"
    done
    grep -q 'Each line below shows the default' etc/lfepolld.conf &&
        echo "etc/lfepolld.conf still says every line is the default"
}

# make sysctl-check: exit 0 and a last line saying it is a report, whatever the kernel's values
# (a fresh network namespace has the kernel's defaults, which need attention); a checker that
# fails (exit 2) fails make.
test_sysctl_check_is_a_report() {
    local out rc fake=$dir/fake-lfepolld
    if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
        out=$(unshare -n make -s --no-print-directory SANITIZER="${LFE_SANITIZER:-}" sysctl-check 2>&1)
    else
        out=$(make -s --no-print-directory SANITIZER="${LFE_SANITIZER:-}" sysctl-check 2>&1)
    fi
    rc=$?
    [ $rc = 0 ] || echo "make sysctl-check exited $rc: $out"
    grep -q 'need attention:$\|^all [0-9]* ok$' <<<"$out" || echo "no report: $out"
    tail -1 <<<"$out" | grep -q '^sysctl-check: done: ' || echo "last line: $(tail -1 <<<"$out")"
    grep -q 'Error' <<<"$out" && echo "make printed an error: $out"
    printf '#!/bin/sh\necho "cannot parse" >&2\nexit 2\n' >"$fake" && chmod +x "$fake"
    out=$(make -s --no-print-directory LFEPOLLD="$fake" sysctl-check 2>&1)
    rc=$?
    [ $rc != 0 ] || echo "make sysctl-check exited 0 when the checker failed: $out"
    grep -q 'sysctl-check: the checker failed (exit 2)' <<<"$out" || echo "no failure line: $out"
}

# make sysctl-apply in a fresh network namespace (as root: the target refuses anyone else, and
# the namespace keeps the host's values as they are): it sets what it can and ends with one
# "sysctl-apply: done: N set; M left ..." line and exit 0, though netdev_max_backlog (host-wide)
# is absent there; it said make's "Error 1" after setting all six keys. Root is told no sudo.
# A key it should set and could not (the checker's exit 3) fails it, and so does the checker.
test_sysctl_apply_is_done() {
    local out rc fake=$dir/fake-lfepolld
    [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null || return 0 # needs root and a namespace
    out=$(unshare -n make -s --no-print-directory SANITIZER="${LFE_SANITIZER:-}" SYSCTL_UNDO="$dir/undo" sysctl-apply 2>&1)
    rc=$?
    [ $rc = 0 ] || echo "make sysctl-apply exited $rc: $out"
    grep -q '^set net.core.somaxconn = 65535 (was ' <<<"$out" || echo "somaxconn not set: $out"
    tail -1 <<<"$out" | grep -qE '^sysctl-apply: done: [1-9][0-9]* set; [1-9][0-9]* left that cannot be set here \(see above\)$' ||
        echo "last line: $(tail -1 <<<"$out")"
    grep -q 'Error' <<<"$out" && echo "make printed an error: $out"
    grep -q 'sudo' <<<"$out" && echo "root was told to use sudo: $out"
    printf '#!/bin/sh
echo "set a = 1 (was 0)"
echo "cannot set b = 2: Read-only file system"
echo "1 of 2 need attention:"
exit 3
' >"$fake" && chmod +x "$fake"
    out=$(make -s --no-print-directory LFEPOLLD="$fake" sysctl-apply 2>&1)
    rc=$?
    [ $rc != 0 ] || echo "make sysctl-apply exited 0 when a key could not be set: $out"
    grep -q '^sysctl-apply: failed: 1 set, but a key sysctl.conf sets is still not right (see above)$' <<<"$out" ||
        echo "no failure line: $out"
    printf '#!/bin/sh
echo "cannot parse" >&2
exit 2
' >"$fake"
    out=$(make -s --no-print-directory LFEPOLLD="$fake" sysctl-apply 2>&1)
    rc=$?
    [ $rc != 0 ] || echo "make sysctl-apply exited 0 when the checker failed: $out"
    grep -q 'sysctl-apply: the checker failed (exit 2)' <<<"$out" || echo "no checker line: $out"
}

# docs/bench.md, "Ports": the scripts' servers take ports from PORT_BASE to PORT_BASE +
# PORT_SPAN - 1 when it is given (they picked 10000-32767 at random with no way to keep them off
# other people's ports), never one something listens on, and a bad value stops with one line.
test_bench_ports_follow_port_base() {
    local p i pid out b
    # shellcheck source=../bench/lib.sh
    . "$top/tests/bench/lib.sh"
    b=$(low_port) || { echo "low_port failed"; return; } # a free block of four from here
    while listening $((b + 1)) || listening $((b + 2)) || listening $((b + 3)); do b=$(low_port); done
    for i in $(seq 30); do
        p=$(PORT_BASE=$b PORT_SPAN=4 low_port) || { echo "low_port failed"; return; }
        [ "$p" -ge "$b" ] && [ "$p" -le $((b + 3)) ] || echo "PORT_BASE=$b PORT_SPAN=4 gave $p"
    done
    p=$(PORT_BASE=$b low_port)
    [ "$p" -ge "$b" ] && [ "$p" -le $((b + 999)) ] || echo "PORT_BASE=$b gave $p (want $b-$((b + 999)))"
    p=$(low_port)
    [ "$p" -ge 10000 ] && [ "$p" -lt "$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)" ] ||
        echo "the default gave $p (want 10000 up to the ephemeral range)"
    "$bin" --listen "127.0.0.1:$b" -q 2>/dev/null &
    pid=$!
    wait_listening "$b" || echo "lfepolld did not listen on $b"
    for i in $(seq 20); do
        p=$(PORT_BASE=$b PORT_SPAN=2 low_port)
        [ "$p" = $((b + 1)) ] || { echo "PORT_BASE=$b PORT_SPAN=2 with $b taken gave $p"; break; }
    done
    out=$(PORT_BASE=$b PORT_SPAN=1 low_port 2>&1) && echo "the only port taken, yet low_port gave $out"
    grep -q "^low_port: nothing free found in $b-$b (PORT_BASE, PORT_SPAN)\$" <<<"$out" ||
        echo "no line for a block with nothing free: $out"
    kill "$pid"; wait "$pid"
    for bad in "PORT_BASE=abc" "PORT_BASE=80" "PORT_BASE=65000" "PORT_BASE=20000 PORT_SPAN=0"; do
        out=$(env $bad bash -c '. "$1"; low_port' _ "$top/tests/bench/lib.sh" 2>&1) &&
            echo "$bad: low_port gave $out"
        [ "$(wc -l <<<"$out")" = 1 ] && grep -q "^PORT_BASE=" <<<"$out" || echo "$bad: $out"
    done
}

t test_make_run_installs_run_pkgs_only
t test_make_integration_builds_the_peers
t test_user_ldlibs_are_appended
t test_readme_pkgs_match_makefile
t test_conf_covers_every_option
t test_sysctl_check_is_a_report
t test_sysctl_apply_is_done
t test_bench_ports_follow_port_base
echo "[==========] 8 test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ ${#failed[@]} -gt 0 ]; then
    echo "[  FAILED  ] ${#failed[@]} test(s), listed below:"
    for f in "${failed[@]}"; do echo "[  FAILED  ] $f"; done
    exit 1
fi
exit 0
