#!/usr/bin/env bash
# Toward a million connections (issue 26, item 7), to the descriptor limit of this machine: for
# each count N, lfepolld (--cpus 0, on CPU 0) holding N connections from lfbench --mode long
# (CPU 1, over --source SRC), in a network namespace of its own with sysctl.conf applied there
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
# client socket and a server socket). Each N must fit RLIMIT_NOFILE's hard limit (one
# descriptor per connection in each process). Medians of REPS namespaces per N.
#   tests/bench/million.sh      CONNS="1000 5000 10000 19000" RATE=20000 DUR=5 REPS=1
#                               SRC=127.0.0.2-127.0.0.33
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "million.sh makes network namespaces: run it as root" >&2; exit 1; }
command -v unshare >/dev/null || { echo "million.sh: needs unshare (util-linux)" >&2; exit 2; }
top=$(cd "$(dirname "$0")/../.." && pwd)
CONNS=${CONNS:-"1000 5000 10000 19000"} RATE=${RATE:-20000} DUR=${DUR:-5} REPS=${REPS:-1}
SRC=${SRC:-127.0.0.2-127.0.0.33}
make -s --no-print-directory -C "$top" lfepolld lfbench
ulimit -n "$(ulimit -Hn)"
hard=$(ulimit -Hn)
for n in $CONNS; do
    [ "$n" -le $((hard - 100)) ] || {
        echo "million.sh: $n connections need $n descriptors in each process and RLIMIT_NOFILE's" \
            "hard limit is $hard: raise it (ulimit -Hn as root, fs.nr_open) or lower CONNS" >&2
        exit 2
    }
done
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $(nproc) CPUs;" \
    "load $(cut -d' ' -f1-3 /proc/loadavg); RLIMIT_NOFILE $hard; tcp_mem $(tr '\t' ' ' </proc/sys/net/ipv4/tcp_mem) (pages, host-wide); CONNS=\"$CONNS\" RATE=$RATE DUR=$DUR REPS=$REPS SRC=$SRC"
# SLUB merges caches of one size: a line of /proc/slabinfo then counts its aliases' objects too
# (here eventpoll_epi's holds tcp_bind_bucket's and tcp_bind2_bucket's).
for c in TCP sock_inode_cache filp dentry eventpoll_epi ep_head; do
    [ -L /sys/kernel/slab/$c ] || continue
    t=$(readlink /sys/kernel/slab/$c)
    a=$(find /sys/kernel/slab -maxdepth 1 -lname "$t" -printf '%f\n' | { grep -vx "$c" || true; } | sort | tr '\n' ' ')
    [ -z "$a" ] || echo "slabinfo's $c line also counts: $a"
done

# One N in a fresh namespace; prints KEY=VALUE words on one line starting "result".
one() { # N
    timeout -k 10 $((300 + $1 / 50)) unshare -n bash -s -- "$top" "$1" "$RATE" "$DUR" "$SRC" <<'INNER'
set -eu
top=$1 n=$2 rate=$3 dur=$4 src=$5
ip link set lo up
"$top/lfepolld" --apply-sysctl >/dev/null 2>&1 || true
echo "namespace: somaxconn $(cat /proc/sys/net/core/somaxconn), ports $(tr '\t' - </proc/sys/net/ipv4/ip_local_port_range)" >&2
port=9876
taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:$port --cpus 0 -q 2>/dev/null &
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
# after all N are established (2N sockets more in the namespace), snap NAME; then the run's output is in $out.
phase() {
    local name=$1 after=$2 base
    shift 2
    base=$(inuse)
    taskset -c 1 "$top/lfbench" -c "$n" --source "$src" --open-timeout 600s -q "$@" \
        127.0.0.1:$port >"$out" 2>&1 &
    bench=$!
    for _ in $(seq 3000); do # up to 10 min
        [ "$(inuse)" -ge $((base + 2 * n)) ] || ! kill -0 $bench 2>/dev/null && break
        sleep 0.2
    done
    sleep "$after"
    snap "$name"
    wait $bench || echo "lfbench ($name) exited $?: $(grep -E 'errors|FAILED|unsent' "$out" | head -3 | tr '\n' ' ')" >&2
    bench=
    for _ in $(seq 300); do [ "$(inuse)" -lt $((base + 10)) ] && break; sleep 0.1; done
}
opened() { sed -n 's/^opening *\([0-9]*\) of [0-9]* connections\{0,1\} open in \([0-9.]*\) s.*/\1 \2/p' "$out"; }
field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) {print $(i + 1); exit}}' "$out"; }

sleep 0.5
snap s0
phase idle 1.5 -R 10 -d 5
read -r open_n open_s < <(opened) || { open_n=0 open_s=-; }
overflows=$(field ListenOverflows) cookies=$(field SyncookiesSent) retrans=$(field RetransSegs)
phase open $((2 + dur / 2)) -R "$rate" --warmup 2 -d "$dur"
o_p50=$(field p50) o_p99=$(field p99)
o_qps=$(awk '/^requests/ {for (i = 1; i <= NF; i++) if ($i == "req/s,") print $(i - 1)}' "$out")
o_late=$(awk '/^schedule/ {print $5}' "$out")
read -r _ o_open < <(opened) || o_open=-
phase closed $((2 + dur / 2)) --warmup 2 -d "$dur"
c_qps=$(awk '/^requests/ {for (i = 1; i <= NF; i++) if ($i == "req/s,") print $(i - 1)}' "$out")
c_us=$(awk '/^client CPU/ {for (i = 1; i <= NF; i++) if ($i == "µs") print $(i - 1)}' "$out")
read -r _ c_open < <(opened) || c_open=-
per() { echo "$1 $2 $n" | awk '{printf "%.0f", ($1 - $2) / $3}'; }
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
