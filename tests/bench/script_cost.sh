#!/usr/bin/env bash
# What lfbench --script costs the client (issue 27's goals), side by side in one run: lfepolld on
# CPU 0, lfbench with one thread on CPU 1, the variants alternating (the order reversed every
# other repetition) for REPS repetitions. Prints each run, then medians of QPS and of the
# client's CPU per request (the summary's figure), and each variant's ratio to its baseline.
#   http     --expect http against lua/http_hello.lua: the fixed GET (baseline), a script whose
#            request() returns one prepared string, and the same with response(status, headers,
#            body) checking the status and the body
#   kv       --expect line against lua/kv.lua: --mix of two fixed files, a GET and a SET 9:1
#            (baseline), and lua/bench/kv_mix.lua (keys=1000 get=0.9 size=32, every answer checked),
#            in the closed loop: what QPS the script reaches
# Knobs: REPS (5), DUR (3 s measured after 1 s of warm-up), CONNS (100), RATE (0: the closed
# loop; N: the http variants in the open loop at N requests/s). With many connections the closed
# loop saturates both sides, and a client that spends more per response reads more responses
# per syscall, which hides what it spent: CONNS=1 shows each request's cost alone.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
REPS=${REPS:-5} DUR=${DUR:-3} CONNS=${CONNS:-100} RATE=${RATE:-0}
make -s -C "$top" lfepolld lfbench
echo "kernel $(uname -r); CPU$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR CONNS=$CONNS RATE=$RATE"
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
cat >"$dir/req.lua" <<'LUA'
local req
function init() req = wrk.format("GET", "/") end
function request() return req end
LUA
cat >"$dir/resp.lua" <<'LUA'
local req
function init() req = wrk.format("GET", "/") end
function request() return req end
function response(status, headers, body)
    return status == 200 and body == "Hello, World!\n"
end
LUA
printf 'GET k1\n' >"$dir/get.txt"
printf 'SET k1 %032d\n' 7 >"$dir/set.txt"
. "$top/tests/bench/lib.sh"
hport=$(low_port) # PORT_BASE (lib.sh)
kport=$(low_port)
while [ "$kport" = "$hport" ]; do kport=$(low_port); done
taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:$hport --cpus 0 -q --lua "$top/lua/http_hello.lua" 2>/dev/null &
pids+=($!)
taskset -c 0 "$top/lfepolld" --listen 127.0.0.1:$kport --cpus 0 -q --lua "$top/lua/kv.lua" 2>/dev/null &
pids+=($!)
sleep 0.5
declare -A q c
one() { # NAME PORT LFBENCH-OPTIONS...
    local name=$1 port=$2 r lq lc
    shift 2
    r=$(taskset -c 1 "$top/lfbench" 127.0.0.1:$port -c "$CONNS" -t 1 -d "$DUR" --warmup 1 -q "$@" 2>&1) ||
        { echo "$name failed:"; echo "$r"; exit 1; }
    lq=$(sed -n 's/^requests .*: \([0-9.]*\) req\/s.*/\1/p' <<<"$r")
    lc=$(sed -n 's/^client CPU .*, \([0-9.]*\) µs per request.*/\1/p' <<<"$r")
    q[$name]+=" $lq"
    c[$name]+=" $lc"
    echo "rep=$rep $name qps=$lq client_us_per_req=$lc"
}
open=
[ "$RATE" = 0 ] || open="-R $RATE"
names=(http-fixed http-request http-response kv-mix kv-script)
run() {
    case $1 in
    http-fixed) one "$1" $hport $open --expect http ;;
    http-request) one "$1" $hport $open --expect http --script "$dir/req.lua" ;;
    http-response) one "$1" $hport $open --expect http --script "$dir/resp.lua" ;;
    kv-mix) one "$1" $kport --expect line --mix "$dir/get.txt:9,$dir/set.txt:1" ;;
    kv-script) one "$1" $kport --expect line --script "$top/lua/bench/kv_mix.lua" -- keys=1000 get=0.9 size=32 ;;
    esac
}
for rep in $(seq "$REPS"); do
    if [ $((rep % 2)) -eq 1 ]; then order=("${names[@]}"); else order=(kv-script kv-mix http-response http-request http-fixed); fi
    for n in "${order[@]}"; do run "$n"; done
done
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
echo "| variant | QPS | client µs/request | CPU ratio to its baseline | QPS ratio |"
echo "|---|---:|---:|---:|---:|"
for n in "${names[@]}"; do
    base=http-fixed
    [[ $n == kv-* ]] && base=kv-mix
    mq=$(med <<<"${q[$n]}") mc=$(med <<<"${c[$n]}") bq=$(med <<<"${q[$base]}") bc=$(med <<<"${c[$base]}")
    printf "| %s | %.0f | %s | %.2f | %.2f |\n" "$n" "$mq" "$mc" "$(awk -v a="$mc" -v b="$bc" 'BEGIN{print a/b}')" "$(awk -v a="$mq" -v b="$bq" 'BEGIN{print a/b}')"
done
