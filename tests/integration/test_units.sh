#!/usr/bin/env bash
# test_units: systemd/lfepolld.service and lfepolld.socket pass `systemd-analyze verify` with
# nothing to say (a warning fails too), ExecStart= pointed at the built binary. The check is
# shown able to fail: the same units with a misspelt key must draw a complaint. Prints cmocka's
# result lines for tests/run.sh. Without systemd-analyze: skipped, except in CI (CI=true).
set -u
name=test_units_verify
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/lfe-units-XXXXXX)
trap 'rm -rf "$dir"' EXIT

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

if ! command -v systemd-analyze >/dev/null; then
    [ "${CI:-}" = true ] && end failed "systemd-analyze is missing (Debian package systemd; make deps)"
    end skipped "systemd-analyze not installed (apt-get install systemd): skipped"
fi
bin=${LFEPOLLD:-$top/lfepolld}
[ -x "$bin" ] || end failed "no lfepolld at $bin (make)"
sed "s|^ExecStart=/usr/local/bin/lfepolld|ExecStart=$bin|" "$top/systemd/lfepolld.service" \
    >"$dir/lfepolld.service"
cp "$top/systemd/lfepolld.socket" "$dir/"
grep -q "^ExecStart=$bin " "$dir/lfepolld.service" || end failed "no ExecStart= to point at $bin"
out=$(systemd-analyze verify --man=no "$dir/lfepolld.socket" "$dir/lfepolld.service" 2>&1)
rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] || end failed "systemd-analyze verify (exit $rc): $out"
# make verify-units, what the docs give users for the same check in a clone, passes too.
out=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$top" SANITIZER="${LFE_SANITIZER:-}" verify-units 2>&1) ||
    end failed "make verify-units: $out"
[ "$out" = "verify-units: lfepolld.service and lfepolld.socket pass" ] ||
    end failed "make verify-units said more than its pass line: $out"
# The check can fail: a misspelt key is reported.
sed 's/^KillSignal=/KilSignal=/' "$dir/lfepolld.service" >"$dir/bad.service" &&
    mv "$dir/bad.service" "$dir/lfepolld.service"
out=$(systemd-analyze verify --man=no "$dir/lfepolld.socket" "$dir/lfepolld.service" 2>&1)
echo "$out" | grep -q "Unknown key 'KilSignal'" ||
    end failed "a misspelt key drew no complaint from systemd-analyze: '$out'"
end passed ""
