#!/usr/bin/env bash
# test_docs_examples: every shell block that README.md, lua/README.md, docs/*.md and
# examples/README.md mark runnable runs as written in a clone and exits 0, so a document that
# drifts from the binaries (a renamed option, a file not shipped, a port that changed) fails make
# test. The convention (tests/README.md):
#
#   <!-- runnable -->                  the next ```sh block runs alone
#   <!-- runnable: lfepolld ARGS -->   it runs while `./lfepolld ARGS` serves ("in another shell")
#
# and every sample output is compared with what its command prints now, line by line, by shape
# (numbers, addresses and times masked; a "..." line skips lines, "..." in a line any text), so
# that a sample cannot drift from the binaries either:
#
#   <!-- sample: COMMAND -->                     the next ``` block is what COMMAND prints
#   <!-- sample: lfepolld ARGS -->               ... the daemon's log, from start to SIGTERM
#   <!-- sample: lfepolld ARGS; COMMAND -->      ... its log while COMMAND runs, to SIGTERM
#   <!-- sample -->                              a transcript: its "$ " lines run, the rest is
#                                                what they print (with lfepolld ARGS serving,
#                                                after "sample: lfepolld ARGS")
#
# Each block runs with bash -e -o pipefail, in a directory that looks like a fresh clone (the
# checkout's files but those .gitignore ignores, ./lfepolld and ./lfbench the binaries under
# test), inside a network namespace and a pid namespace of its own (with its own /proc, which
# LeakSanitizer reads): the documented default ports (9876, 9877) are always free there, and nothing outside is reached. A block
# stops what it starts, as a reader's shell would need it to: a process still running 2 s after
# the block fails it, named (the namespace then ends it). lfepolld and lfbench are not on PATH (a fresh clone has them only as ./lfepolld, ./lfbench). A
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
# The machine the samples were taken on: 2 CPUs (the runs get the first 2 this process may
# use), RLIMIT_NOFILE 20000. With fewer CPUs the plan has another shape: samples are skipped.
sample_cpus() {
    local list c lo hi out=()
    list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
    for c in ${list//,/ }; do
        lo=${c%-*} hi=${c#*-}
        while [ "$lo" -le "$hi" ] && [ ${#out[@]} -lt 2 ]; do out+=("$lo"); lo=$((lo + 1)); done
    done
    [ ${#out[@]} = 2 ] && echo "${out[0]},${out[1]}"
}
cpus=$(sample_cpus)

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
# command line, "lfepolld ARGS", or nothing). The samples: $dir/samples/N.txt, with N.where and
# N.spec (what follows "sample:", or nothing for a transcript). A marker not followed by its kind
# of block is itself a failure: a block the test silently skipped would let its document drift.
mkdir -p "$dir/blocks" "$dir/samples"
awk -v out="$dir/blocks" -v sout="$dir/samples" '
    function fail(msg) { print FILENAME ":" FNR ": " msg > (out "/errors"); }
    FNR == 1 { want = 0; swant = 0; inb = 0 }
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
    swant && /^```(text|json)?[ \t]*$/ {
        m++; f = sout "/" m ".txt"; inb = 1; swant = 0
        print FILENAME ":" FNR > (sout "/" m ".where"); close(sout "/" m ".where")
        printf "%s", spec > (sout "/" m ".spec"); close(sout "/" m ".spec")
        printf "" > f
        next
    }
    swant { fail("<!-- sample --> is not followed by a ``` (or ```text, ```json) block"); swant = 0 }
    /^<!-- runnable(: lfepolld( [^>]*)?)? -->[ \t]*$/ {
        want = 1; args = $0
        sub(/^<!-- runnable(: )?/, "", args); sub(/ ?-->[ \t]*$/, "", args)
        next
    }
    /^<!-- sample(: [^ ].*)? -->[ \t]*$/ {
        swant = 1; spec = $0
        sub(/^<!-- sample(: )?/, "", spec); sub(/ ?-->[ \t]*$/, "", spec)
        next
    }
    /<!-- *run/ { fail("malformed marker (<!-- runnable --> or <!-- runnable: lfepolld ARGS -->)") }
    /<!-- *sample/ { fail("malformed marker (<!-- sample --> or <!-- sample: COMMAND -->)") }
    END { if (want || swant) fail("a marker at the end of the file") }
' "${docs[@]}"
n=$(find "$dir/blocks" -name '*.sh' | wc -l)
ns=$(find "$dir/samples" -name '*.txt' | wc -l)

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
nsc=(unshare --net --pid --mount-proc --fork --kill-child)
[ "$(id -u)" = 0 ] || nsc=(unshare --user --map-root-user --net --pid --mount-proc --fork --kill-child)
echo "[==========] Running $((n + ns + 2)) test(s)."
if ! "${nsc[@]}" ip link set lo up 2>/dev/null; then
    echo "[ RUN      ] test_docs_examples"
    echo "no network and pid namespace here (${nsc[*]}): the documents' examples are not run"
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
if [ -z "$msg" ] && [ "$((n + ns))" -gt 0 ]; then
    echo "[       OK ] test_docs_markers"; passed=$((passed + 1))
else
    printf '%s\n' "$msg"; echo "[  FAILED  ] test_docs_markers"; failed+=(test_docs_markers)
fi

# Whether .gitignore in directory $1 ignores its top-level entry $2: what a fresh clone does not
# have (the build, and what the documents' examples wrote there: run.json, a.png, old.log).
# gitignore's rules for a name without a slash: a leading / anchors it (here it is), a trailing
# / asks for a directory, ! takes a name back, the last pattern that matches decides.
ignored() {
    local line pat neg res=1
    [ -f "$1/.gitignore" ] || return 1
    while IFS= read -r line || [ -n "$line" ]; do
        case $line in '' | '#'*) continue ;; esac
        neg=0
        [ "${line#!}" != "$line" ] && neg=1 line=${line#!}
        pat=${line#/}
        if [ "${pat%/}" != "$pat" ]; then
            pat=${pat%/}
            [ -d "$1/$2" ] || continue
        fi
        case $pat in */*) continue ;; esac # a path below the top: no top-level name
        # shellcheck disable=SC2053
        [[ $2 == $pat ]] && res=$neg
    done <"$1/.gitignore"
    return "$res"
}

# The clone ($2) of checkout $1: its top-level entries by symbolic link (so what a block writes
# stays in $dir), but none that .gitignore ignores. A run.png left by the reader's own run of the
# README's example was a link to it: the block's `lfbench plot run.json` refused to write through
# it (exit 2), and its `--json run.json` wrote over the reader's file in the checkout.
make_clone() {
    local e
    mkdir -p "$2"
    for e in "$1"/* "$1"/.[!.]*; do
        [ -e "$e" ] || continue
        case ${e##*/} in lfepolld | lfbench | build | build-* | .git) continue ;; esac
        ignored "$1" "${e##*/}" && continue
        ln -s "$e" "$2/${e##*/}"
    done
}

# The clone, with the binaries under test as ./lfepolld and ./lfbench. On PATH, stand-ins that
# fail with the remedy, should an installed copy exist: a document must not depend on one.
clone=$dir/clone
mkdir -p "$dir/bin"
make_clone "$top" "$clone"
ln -s "$srv" "$clone/lfepolld"
ln -s "$cli" "$clone/lfbench"
# make_clone on a checkout a reader has used: what the examples wrote and the build stay out.
echo "[ RUN      ] test_docs_clone_is_fresh"
used=$dir/used-checkout
mkdir -p "$used/docs" "$used/build-address" "$used/results"
printf '/build*/\n/results/\n*.o\n/run.png\n/a.json\n!/keep.o\n' >"$used/.gitignore"
touch "$used/README.md" "$used/run.png" "$used/a.json" "$used/x.o" "$used/keep.o" "$used/results.txt"
make_clone "$used" "$dir/used-clone"
got=$(cd "$dir/used-clone" && LC_ALL=C ls -A | tr '\n' ' ')
if [ "$got" = ".gitignore README.md docs keep.o results.txt " ]; then
    echo "[       OK ] test_docs_clone_is_fresh"; passed=$((passed + 1))
else
    echo "the clone of a used checkout holds: $got"
    echo "(want .gitignore README.md docs keep.o results.txt: no build, no run.png, a.json, x.o)"
    echo "[  FAILED  ] test_docs_clone_is_fresh"; failed+=(test_docs_clone_is_fresh)
fi
rm -rf "$used" "$dir/used-clone"

for b in lfepolld lfbench; do
    printf '#!/bin/sh\necho "%s: not on PATH in a fresh clone; write ./%s" >&2\nexit 127\n' \
        "$b" "$b" >"$dir/bin/$b"
    chmod +x "$dir/bin/$b"
done

# Runs one block inside the namespaces: $1 the block, $2 the daemon's command line ("lfepolld
# ARGS", or empty for none), $3 TEST_SLOW.
# Exit status: the block's, or 3 when the daemon did not start, 4 when it did not stop cleanly,
# 5 when the block left a process running.
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
# What the block started must be stopped by it, as a reader's shell has no namespace to end it:
# a daemon it left running kept the shell's output open, and a pipe after the block (| grep)
# never ended. A process on its way out gets 2 s.
left() {
    local p st
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] || [ "$p" = "${pid:-}" ] || [ "$p" = "$BASHPID" ] && continue
        read -r _ _ st _ <"/proc/$p/stat" 2>/dev/null || continue
        [ "$st" = Z ] || printf '%s: %s\n' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
    done
}
for _ in $(seq $((20 * slow))); do
    [ -z "$(left)" ] && break
    sleep 0.1
done
if [ -n "$(left)" ]; then
    echo "the block left running what it started (stop it in the block: kill \"\$!\"):"
    left
    [ "$rc" = 0 ] && rc=5
fi
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
    t0=$SECONDS
    out=$(cd "$clone" && PATH="$dir/bin:$PATH" timeout -k 5 "$limit" "${nsc[@]}" \
        bash "$runner" "$b" "$args" "$slow" 2>&1)
    rc=$?
    echo "($((SECONDS - t0)) s)"
    if [ "$rc" = 0 ]; then
        echo "[       OK ] $where"; passed=$((passed + 1))
    else
        printf '%s\n' "$out" | tail -40
        [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "$where: did not end within $limit s"
        echo "$where: exit status $rc"
        echo "[  FAILED  ] $where"; failed+=("$where")
    fi
done
# The samples. A sample's runner, inside the namespaces like a block's: $1 the sample, $2 its
# spec, $3 TEST_SLOW. It writes what the command printed to $1.out and exits 0, or prints why
# not (a daemon that did not start or stop cleanly, a COMMAND that failed) and exits 3 or 4.
srunner=$dir/srunner.sh
cat >"$srunner" <<'EOF'
set -u
sample=$1 spec=$2 slow=$3 out=$1.out daemon= cmd=
ip link set lo up || exit 3
ulimit -n 20000 2>/dev/null # the samples' machine (lowering always works; raising may not)
unset MAKEFLAGS MFLAGS MAKELEVEL # a make target in a sample is not make test's sub-make
case $spec in
lfepolld | "lfepolld "* | "lfepolld;"*) daemon=${spec%%;*} ;;
esac
[ -n "$daemon" ] && [ "$daemon" != "$spec" ] && cmd=${spec#*;}
is_transcript() { head -1 "$sample" | grep -q '^\$ '; }
# A transcript: each "$ " line runs, and the sample is those lines and what they print.
transcript() {
    local line
    : >"$out"
    while IFS= read -r line; do
        case $line in
        '$ '*) printf '%s\n' "$line" >>"$out"; bash -o pipefail -c "${line#\$ }" >>"$out" 2>&1 ;;
        esac
    done <"$sample"
}
if [ -n "$daemon" ]; then
    # word splitting on purpose, as for runnable blocks
    eval "exec ./$daemon" 2>"$sample.log" &
    pid=$!
    for _ in $(seq $((100 * slow))); do
        grep -q 'listening on' "$sample.log" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    grep -q 'listening on' "$sample.log" || { echo "$daemon did not start:"; cat "$sample.log"; exit 3; }
    rc=0
    if is_transcript; then
        transcript
    elif [ -n "$cmd" ]; then
        bash -o pipefail -c "$cmd" >"$sample.cmd" 2>&1 || rc=$?
        [ "$rc" = 0 ] || { echo "$cmd exited $rc:"; cat "$sample.cmd"; }
    fi
    # SIGTERM after the command's signals: main takes the lowest-numbered pending signal first
    # (SIGHUP 1, SIGUSR1 10, SIGTERM 15), so what they print comes before "SIGTERM: stopping"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    drc=$?
    if [ "$drc" != 0 ]; then
        echo "$daemon exited $drc after SIGTERM:"; tail -20 "$sample.log"
        exit 4
    fi
    [ "$rc" = 0 ] || exit 3
    is_transcript || sed '/SIGTERM: stopping/,$d' "$sample.log" >"$out"
elif is_transcript; then
    transcript
else
    bash -o pipefail -c "$spec" >"$out" 2>&1
fi
exit 0
EOF

# Compares a sample with what was printed, by shape: in both, every run of digits (with the dots,
# dashes, commas and colons between them: 127.0.0.1:9876, 22:52:41.045, 0-1) reads N and blanks
# fold to one; a sample line "..." stands for any lines (none included), and "..." inside a line
# for any text. On a difference it says which sample line no output line matches, and where.
cat >"$dir/compare.awk" <<'EOF'
function shape(s) {
    gsub(/[0-9]+([-.,:][0-9]+)*/, "N", s); gsub(/[ \t]+/, " ", s); sub(/ $/, "", s)
    return s
}
function glob(p, s,   parts, k, n, at) { # p, "..." standing for any text, against the whole of s
    if (index(p, "...") == 0) return p == s
    n = split(p, parts, /\.\.\./)
    if (substr(s, 1, length(parts[1])) != parts[1]) return 0
    s = substr(s, length(parts[1]) + 1)
    for (k = 2; k < n; k++) {
        if (parts[k] == "") continue
        if (!(at = index(s, parts[k]))) return 0
        s = substr(s, at + length(parts[k]))
    }
    return length(s) >= length(parts[n]) && substr(s, length(s) - length(parts[n]) + 1) == parts[n]
}
function from(i, j,   k) { # 1 when sample lines i.. match output lines j..
    if ((i, j) in memo) return memo[i, j]
    if (sp[i] != "..." && (i > far || (i == far && j > farj))) { far = i; farj = j }
    if (i > ns) return memo[i, j] = (j > no)
    if (sp[i] == "...") {
        for (k = j; k <= no + 1; k++) if (from(i + 1, k)) return memo[i, j] = 1
        return memo[i, j] = 0
    }
    if (j <= no && glob(sp[i], op[j]) && from(i + 1, j + 1)) return memo[i, j] = 1
    return memo[i, j] = 0
}
FNR == NR { ns++; sraw[ns] = $0; sp[ns] = shape($0); if (sp[ns] == " ...") sp[ns] = "..."; next }
{ no++; op[no] = shape($0); oraw[no] = $0 }
END {
    if (from(1, 1)) exit 0
    if (far > ns)
        printf "the output goes on after the sample ends, at its line %d:\n    %s\n", farj, oraw[farj]
    else {
        printf "its line %d matches no line of the output there:\n    %s\n", far, sraw[far]
        if (farj <= no) printf "the output there (its line %d):\n    %s\n", farj, oraw[farj]
        else print "the output had ended"
    }
    exit 1
}
EOF

for i in $(seq "$ns"); do
    smp=$dir/samples/$i.txt
    where=$(cat "$dir/samples/$i.where")
    spec=$(cat "$dir/samples/$i.spec")
    name="$where (sample)"
    echo "[ RUN      ] $name"
    echo "(of ${spec:-the transcript})"
    if [ -z "$cpus" ]; then
        echo "fewer than 2 CPUs here: the samples are of a 2-CPU machine"
        echo "[  SKIPPED ] $name"; passed=$((passed + 1)); continue
    fi
    t0=$SECONDS
    out=$(cd "$clone" && PATH="$dir/bin:$PATH" timeout -k 5 "$limit" taskset -c "$cpus" \
        "${nsc[@]}" bash "$srunner" "$smp" "$spec" "$slow" 2>&1)
    rc=$?
    echo "($((SECONDS - t0)) s)"
    if [ "$rc" = 0 ] && diff=$(awk -f "$dir/compare.awk" "$smp" "$smp.out"); then
        echo "[       OK ] $name"; passed=$((passed + 1))
    else
        [ -z "$out" ] || printf '%s\n' "$out" | tail -40
        [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "$where: did not end within $limit s"
        if [ "$rc" = 0 ]; then
            printf '%s: the sample is not what its command prints: %s\nwhat it prints now:\n' \
                "$where" "$diff"
            sed 's/^/    | /' "$smp.out"
        else
            echo "$where: exit status $rc"
        fi
        echo "[  FAILED  ] $name"; failed+=("$name")
    fi
done
# What the blocks and samples wrote at the top of the clone (run.json, a.png, old.log, ...) is
# what a reader's clone gets: .gitignore must cover it, or `git status` fills with it.
echo "[ RUN      ] test_docs_files_ignored"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
    msg=
    for e in "$clone"/* "$clone"/.[!.]*; do
        [ -e "$e" ] && [ ! -L "$e" ] || continue
        git -C "$top" check-ignore -q --no-index "${e##*/}" ||
            msg+="${e##*/} (written by a document's example) is not in .gitignore"$'\n'
    done
    if [ -z "$msg" ]; then
        echo "[       OK ] test_docs_files_ignored"; passed=$((passed + 1))
    else
        printf '%s' "$msg"; echo "[  FAILED  ] test_docs_files_ignored"
        failed+=(test_docs_files_ignored)
    fi
else
    echo "not a git checkout: no .gitignore to hold to account"
    echo "[  SKIPPED ] test_docs_files_ignored"; passed=$((passed + 1))
fi
summary "$passed" "${failed[@]}"
