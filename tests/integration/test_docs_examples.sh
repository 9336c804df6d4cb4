#!/usr/bin/env bash
# test_docs_examples: every shell block that README.md, lua/README.md, docs/*.md and
# examples/README.md mark runnable runs as written in a clone and exits 0, so a document that
# drifts from the binaries (a renamed option, a file not shipped, a port that changed) fails make
# test. The convention (tests/README.md):
#
#   <!-- runnable -->                  the next ```sh block runs alone
#   <!-- runnable: lfepolld ARGS -->   it runs while `./lfepolld ARGS` serves ("in another shell")
#
# Each block runs with bash -e -o pipefail, in a directory that looks like a fresh clone (the
# checkout's files, ./lfepolld and ./lfbench the binaries under test), inside a network namespace
# and a pid namespace of its own (with its own /proc, which LeakSanitizer reads): the documented
# default ports (9876, 9877) are always free there,
# nothing outside is reached, and every process a block leaves behind dies with the namespace.
# lfepolld and lfbench are not on PATH (a fresh clone has them only as ./lfepolld, ./lfbench). A
# daemon the test started must then stop on SIGTERM and exit 0. Each block is bounded in time
# (BLOCK_TIMEOUT seconds, 120 by default, times TEST_SLOW). Prints cmocka's result lines for
# tests/run.sh; one test per block, named FILE:LINE. Needs root or an unprivileged user
# namespace for the namespaces; skipped with one line otherwise.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/lfe-docs-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$top" || exit 1
srv=${LFEPOLLD:-$top/lfepolld}
cli=${LFBENCH:-$top/lfbench}
slow=${TEST_SLOW:-1}
limit=$((${BLOCK_TIMEOUT:-120} * slow))
# DOCS="README.md ..." runs the blocks of those files only (while writing one).
# shellcheck disable=SC2206
docs=(${DOCS:-README.md lua/README.md docs/*.md examples/README.md})

summary() { # passed failed-names...
    local p=$1
    shift
    echo "[==========] $((p + $#)) test(s) run."
    echo "[  PASSED  ] $p test(s)."
    if [ $# -gt 0 ]; then
        echo "[  FAILED  ] $# test(s), listed below:"
        for f in "$@"; do echo "[  FAILED  ] $f"; done
        exit 1
    fi
    exit 0
}

# The blocks: $dir/blocks/N.sh, with N.where (FILE:LINE of the fence) and N.daemon (the daemon's
# command line, "lfepolld ARGS", or nothing). A marker not followed by a ```sh block is itself a failure: a block the
# test silently skipped would let its document drift.
mkdir -p "$dir/blocks"
awk -v out="$dir/blocks" '
    function fail(msg) { print FILENAME ":" FNR ": " msg > (out "/errors"); }
    FNR == 1 { want = 0; inb = 0 }
    inb && /^```[ \t]*$/ { inb = 0; close(f); next }
    inb { print > f; next }
    want && /^```sh[ \t]*$/ {
        n++; f = out "/" n ".sh"; inb = 1; want = 0
        print FILENAME ":" FNR > (out "/" n ".where"); close(out "/" n ".where")
        printf "%s", args > (out "/" n ".daemon"); close(out "/" n ".daemon")
        printf "" > f
        next
    }
    want { fail("<!-- runnable --> is not followed by a ```sh block"); want = 0 }
    /^<!-- runnable(: lfepolld( [^>]*)?)? -->[ \t]*$/ {
        want = 1; args = $0
        sub(/^<!-- runnable(: )?/, "", args); sub(/ ?-->[ \t]*$/, "", args)
        next
    }
    /<!-- *run/ { fail("malformed marker (<!-- runnable --> or <!-- runnable: lfepolld ARGS -->)") }
    END { if (want) fail("<!-- runnable --> at the end of the file") }
' "${docs[@]}"
n=$(find "$dir/blocks" -name '*.sh' | wc -l)

# Under a sanitizer (make test SANITIZER=...) the documents are not run again: they test the
# text, which the plain make test already holds to account, and would add minutes to each
# instrumented pass (.ci/run's budget); the daemon paths they use run there in the other tests.
# DOCS_UNDER_SANITIZER=1 runs them anyway.
if [ -n "${LFE_SANITIZER:-}" ] && [ -z "${DOCS_UNDER_SANITIZER:-}" ]; then
    echo "[==========] Running 1 test(s)."
    echo "[ RUN      ] test_docs_examples"
    echo "a $LFE_SANITIZER build: the documents' examples run in the plain make test"
    echo "[  SKIPPED ] test_docs_examples"
    summary 0
fi

# The namespaces: as root, or as an unprivileged user mapped to root in a user namespace.
ns=(unshare --net --pid --mount-proc --fork --kill-child)
[ "$(id -u)" = 0 ] || ns=(unshare --user --map-root-user --net --pid --mount-proc --fork --kill-child)
echo "[==========] Running $((n + 1)) test(s)."
if ! "${ns[@]}" ip link set lo up 2>/dev/null; then
    echo "[ RUN      ] test_docs_examples"
    echo "no network and pid namespace here (${ns[*]}): the documents' examples are not run"
    echo "[  SKIPPED ] test_docs_examples"
    summary 0
fi

# The markers themselves, and the floor: the README's tour and the Lua quick start are runnable.
passed=0 failed=()
echo "[ RUN      ] test_docs_markers"
msg=$(cat "$dir/blocks/errors" 2>/dev/null)
for f in README.md lua/README.md; do
    grep -q '^<!-- runnable' "$f" || msg+="$f has no runnable block"$'\n'
done
if [ -z "$msg" ] && [ "$n" -gt 0 ]; then
    echo "[       OK ] test_docs_markers"; passed=$((passed + 1))
else
    printf '%s\n' "$msg"; echo "[  FAILED  ] test_docs_markers"; failed+=(test_docs_markers)
fi

# The clone: the checkout's top-level entries by symbolic link (so what a block writes stays in
# $dir), the binaries under test as ./lfepolld and ./lfbench. On PATH, stand-ins that fail with
# the remedy, should an installed copy exist: a document must not depend on one.
clone=$dir/clone
mkdir -p "$clone" "$dir/bin"
for e in "$top"/*; do
    case ${e##*/} in lfepolld | lfbench | build | build-*) continue ;; esac
    ln -s "$e" "$clone/${e##*/}"
