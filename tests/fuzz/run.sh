#!/usr/bin/env bash
# Runs each fuzz target for SECONDS, one at a time, and ends with "N passed, N failed" (one test
# per target). Usage: tests/fuzz/run.sh SECONDS TARGET...   (FUZZ_BUILD: default build-fuzz)
#
# A target starts from its seeds (tests/fuzz/corpus/T) and the inputs earlier runs kept
# (build-fuzz/corpus/T, where new ones go). It fails when libFuzzer reports a crash, a leak, a
# broken invariant (abort), a timeout (-timeout per input) or an out-of-memory, or when it does
# not end within SECONDS + 120. The failing input is in build-fuzz/artifacts/T/; replay it with
#   build-fuzz/fuzz_T build-fuzz/artifacts/T/<file>
set -u
cd "$(dirname "$0")/../.."
secs=$1
shift
build=${FUZZ_BUILD:-build-fuzz}
passed=0 failed=0

for t in "$@"; do
    bin=$build/fuzz_$t
    work=$build/corpus/$t
    art=$build/artifacts/$t
    log=$build/logs/$t.log
    mkdir -p "$work" "$art" "$build/logs"
    # one process, in place (no -jobs: that forks and logs to ./fuzz-N.log)
    opts=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$art/")
    [ -f "tests/fuzz/$t.dict" ] && opts+=(-dict="tests/fuzz/$t.dict")
    [ -f "tests/fuzz/$t.options" ] && read -ra extra <"tests/fuzz/$t.options" && opts+=("${extra[@]}")
    echo "== fuzz_$t: ${secs}s"
    start=$(date +%s)
    timeout -k 10 $((secs + 120)) "$bin" "${opts[@]}" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*')
    if [ "$rc" -eq 0 ]; then
        echo "fuzz_$t: ok, ${runs:-?} runs in ${took}s, ${cov:-no coverage line}"
        passed=$((passed + 1))
    else
        echo "fuzz_$t: FAILED (exit $rc after ${took}s); the end of $log:"
        tail -n 40 "$log"
        ls -t "$art" | head -3 | sed "s|^|    input: $art/|"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
