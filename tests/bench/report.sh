#!/usr/bin/env bash
# make bench: every benchmark in one run, and one report a user can read. Runs, in order: the
# peers side by side (tests/bench/peers.sh: echoload, 4 scenarios, interleaved), latency under
# load (tests/bench/latency.sh: lfbench --busy-poll open loop at shares of epoll_st's maximum),
# short connections with context switches (tests/bench/short_conn.sh), the Lua costs and the
# mixed-size leader-follower case (tests/bench/lua.sh), Lua handlers that wait
# (tests/bench/lua_wait.sh) and memory per idle connection (tests/bench/idle_rss.sh). Writes
# REPORT (docs/bench-report.md) with the date, machine, kernel, each command and its output, and
# gnuplot PNGs beside it (docs/bench/: QPS per scenario with its spread, p99 against offered
# rate). docs/bench.md is the curated reading of these figures and is never overwritten.
#   make bench                  REPS=5, DUR=3: about 25 minutes on 2 CPUs
#   make bench QUICK=1          REPS=1, DUR=1, fewer rates: under 5 minutes
# Knobs: REPS, DUR, REPORT, PEERS (the peers' binaries, build/peers: make peers), SKIP (names of sections to leave out:
# peers latency short lua wait idle). Changes no sysctl. Server on CPU 0, load on CPU 1.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
peers=${PEERS:-$top/build/peers}
QUICK=${QUICK:-}
if [ -n "$QUICK" ]; then
    REPS=${REPS:-1} DUR=${DUR:-1}
    fracs="25 50" conns="100" wait_rates="1000 3000" idle_n=2000 sc_reps=3
else
    REPS=${REPS:-5} DUR=${DUR:-3}
    fracs="25 50 75 90" conns="100 1000" wait_rates="1000 3000 6000" idle_n=10000 sc_reps=$REPS
fi
REPORT=${REPORT:-$top/docs/bench-report.md}
pngdir=$(dirname "$REPORT")/bench
run=$top/build/bench-run/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$run" "$pngdir"
make -s lfepolld lfbench build/bench/lua_call
[ -n "${PEERS:-}" ] || make -s --no-print-directory peers
skip() { [[ " ${SKIP:-} " == *" $1 "* ]]; }
L="$top/lfepolld --listen 127.0.0.1:{port} --cpus 0 -q"
t_all=$(date +%s)
sections=()

section() { # section NAME TITLE COMMAND...: runs it, keeps its output and how long it took
    local name=$1 title=$2 t0 rc=0
    shift 2
    skip "$name" && return 0
    echo "== $title: $*" >&2
    t0=$(date +%s)
    "$@" >"$run/$name.out" 2>"$run/$name.err" || rc=$?
    local cmd="$*"
    echo "$title|$(($(date +%s) - t0))|$rc|${cmd//$top\//}" >"$run/$name.meta" # project-relative
    sections+=("$name")
    [ "$rc" -eq 0 ] || echo "bench: $title exited $rc (see $run/$name.err)" >&2
    cat "$run/$name.out" >&2
}

[ -x "$peers/echoload" ] || { echo "bench: no $peers/echoload: make peers builds the peers" >&2; exit 1; }
before=$(ls -d "$peers"/results/*/ 2>/dev/null | tail -1 || true)
section peers "Side by side with the peers" env SKIP_LATENCY=1 SKIP_BUILD=1 PEERS="$peers" \
    REPS="$REPS" DUR="$DUR" tests/bench/peers.sh
praw=$(ls -d "$peers"/results/*/ 2>/dev/null | tail -1 || true)
[ "$praw" != "$before" ] || praw=
b=$peers
section latency "Latency under load (open loop)" env BUSY_POLL=1 REPS=1 DUR="$DUR" FRACS="$fracs" \
    CONNS="$conns" OUT="$run/lat" tests/bench/latency.sh st="$b/epoll_st {port}" \
    uv="$b/uv_echo {port}" go="$b/go_echo {port}" tokio="$b/tokio_echo {port}" lf1="$L" \
    lf2="$L --workers 2"
section short "Short connections: CPU and context switches per connection" env REPS="$sc_reps" \
    DUR="$DUR" tests/bench/short_conn.sh st="$b/epoll_st {port}" lf1="$L" \
    lf1da="$L --defer-accept"
section lua "Lua: callback cost, lua/echo.lua, the mixed-size leader-follower case" \
    env REPS="$REPS" DUR="$DUR" MIXDUR=$((DUR * 2)) tests/bench/lua.sh
