#!/usr/bin/env bash
# Toward a million connections (issue 26, item 7): for each count N, lfepolld (--cpus SRV_CPUS,
# pinned there) holding N connections from lfbench --mode long (-t THREADS, pinned to CLI_CPUS,
# over --source SRC), in a network namespace of its own with sysctl.conf applied there
# (lfepolld --apply-sysctl: only the per-namespace keys exist inside it, so the host's settings
# are not touched). Three lfbench runs per N, each opening all N again:
#   idle:   -R 10, so the connections sit idle: the time to open them (lfbench's "opening"
#           line) and, 1.5 s after all N are established, the memory against before the run:
#           lfepolld's and lfbench's VmRSS, /proc/meminfo Slab, sockstat TCP "mem" (pages),
#           and /proc/slabinfo's socket caches (bytes = active objects x object size); the
#           kernel's ListenOverflows, SyncookiesSent and RetransSegs over the opening;
#   open:   -R RATE spread over all N (the open loop sends on the connection idle longest):
#           p50 and p99 from the intended send time, and sockstat "mem" mid-run;
#   closed: closed loop, every connection one request in flight: QPS, client CPU per request.
# Both ends are on this host, so a kernel figure per connection is per connection PAIR (a
# client socket and a server socket). Medians of REPS namespaces per N.
#   tests/bench/million.sh      CONNS="1000 5000 10000 19000" RATE=20000 DUR=5 REPS=1
#                               SRC=127.0.0.2-127.0.0.33
# Knobs (defaults in brackets):
#   SRV_CPUS [0], CLI_CPUS [1], THREADS [1]: lfepolld --cpus and taskset; lfbench's taskset and -t.
#   NETNS [1]: 0 runs in this network namespace, no unshare or ip needed: sysctl.conf is then
#     applied to the HOST (lfepolld --apply-sysctl, never lowering a key), and its TIME_WAIT and
#     sockstat are the host's: only on a throwaway benchmark machine.
#   RAISE_NOFILE [0]: as root, raise fs.nr_open (and fs.file-max) and RLIMIT_NOFILE's hard limit
#     to what the largest N needs; 0 stops with the limit to raise instead.
#   LFEPOLLD, LFBENCH [./lfepolld, ./lfbench of this checkout]; SKIP_BUILD [0]: 1 runs no make
#     (prebuilt binaries on a machine without a compiler).
# Each N needs N descriptors in each process (RLIMIT_NOFILE) and, to one server port, about
# N / (ports in ip_local_port_range) source addresses in SRC: both are checked before any run.
# Each N is bounded by a timeout of 120 s + 1 s per 2,000 connections (1,000,000: 10 min 20 s).
# A million on 16 CPUs, as root, on a machine of its own:
#   CONNS="100000 1000000" SRV_CPUS=0-7 CLI_CPUS=8-15 THREADS=8 RAISE_NOFILE=1 \
#       SRC=127.0.0.2-127.0.0.41 tests/bench/million.sh
set -euo pipefail
die() { echo "million.sh: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "million.sh makes network namespaces: run it as root" >&2; exit 1; }
top=$(cd "$(dirname "$0")/../.." && pwd)
CONNS=${CONNS:-"1000 5000 10000 19000"} RATE=${RATE:-20000} DUR=${DUR:-5} REPS=${REPS:-1}
SRC=${SRC:-127.0.0.2-127.0.0.33}
SRV_CPUS=${SRV_CPUS:-0} CLI_CPUS=${CLI_CPUS:-1} THREADS=${THREADS:-1}
NETNS=${NETNS:-1} RAISE_NOFILE=${RAISE_NOFILE:-0} SKIP_BUILD=${SKIP_BUILD:-0}
LFEPOLLD=${LFEPOLLD:-$top/lfepolld} LFBENCH=${LFBENCH:-$top/lfbench}
case $NETNS in
0) ;;
1)
    command -v unshare >/dev/null && command -v ip >/dev/null ||
        die "NETNS=1 needs unshare (util-linux) and ip (iproute2); without them NETNS=0 runs in this namespace (it applies sysctl.conf to the host: a throwaway machine only)"
    unshare -n true 2>/dev/null ||
        die "unshare -n cannot make a network namespace here (no CAP_SYS_ADMIN: a container?); NETNS=0 runs in this namespace (it applies sysctl.conf to the host: a throwaway machine only)"
    ;;
*) die "NETNS=$NETNS: 1 (a namespace of its own) or 0 (this namespace)" ;;
esac
if [ "$SKIP_BUILD" != 1 ]; then
    command -v make >/dev/null || die "no make here: build elsewhere and run with SKIP_BUILD=1 LFEPOLLD=... LFBENCH=..."
    make -s --no-print-directory -C "$top" lfepolld lfbench