done
ln -s "$srv" "$clone/lfepolld"
ln -s "$cli" "$clone/lfbench"
for b in lfepolld lfbench; do
    printf '#!/bin/sh\necho "%s: not on PATH in a fresh clone; write ./%s" >&2\nexit 127\n' \
        "$b" "$b" >"$dir/bin/$b"
    chmod +x "$dir/bin/$b"
done

# Runs one block inside the namespaces: $1 the block, $2 the daemon's command line ("lfepolld
# ARGS", or empty for none), $3 TEST_SLOW.
# Exit status: the block's, or 3 when the daemon did not start, 4 when it did not stop cleanly.
runner=$dir/runner.sh
cat >"$runner" <<'EOF'
set -u
block=$1 daemon=$2 slow=$3
ip link set lo up || exit 3
if [ -n "$daemon" ]; then
    # word splitting on purpose: the marker holds a command line as a shell would split it
    eval "exec ./$daemon" 2>"$block.log" &
    pid=$!
    for _ in $(seq $((100 * slow))); do
        grep -q 'listening on' "$block.log" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    grep -q 'listening on' "$block.log" || { echo "$daemon did not start:"; cat "$block.log"; exit 3; }
fi
bash -e -o pipefail "$block"
rc=$?
if [ -n "$daemon" ]; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    drc=$?
    if [ "$drc" != 0 ]; then
        echo "$daemon exited $drc after SIGTERM (block exit $rc):"; tail -20 "$block.log"
        [ "$rc" = 0 ] && rc=4
    fi
fi
exit "$rc"
EOF

for i in $(seq "$n"); do
    b=$dir/blocks/$i.sh
    where=$(cat "$dir/blocks/$i.where")
    args=$(cat "$dir/blocks/$i.daemon")
    echo "[ RUN      ] $where"
    [ -n "$args" ] && echo "(with ./$args serving)"
    sed 's/^/    | /' "$b"
    out=$(cd "$clone" && PATH="$dir/bin:$PATH" timeout -k 5 "$limit" "${ns[@]}" \
        bash "$runner" "$b" "$args" "$slow" 2>&1)
    rc=$?
    if [ "$rc" = 0 ]; then
        echo "[       OK ] $where"; passed=$((passed + 1))
    else
        printf '%s\n' "$out" | tail -40
        [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "$where: did not end within $limit s"
        echo "$where: exit status $rc"
        echo "[  FAILED  ] $where"; failed+=("$where")
    fi
done
summary "$passed" "${failed[@]}"
