#!/usr/bin/env bash
# Runs cmocka test binaries, each under a hard timeout, and ends with "N passed, N failed".
# A binary that crashes or times out counts as one failed test on top of what it reported.
# TEST_TIMEOUT (seconds per binary, default 300) scales for slow sanitizer builds.
set -u
passed=0 failed=0
for bin in "$@"; do
    out=$(mktemp) t0=$SECONDS
    timeout -k 5 "${TEST_TIMEOUT:-300}" "$bin" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$bin: exited with status $rc without a cmocka failure (crash or timeout)"
        f=1
    fi
    passed=$((passed + p)) failed=$((failed + f))
    echo "-- ${bin##*/}: $p passed, $f failed, $((SECONDS - t0)) s"
    rm -f "$out"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