fi
for b in "$LFEPOLLD" "$LFBENCH"; do [ -x "$b" ] || die "$b is not an executable: build it (make lfepolld lfbench) or point LFEPOLLD/LFBENCH at one"; done
[[ $THREADS =~ ^[1-9][0-9]*$ ]] || die "THREADS=$THREADS: a count of lfbench threads, 1 or more"
for n in $CONNS; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "CONNS: '$n' is not a connection count"; done

# Descriptors: N in each process, plus lfbench's 16 a thread and some for lfepolld's own.
max=0
for n in $CONNS; do [ "$n" -le "$max" ] || max=$n; done
need=$((max + 16 * THREADS + 200))
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$need" -gt "$hard" ]; then
    [ "$RAISE_NOFILE" = 1 ] || die "$max connections need $need descriptors in each process and RLIMIT_NOFILE's hard limit is $hard: RAISE_NOFILE=1 raises it (fs.nr_open, ulimit -Hn: root), or lower CONNS"
    if [ "$(cat /proc/sys/fs/nr_open)" -lt "$need" ]; then
        echo "$need" 2>/dev/null >/proc/sys/fs/nr_open ||
            die "cannot raise fs.nr_open to $need (read-only /proc/sys: a container?): run the container with --ulimit nofile=$need or lower CONNS"
    fi
    ulimit -Hn "$need" 2>/dev/null || die "cannot raise RLIMIT_NOFILE's hard limit from $hard to $need (no CAP_SYS_RESOURCE?): lower CONNS"
    hard=$need
fi
ulimit -n "$hard"
# Both ends on this host: 2 N open files host-wide.
fmax=$(cat /proc/sys/fs/file-max)
if [ "$fmax" -lt $((2 * need + 100000)) ]; then
    if [ "$RAISE_NOFILE" = 1 ] && echo $((2 * need + 100000)) 2>/dev/null >/proc/sys/fs/file-max; then
        fmax=$((2 * need + 100000))
    else
        echo "million.sh: fs.file-max $fmax is below the $((2 * need)) files of $max connection pairs: the largest N may fail to open (RAISE_NOFILE=1 raises it)" >&2
    fi
fi
if [ "$NETNS" = 0 ]; then
    # The host's keys, never lowered; what was set or could not be goes to stderr (it exits 1
    # while any key, RLIMIT_NOFILE included, still needs attention: not an error here).
    { "$LFEPOLLD" --apply-sysctl 2>&1 || true; } | { grep -E '^(set|cannot set) ' || true; } |
        sed 's/^/million.sh: host: /' >&2
    range=$(cat /proc/sys/net/ipv4/ip_local_port_range)
else
    range=$(unshare -n sh -c '"$1" --apply-sysctl >/dev/null 2>&1; cat /proc/sys/net/ipv4/ip_local_port_range' sh "$LFEPOLLD")
fi
# Ports: to one server address and port, each source address has the ephemeral range's ports.
ip2n() { local IFS=.; set -- $1; echo $((($1 << 24) + ($2 << 16) + ($3 << 8) + $4)); }
[[ $SRC =~ ^[0-9.]+(-[0-9.]+)?$ ]] || die "SRC=$SRC: an IPv4 address or range A-B in 127.0.0.0/8"
naddr=$(($(ip2n "${SRC#*-}") - $(ip2n "${SRC%%-*}") + 1))
[ "$naddr" -ge 1 ] && [ "$naddr" -le 256 ] || die "SRC=$SRC: an ascending range A-B of 1 to 256 addresses (lfbench --source)"
read -r plo phi <<<"$range"
per=$((phi - plo + 1))
[ "$max" -le $((naddr * per)) ] ||
    die "$max connections to one server port need $(((max + per - 1) / per)) source addresses with ports $plo-$phi ($per each), and SRC=$SRC has $naddr: widen SRC"
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $(nproc) CPUs;" \
    "load $(cut -d' ' -f1-3 /proc/loadavg); RLIMIT_NOFILE $hard; fs.file-max $fmax; tcp_mem $(tr '\t' ' ' </proc/sys/net/ipv4/tcp_mem 2>/dev/null) (pages, host-wide);" \
    "CONNS=\"$CONNS\" RATE=$RATE DUR=$DUR REPS=$REPS SRC=$SRC ($naddr x $per ports) SRV_CPUS=$SRV_CPUS CLI_CPUS=$CLI_CPUS THREADS=$THREADS NETNS=$NETNS"