section wait "Lua handlers that wait: proxy.lua against the Go proxy" env RATES="$wait_rates" \
    DUR="$DUR" tests/bench/lua_wait.sh
section idle "Memory per idle connection" tests/bench/idle_rss.sh "$idle_n"

# Pictures
if command -v gnuplot >/dev/null; then
    if [ -n "$praw" ] && [ -f "$praw/raw.txt" ]; then
        # raw.txt: rep=1 scenario=long_64B_100c server=st rc=0 qps=123 ...
        python3 - "$praw/raw.txt" "$run/qps.dat" <<'EOF'
import re, statistics, sys
cells = {}
for line in open(sys.argv[1]):
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    if kv.get("rc") == "0" and "qps" in kv:
        cells.setdefault((kv["scenario"], kv["server"]), []).append(float(kv["qps"]))
scen = list(dict.fromkeys(s for s, _ in cells))
srv = list(dict.fromkeys(v for _, v in cells))
with open(sys.argv[2], "w") as f:
    print("scenario " + " ".join(f"{v} {v}_min {v}_max" for v in srv), file=f)
    for s in scen:
        row = []
        for v in srv:
            q = cells.get((s, v), [0])
            row += [statistics.median(q) / 1000, min(q) / 1000, max(q) / 1000]
        print(s + " " + " ".join(f"{x:.1f}" for x in row), file=f)
EOF
        n=$(head -1 "$run/qps.dat" | wc -w)
        plot="'$run/qps.dat' using 2:3:4:xtic(1)"
        for ((k = 5; k <= n; k += 3)); do
            plot="$plot, '' using $k:$((k + 1)):$((k + 2))"
        done
        gnuplot <<GP || echo "bench: gnuplot failed on the QPS plot" >&2
set terminal png size 1000,500 noenhanced
set output '$pngdir/qps.png'
set key autotitle columnhead
set title 'Echo QPS per scenario, median of $REPS with min-max (server on one CPU, echoload on the other)'
set ylabel 'thousand requests/s'
set style data histograms
set style histogram errorbars gap 2 lw 1
set style fill solid 0.6 border -1
set key outside right
set yrange [0:*]
plot $plot
GP
    fi
    for f in "$run"/lat/latency-c*.png; do [ -f "$f" ] && cp "$f" "$pngdir/"; done
fi

# The report
{
    echo "# Benchmark run: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Generated by \`make bench${QUICK:+ QUICK=1}\` (tests/bench/report.sh); the curated reading of"
    echo "these figures is [bench.md](bench.md). Every figure below is one run of this script."
    echo
    echo "- machine: $(nproc) CPUs, \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')\"$(grep -qw hypervisor /proc/cpuinfo && echo ' (virtualized)'), $(free -g | awk '/^Mem:/ {print $2}') GiB"
    echo "- kernel: $(uname -r); $(. /etc/os-release && echo "$PRETTY_NAME"); $(gcc --version | head -1)"
    echo "- lfepolld $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "- load before the run: $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS DUR=$DUR; total $(( ($(date +%s) - t_all) / 60 )) min"
    echo "- sysctls untouched: somaxconn $(sysctl -n net.core.somaxconn), tcp_tw_reuse $(sysctl -n net.ipv4.tcp_tw_reuse), ports $(sysctl -n net.ipv4.ip_local_port_range | tr '\t' '-')"
    [ -f "$pngdir/qps.png" ] && [ -n "$praw" ] && printf '\n![QPS per scenario](bench/qps.png)\n'
    for f in "$pngdir"/latency-c*.png; do
        [ -f "$f" ] && [ -n "$(ls "$run"/lat/"$(basename "$f")" 2>/dev/null)" ] &&
            printf '\n![p99 against offered rate](bench/%s)\n' "$(basename "$f")"
    done
    for s in "${sections[@]}"; do
        IFS='|' read -r title secs rc cmd <"$run/$s.meta"
        echo
        echo "## $title"
        echo
        echo "\`$cmd\` ($secs s$([ "$rc" -eq 0 ] || echo ", exit $rc: see $run/$s.err"))"
        echo
        if [ "$s" = latency ] && [ -f "$run/lat/latency.md" ]; then
            grep -E '^(kernel|closed-loop)' "$run/$s.out" | sed 's/^/    /'
            cat "$run/lat/latency.md"
        elif [ "$s" = peers ] && grep -q '^|' "$run/$s.out"; then
            cat "$run/$s.out"
        else
            echo '```'
            cat "$run/$s.out"
            echo '```'
        fi
    done
} >"$REPORT"
echo "bench: report in $REPORT, pictures in $pngdir, raw output in $run" >&2
