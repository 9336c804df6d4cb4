#!/usr/bin/env bash
# lfbench against the independent generator (echoload, tests/bench/peers/c), side by side: same
# server (lfepolld, one worker on CPU 0), each client with one thread on CPU 1, alternating
# A B B A (the order swaps every repetition, so drift within a pair favours neither) for REPS
# repetitions. Prints per-run lines and the medians: QPS and client CPU per
# request. Short mode spreads over 127.0.0.2-127.0.0.65 in both clients (echoload's default).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# PEERS: the peers' binaries (build/peers, made here); ECHOLOAD: another echoload binary.
peers=${PEERS:-$top/build/peers}
load=${ECHOLOAD:-$peers/echoload}
make -s -C "$top" lfepolld lfbench
[ -n "${ECHOLOAD:-}${PEERS:-}" ] || make -s --no-print-directory -C "$top" build/peers/echoload
[ -x "$load" ] || { echo "no echoload at $load: make peers builds build/peers/echoload" >&2; exit 1; }
REPS=${REPS:-5} DUR=${DUR:-5}
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg)"
ulimit -n "$(ulimit -Hn)"
. "$top/tests/bench/lib.sh"
port=$(low_port) # PORT_BASE (lib.sh)
taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:$port --cpus 0 -q 2>/dev/null &
srv=$!
trap 'kill $srv 2>/dev/null' EXIT
sleep 0.5
busy() { awk '/^cpu1 / {print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
declare -A q c
for rep in $(seq "$REPS"); do
    for sc in long100 long1000 short50; do
        case $sc in
        long100) e="-m long -c 100"; l="-c 100" ;;
        long1000) e="-m long -c 1000"; l="-c 1000" ;;
        short50) e="-m short -c 50"; l="--mode short -c 50 --source 127.0.0.2-127.0.0.65" ;;
        esac
        run_echoload() {
            r=$(taskset -c 1 "$load" -p $port $e -s 64 -d $DUR -w 1 -t 1)
            eq=$(sed -n 's/.*qps=\([0-9.]*\).*/\1/p' <<<"$r"); ec=$(sed -n 's/.*client_cpu=\([0-9.]*\).*/\1/p' <<<"$r")
            q[echoload,$sc]+=" $eq"; c[echoload,$sc]+=" $(awk -v a="$ec" -v b="$eq" 'BEGIN{printf "%.2f", a/100*1e6/b}')"
            echo "rep=$rep $sc echoload qps=$eq client_cpu=$ec%"
            sleep 0.5
        }
        run_lfbench() {
            r=$(taskset -c 1 "$top/lfbench" $l --size 64 -d $DUR --warmup 1 -t 1 -q 127.0.0.1:$port 2>/dev/null)
            lq=$(sed -n 's/^requests .*: \([0-9.]*\) req\/s.*/\1/p' <<<"$r")
            lc=$(sed -n 's/^client CPU .*, \([0-9.]*\) µs per request.*/\1/p' <<<"$r")
            q[lfbench,$sc]+=" $lq"; c[lfbench,$sc]+=" $lc"
            echo "rep=$rep $sc lfbench  qps=$lq client_us_per_req=$lc"
            sleep 0.5
        }
        if [ $((rep % 2)) -eq 1 ]; then run_echoload; run_lfbench; else run_lfbench; run_echoload; fi
    done
done
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
echo "| scenario | echoload QPS | lfbench QPS | ratio | echoload client µs/req | lfbench client µs/req |"
echo "|---|---:|---:|---:|---:|---:|"
for sc in long100 long1000 short50; do
    a=$(med <<<"${q[echoload,$sc]}"); b=$(med <<<"${q[lfbench,$sc]}")
    ca=$(med <<<"${c[echoload,$sc]}"); cb=$(med <<<"${c[lfbench,$sc]}")
    printf "| %s | %.0f | %.0f | %.2f | %s | %s |\n" $sc "$a" "$b" "$(awk -v a=$a -v b=$b 'BEGIN{print b/a}')" "$ca" "$cb"
done