# SLUB merges caches of one size: a line of /proc/slabinfo then counts its aliases' objects too
# (here eventpoll_epi's holds tcp_bind_bucket's and tcp_bind2_bucket's).
for c in TCP sock_inode_cache filp dentry eventpoll_epi ep_head; do
    [ -L /sys/kernel/slab/$c ] || continue
    t=$(readlink /sys/kernel/slab/$c)
    a=$(find /sys/kernel/slab -maxdepth 1 -lname "$t" -printf '%f\n' | { grep -vx "$c" || true; } | sort | tr '\n' ' ')
    [ -z "$a" ] || echo "slabinfo's $c line also counts: $a"
done

# One N, in a fresh namespace (NETNS=1) or in this one; prints KEY=VALUE words on one line
# starting "result", and a line a phase on stderr as it goes (what a cut-short run leaves).
one() { # N
    local ns=()
    [ "$NETNS" = 0 ] || ns=(unshare -n)
    timeout -k 10 $((120 + $1 / 2000)) ${ns[@]+"${ns[@]}"} bash -s -- "$LFEPOLLD" "$LFBENCH" "$1" "$RATE" \
        "$DUR" "$SRC" "$NETNS" "$SRV_CPUS" "$CLI_CPUS" "$THREADS" <<'INNER'
set -eu
lfepolld=$1 lfbench=$2 n=$3 rate=$4 dur=$5 src=$6 netns=$7 srv_cpus=$8 cli_cpus=$9 threads=${10}
if [ "$netns" = 1 ]; then
    ip link set lo up
    "$lfepolld" --apply-sysctl >/dev/null 2>&1 || true
fi
echo "n=$n: somaxconn $(cat /proc/sys/net/core/somaxconn), ports $(tr '\t' - </proc/sys/net/ipv4/ip_local_port_range)" >&2
port=9876
taskset -c "$srv_cpus" "$lfepolld" --listen 127.0.0.1:$port --cpus "$srv_cpus" -q 2>/dev/null &
srv=$!
bench=
out=$(mktemp)
trap 'kill $srv $bench 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
caches="TCP sock_inode_cache filp dentry eventpoll_epi ep_head"
# Sockets in this namespace (both ends and the listener): counted from sockstat, not by
# listing /proc/PID/fd, whose entries would each add a proc inode and a dentry to the Slab.
inuse() { awk '/^TCP:/ {print $3}' /proc/net/sockstat; }
rss() { awk '/^VmRSS:/ {print $2}' /proc/$1/status 2>/dev/null || echo 0; }
# snap PREFIX: PREFIX_srv PREFIX_cli (kB), PREFIX_slab (kB), PREFIX_mem (pages),
# PREFIX_inuse, PREFIX_<cache> (bytes)
snap() {
    local p=$1 c
    eval "${p}_srv=$(rss $srv) ${p}_cli=$( [ -n "$bench" ] && rss $bench || echo 0)"
    eval "${p}_slab=$(awk '/^Slab:/ {print $2}' /proc/meminfo)"
    eval "$(awk -v p=$p '/^TCP:/ {for (i = 1; i < NF; i++) {if ($i == "mem") print p "_mem=" $(i + 1); if ($i == "inuse") print p "_inuse=" $(i + 1)}}' /proc/net/sockstat)"
    for c in $caches; do
        eval "${p}_$c=$(awk -v c=$c '$1 == c {print $2 * $4; f = 1} END {if (!f) print 0}' /proc/slabinfo 2>/dev/null || echo 0)"
    done
}
# phase NAME SAMPLE_AFTER LFBENCH-ARGS...: lfbench in the background; SAMPLE_AFTER seconds
# after all N are established (2N sockets more in the namespace), snap NAME; then the run's
# output is in $out. The waits allow a million opened at 5,000/s and closed at 10,000/s.
phase() {
    local name=$1 after=$2 base end
    shift 2
    base=$(inuse)
    taskset -c "$cli_cpus" "$lfbench" -t "$threads" -c "$n" --source "$src" --open-timeout 600s \
        -q "$@" 127.0.0.1:$port >"$out" 2>&1 &
    bench=$!
    end=$((SECONDS + 60 + n / 5000))
    while [ $SECONDS -lt $end ]; do
        [ "$(inuse)" -ge $((base + 2 * n)) ] || ! kill -0 $bench 2>/dev/null && break
        sleep 0.2
    done
    sleep "$after"
    snap "$name"
    wait $bench || echo "lfbench ($name) exited $?: $(grep -E 'errors|FAILED|unsent|lfbench:' "$out" | head -3 | tr '\n' ' ')" >&2
    bench=
    echo "n=$n $name: $(grep -m1 '^opening' "$out" || echo 'no opening line')" >&2
    end=$((SECONDS + 30 + n / 10000))
    while [ $SECONDS -lt $end ]; do [ "$(inuse)" -lt $((base + 10)) ] && break; sleep 0.1; done
}
opened() { sed -n 's/^opening *\([0-9]*\) of [0-9]* connections\{0,1\} open in \([0-9.]*\) s.*/\1 \2/p' "$out"; }
field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) {print $(i + 1); exit}}' "$out"; }

