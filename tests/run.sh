#!/usr/bin/env bash
# Runs cmocka test binaries, each under a hard timeout, and ends with "N passed, N failed".
# A binary that crashes or times out counts as one failed test on top of what it reported.
# TEST_TIMEOUT (seconds per binary, default 300) scales for slow sanitizer builds. An argument
# NAME=VALUE sets that variable for the binaries after it (make test ACCEPT_THREADS=2). Each
# binary's line "-- NAME: N passed, N failed, S s" says where the time went.
set -u
passed=0 failed=0
for bin in "$@"; do
    if [[ $bin == *=* && ! -e $bin ]]; then # NAME=VALUE: the environment of the binaries after it
        export "${bin?}"
        echo "-- from here on: $bin"
        continue
    fi
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
