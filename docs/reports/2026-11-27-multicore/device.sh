#!/usr/bin/env bash
# device.sh: issue 26's figures on a 16-CPU machine, in one run of about 4-5 minutes (each step
# bounded: A_TIMEOUT + B_TIMEOUT + ~15 s at most). Run as root from the repository root, with
# lfepolld, lfbench and .dev carried (.dev/collect.sh fills .dev/lib and .dev/peers first):
#   OUT=/some/dir .dev/device.sh          (OUT: where the results go)
# It changes the HOST's settings (sysctl.conf's keys, the port range, fs.nr_open, tcp_mem,
# nf_conntrack_max, RLIMIT_NOFILE): for a throwaway machine only. DRY=1 changes none of them and
# shrinks every step, to try the script anywhere:
#   DRY=1 OUT=$(mktemp -d) .dev/device.sh
# Steps: A, tests/bench/multicore.sh long connections (rp, lf, lf_os: --oneshot always, uring);
#        B, tests/bench/million.sh at 100,000 and 1,000,000 connections.
# Results under $OUT: device.log (everything), multicore.txt (step A's
# header, report, raw lines and any server's messages).
set -uo pipefail
DRY=${DRY:-0}
A_TIMEOUT=${A_TIMEOUT:-170} B_TIMEOUT=${B_TIMEOUT:-190}
[[ $DRY == 1 ]] && A_TIMEOUT=60 B_TIMEOUT=90
: "${OUT:?OUT: the folder the results go to}"
top=$PWD
[[ -x $top/lfepolld && -f $top/tests/bench/million.sh ]] || {
    echo "device.sh: run it from the repository root, with ./lfepolld built" >&2
    exit 2
}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$top/.dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PEERS=$top/.dev/peers
[[ -d $PEERS ]] || PEERS=$top/build/peers
t0=$SECONDS
say() { echo "== [$((SECONDS - t0)) s] $*"; }