sleep 0.5
snap s0
phase idle 1.5 -R 10 -d 5
read -r open_n open_s < <(opened) || { open_n=0 open_s=-; }
overflows=$(field ListenOverflows) cookies=$(field SyncookiesSent) retrans=$(field RetransSegs)
per() { echo "$1 $2 $n" | awk '{printf "%.0f", ($1 - $2) / $3}'; }
echo "n=$n idle: lfepolld $(per $((idle_srv * 1024)) $((s0_srv * 1024))) B/conn, lfbench $idle_cli kB, Slab $(per $((idle_slab * 1024)) $((s0_slab * 1024))) B/pair, inuse $idle_inuse" >&2
phase open $((2 + dur / 2)) -R "$rate" --warmup 2 -d "$dur"
o_p50=$(field p50) o_p99=$(field p99)
o_qps=$(awk '/^requests/ {for (i = 1; i <= NF; i++) if ($i == "req/s,") print $(i - 1)}' "$out")
o_late=$(awk '/^schedule/ {print $5}' "$out")
read -r _ o_open < <(opened) || o_open=-
phase closed $((2 + dur / 2)) --warmup 2 -d "$dur"
c_qps=$(awk '/^requests/ {for (i = 1; i <= NF; i++) if ($i == "req/s,") print $(i - 1)}' "$out")
c_us=$(awk '/^client CPU/ {for (i = 1; i <= NF; i++) if ($i == "µs") print $(i - 1)}' "$out")
read -r _ c_open < <(opened) || c_open=-
line="result n=$n opened=$open_n open_s=$open_s open_s_openloop=$o_open open_s_closed=$c_open"
line+=" srv_b=$(per $((idle_srv * 1024)) $((s0_srv * 1024))) cli_kb=$idle_cli"
line+=" slab_b=$(per $((idle_slab * 1024)) $((s0_slab * 1024))) mem_pages_idle=$((idle_mem - s0_mem))"
line+=" mem_pages_open=$((open_mem - s0_mem)) mem_pages_closed=$((closed_mem - s0_mem)) inuse=$idle_inuse"
for c in $caches; do line+=" $c=$(per "$(eval echo \$idle_$c)" "$(eval echo \$s0_$c)")"; done
line+=" overflows=$overflows cookies=$cookies retrans=$retrans"
line+=" o_qps=$o_qps o_p50=$o_p50 o_p99=$o_p99 o_late=$o_late c_qps=$c_qps c_us=$c_us"
echo "$line"
INNER
}

res=$(mktemp)
trap 'rm -f "$res"' EXIT
for rep in $(seq "$REPS"); do
    for n in $CONNS; do
        one "$n" | tee -a "$res" | sed "s/^result/rep=$rep/"
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "-"}'; }
get() { # N KEY: the median of KEY over the repetitions of N
    awk -v n="n=$1" -v k="$2=" '$2 == n {for (i = 2; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1)}' "$res" | median
}
echo
echo "Per connection pair (a client socket and a server socket, both on this host) unless named; medians of $REPS."
echo
echo "| connections | open time | lfepolld RSS | lfbench VmRSS (whole) | kernel Slab (meminfo) | TCP + sock_inode + filp + dentry + eventpoll_epi + ep_head (slabinfo) | sockstat TCP mem: idle / -R / closed (pages) | -R $RATE: p50 / p99 | closed loop QPS, client µs/request | opening: ListenOverflows, SyncookiesSent, RetransSegs |"
echo "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
for n in $CONNS; do
    printf "| %s | %s s | %s B | %s KiB | %s B | %s + %s + %s + %s + %s + %s = %s B | %s / %s / %s | %s / %s µs (%s late) | %s, %s | %s, %s, %s |\n" \
        "$n" "$(get $n open_s)" "$(get $n srv_b)" "$(get $n cli_kb)" "$(get $n slab_b)" \
        "$(get $n TCP)" "$(get $n sock_inode_cache)" "$(get $n filp)" "$(get $n dentry)" \
        "$(get $n eventpoll_epi)" "$(get $n ep_head)" \
        "$(for c in TCP sock_inode_cache filp dentry eventpoll_epi ep_head; do get $n $c; done | awk '{s += $1} END {print s}')" \
        "$(get $n mem_pages_idle)" "$(get $n mem_pages_open)" "$(get $n mem_pages_closed)" \
        "$(get $n o_p50)" "$(get $n o_p99)" "$(get $n o_late)" "$(get $n c_qps)" "$(get $n c_us)" \
        "$(get $n overflows)" "$(get $n cookies)" "$(get $n retrans)"
done
