#!/usr/bin/env bash
# test_hdr_interop: lfbench --hdr-log against lfepolld, the log read back by HdrHistogram's
# Python port (tests/integration/hdr_interop.py) and compared with the same run's --json: the
# latencies, and a short run's connection phases (tagged intervals).
# Prints cmocka's result lines, for tests/run.sh. Needs LFEPOLLD and LFBENCH (make test sets
# them) and python3 with hdrh: without hdrh it is skipped, except in CI (CI=true): it fails.
set -u
name=test_lfbench_hdr_log_read_by_hdrh
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/lfe-hdr-it-XXXXXX)
srv=0

cleanup() {
    [ "$srv" -gt 0 ] && kill -9 "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

echo "[==========] Running 1 test(s)."
echo "[ RUN      ] $name"
end() { # passed|failed|skipped, message
    [ -n "$2" ] && echo "$2"
    case $1 in
    passed) echo "[       OK ] $name"; echo "[==========] 1 test(s) run."
            echo "[  PASSED  ] 1 test(s)." ;;
    skipped) echo "[  SKIPPED ] $name"; echo "[==========] 1 test(s) run."
             echo "[  PASSED  ] 0 test(s)."; echo "[  SKIPPED ] 1 test(s), listed below:"
             echo "[  SKIPPED ] $name" ;;
    *) echo "[  FAILED  ] $name"; echo "[==========] 1 test(s) run."
       echo "[  PASSED  ] 0 test(s)."; echo "[  FAILED  ] 1 test(s), listed below:"
       echo "[  FAILED  ] $name" ;;
    esac
    [ "$1" = failed ] && exit 1
    exit 0
}

[ -n "${LFEPOLLD:-}" ] && [ -n "${LFBENCH:-}" ] || end failed "set LFEPOLLD and LFBENCH (make test does)"
if ! python3 -c 'import hdrh' 2>/dev/null; then
    [ "${CI:-}" = true ] && end failed "python3 with hdrh is needed in CI (make deps installs it)"
    end skipped "skipped: needs python3 -m pip install hdrhistogram (make deps does it as root)"
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$LFEPOLLD" --listen "127.0.0.1:$port" -q >/dev/null 2>&1 &
srv=$!
for _ in $(seq 500); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.01
done
(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || end failed "lfepolld did not listen on $port"

# Open loop at a modest rate: the machine may be measuring something else; a warm-up second the
# log must leave out, as --json does.
before=$(date +%s)
timeout -k 5 60 "$LFBENCH" -q -c 8 -R 5000 --warmup 1 -d 3 --hdr-log "$dir/run.hlog" \
    --json "$dir/run.json" "127.0.0.1:$port" >"$dir/out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || end failed "$(cat "$dir/out")
lfbench exited with $rc"
[ -s "$dir/run.hlog" ] || end failed "lfbench wrote no --hdr-log file"

# The StartTime is wall-clock seconds of this run.
start=$(sed -n 's/^#\[StartTime: \([0-9]*\)\.[0-9]* (seconds since epoch), .*\]$/\1/p' "$dir/run.hlog")
[ -n "$start" ] && [ "$start" -ge $((before - 1)) ] && [ "$start" -le $(($(date +%s) + 1)) ] ||
    end failed "StartTime '$start' is not this run's ($before..$(date +%s)): $(head -3 "$dir/run.hlog")"

python3 "$here/hdr_interop.py" "$dir/run.hlog" "$dir/run.json" >"$dir/check" 2>&1
rc=$?
cat "$dir/check"
[ "$rc" -eq 0 ] || end failed "hdr_interop.py exited with $rc; the log:
$(cat "$dir/run.hlog")"

# One interval a second of the measured window: 3; one more for the last second cut short, one
# (empty) for the warm-up when the writer logs the whole run.
n=$(sed -n 's/^hdr_interop: \([0-9]*\) intervals.*/\1/p' "$dir/check")
[ "${n:-0}" -ge 3 ] && [ "$n" -le 5 ] || end failed "$n intervals for -d 3"

# Short connections: each second's connect and first-byte phases, tagged intervals of their own
# beside the untagged latencies, read by hdrh and compared with --json's connect_latency and
# first_byte_latency; no handshake without --tls.
timeout -k 5 60 "$LFBENCH" -q --mode short -c 4 -n 400 --hdr-log "$dir/short.hlog" \
    --json "$dir/short.json" "127.0.0.1:$port" >"$dir/out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || end failed "$(cat "$dir/out")
lfbench --mode short exited with $rc"
for phase in connect first_byte; do
    python3 "$here/hdr_interop.py" "$dir/short.hlog" "$dir/short.json" "${phase}_latency" \
        "$phase" >"$dir/check" 2>&1
    rc=$?
    cat "$dir/check"
    [ "$rc" -eq 0 ] || end failed "hdr_interop.py $phase exited with $rc; the log:
$(cat "$dir/short.hlog")"
    grep -q "^hdr_interop: [0-9]* intervals, 400 samples (lfbench: 400)" "$dir/check" ||
        end failed "want the 400 connections' $phase in the log"
done
! grep -q '^Tag=handshake,' "$dir/short.hlog" || end failed "a handshake interval without --tls"
end passed ""