# sysk KEY VALUE: writes a host sysctl (through /proc: the image may have no sysctl), or, DRY,
# says it would.
sysk() {
    local p=/proc/sys/${1//.//} old
    old=$(tr '\t' ' ' <"$p" 2>/dev/null) || { echo "sysctl $1: absent here"; return 0; }
    if [[ $DRY == 1 ]]; then
        echo "DRY: would set $1 = $2 (now $old)"
    elif echo "$2" 2>/dev/null >"$p"; then
        echo "set $1 = $2 (was $old)"
    else
        echo "cannot set $1 = $2 (now $old): read-only /proc/sys (a container?)"
    fi
}
# raise KEY VALUE: sysk only where the first field is lower.
raise() {
    local cur
    cur=$(awk '{print $1}' "/proc/sys/${1//.//}" 2>/dev/null) || { echo "sysctl $1: absent here"; return 0; }
    ((cur >= ${2%% *})) && echo "$1 = $cur: enough" || sysk "$1" "$2"
}

main() {
    local dm0
    dm0=$(timeout 5 dmesg 2>/dev/null | wc -l)
    say "device.sh DRY=$DRY A_TIMEOUT=$A_TIMEOUT B_TIMEOUT=$B_TIMEOUT OUT=$OUT"
    echo "nproc $(nproc); affinity $(taskset -pc $$ 2>/dev/null | sed 's/.*: //'); kernel $(uname -r)"
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(grep -c ^processor /proc/cpuinfo) logical"
    grep -E '^(MemTotal|MemAvailable):' /proc/meminfo | tr -s ' ' | tr '\n' ' '
    echo "cgroup memory.max $(cat /sys/fs/cgroup/memory.max 2>/dev/null || echo '?') (the sockets' kernel memory counts there)"
    echo "ulimit -Hn $(ulimit -Hn), -n $(ulimit -n); fs.nr_open $(cat /proc/sys/fs/nr_open); fs.file-max $(cat /proc/sys/fs/file-max)"
    echo "tcp_mem $(tr '\t' ' ' </proc/sys/net/ipv4/tcp_mem); ports $(tr '\t' - </proc/sys/net/ipv4/ip_local_port_range); nf_conntrack_max $(cat /proc/sys/net/netfilter/nf_conntrack_max 2>/dev/null || echo absent); io_uring_disabled $(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo absent)"
    for c in ip unshare taskset timeout sysctl make; do printf '%s: %s; ' $c "$(command -v $c || echo MISSING)"; done
    echo
    echo "$(grep -E '^(CapEff|CapBnd)' /proc/self/status | tr '\t\n' '  '); /proc/sys is $([[ -w /proc/sys/net/core/somaxconn ]] && echo writable || echo read-only); $(ldd --version 2>&1 | head -1)"
    netns=0
    if command -v unshare >/dev/null && command -v ip >/dev/null && unshare -n true 2>/dev/null; then netns=1; fi
    echo "network namespaces: $([[ $netns == 1 ]] && echo usable: NETNS=1 || echo 'not usable (no ip, unshare or CAP_SYS_ADMIN): NETNS=0')"
    local b missing=0
    for b in ./lfepolld ./lfbench "$PEERS"/*; do
        [[ -f $b && -x $b ]] || continue
        if ldd "$b" 2>&1 | grep -q 'not found\|version .* not found'; then
            echo "MISSING LIBRARY for $b: $(ldd "$b" 2>&1 | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';')"
            missing=1
        fi
    done
    ((missing)) || echo "libraries: every binary resolves (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
    echo "lfepolld: $(./lfepolld --version 2>&1 | head -1); lfbench: $(./lfbench --version 2>&1 | head -1)"

    say "host settings"
    if [[ $DRY == 1 ]]; then
        echo "DRY: would run ./lfepolld --apply-sysctl"
    else
        ./lfepolld --apply-sysctl 2>&1 | grep -E '^(set|cannot set) '
    fi
    # Servers listen below 20000 (multicore.sh BASE_PORT=15000): the ephemeral range above.
    sysk net.ipv4.ip_local_port_range "20000 65535"
    raise fs.nr_open 2200000
    # A million active pairs hold 1-2 million pages of TCP memory (docs/bench.md): host-wide.
    raise net.ipv4.tcp_mem "8388608 12582912 16777216"
    # Loopback connections count in conntrack where it runs in this namespace (NETNS=0).
    raise net.netfilter.nf_conntrack_max 4194304
    if [[ $DRY == 1 ]]; then
        echo "DRY: would run ulimit -Hn 2100000; ulimit -n 2100000"
    else
        ulimit -Hn 2100000 && ulimit -n 2100000 || echo "cannot raise RLIMIT_NOFILE to 2100000 (no CAP_SYS_RESOURCE?)"
    fi
    echo "now: ulimit -Hn $(ulimit -Hn), -n $(ulimit -n); ports $(tr '\t' - </proc/sys/net/ipv4/ip_local_port_range); somaxconn $(cat /proc/sys/net/core/somaxconn)"

    # The two halves of the CPUs this process may use, as multicore.sh splits them.
    local allowed=() c half
    for c in $(taskset -pc $$ | sed 's/.*: //' | tr , ' '); do
        [[ $c == *-* ]] && allowed+=($(seq "${c%-*}" "${c#*-}")) || allowed+=("$c")
    done
    half=$((${#allowed[@]} / 2))
    local srv cli
    srv=$(IFS=,; echo "${allowed[*]:0:half}") cli=$(IFS=,; echo "${allowed[*]:half}")

    say "step A: multicore.sh, long and short connections (server CPUs $srv, client CPUs $cli)"
    local lf="$top/lfepolld --listen 127.0.0.1:{port} --admin 127.0.0.1:{aport} --cpus {cpus} -q"
    # One row a line, NAME|CPUS|command: edit here.
    local extra="lf_os|all|$lf --oneshot always
uring|all|$PEERS/uring_echo {port} $half {cpus}"
    if ! ./lfepolld --help 2>&1 | grep -q -- --oneshot; then
        echo "WARNING: this lfepolld has no --oneshot: the lf_os row is dropped"
        extra=$(grep -v '^lf_os|' <<<"$extra")
    fi
    local reps=3 dur=2 mc
    [[ $DRY == 1 ]] && reps=1 dur=1
    mc=$(mktemp -d)
    SCEN="long short" REPS=$reps DUR=$dur WARM=1 ONLY="rp lf lf_os uring" EXTRA=$extra PEERS=$PEERS \
        SRV_CPUS=$srv CLI_CPUS=$cli OUT=$mc timeout -k 5 "$A_TIMEOUT" tests/bench/multicore.sh
    echo "multicore.sh exit $?"
    {
        cat "$mc/header.txt" 2>/dev/null
        echo "--- report.md"
        cat "$mc/report.md" 2>/dev/null
        echo "--- raw.txt"
        cat "$mc/raw.txt" 2>/dev/null
        for f in "$mc"/*.log; do [[ -s $f ]] && { echo "--- ${f##*/}"; tail -5 "$f"; }; done
    } >"$OUT/multicore.txt"
    rm -rf "$mc"

    say "step B: million.sh"
    local conns="100000 1000000" threads=$half raise_nofile=1 fit
    [[ $DRY == 1 ]] && conns=2000 threads=1 raise_nofile=0
    # Where RLIMIT_NOFILE could not be raised, the largest N that fits rather than nothing.
    fit=$((($(ulimit -Hn) - 16 * threads - 200) / 1000 * 1000))
    if [[ $DRY != 1 ]] && ((fit < 1000000)); then
        conns=$( ((fit > 100000)) && echo "100000 $fit" || echo "$fit")
        echo "RLIMIT_NOFILE's hard limit $(ulimit -Hn) holds $fit connections, not a million: CONNS=\"$conns\""
    fi
    if [[ $DRY == 1 && $netns == 0 ]]; then
        echo "DRY: no usable network namespace and NETNS=0 would change this host: step B skipped"
    else
        CONNS=$conns REPS=1 DUR=$([[ $DRY == 1 ]] && echo 1 || echo 5) SRV_CPUS=$srv \
            CLI_CPUS=$cli THREADS=$threads RAISE_NOFILE=$raise_nofile NETNS=$netns \
            SRC=127.0.0.2-127.0.0.41 SKIP_BUILD=1 timeout -k 10 "$B_TIMEOUT" tests/bench/million.sh
        local rc=$?
        echo "million.sh exit $rc$( ((rc == 124 || rc == 137)) && echo ": cut at B_TIMEOUT=$B_TIMEOUT s; the rep= lines above are the N that finished")"
    fi

    say "after"
    grep -E '^(TCP|sockets):' /proc/net/sockstat | tr '\n' ' '
    echo
    echo "kernel messages during the run:"
    timeout 5 dmesg 2>/dev/null | tail -n +$((dm0 + 1)) | grep -iE 'tcp|conntrack|oom|socket|memory|segfault|drop' | tail -15
    say "done"
}

main 2>&1 | tee "$OUT/device.log"
