#!/usr/bin/env bash
# test_install: make install into a temporary DESTDIR puts every file where lfepolld(8) says,
# the installed daemon runs, both man pages render without a warning (man -l), the example
# config parses with every line enabled, an existing /etc/lfepolld.conf is never overwritten and
# make uninstall removes exactly what install put there. Prints cmocka's result lines.
set -u
name=test_make_install_uninstall
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/lfe-install-XXXXXX)
trap 'rm -rf "$dir"' EXIT

echo "[==========] Running 1 test(s)."
echo "[ RUN      ] $name"
end() { # passed|failed, message
    [ -n "$2" ] && echo "$2"
    case $1 in
    passed) echo "[       OK ] $name"; echo "[==========] 1 test(s) run."
            echo "[  PASSED  ] 1 test(s)." ;;
    *) echo "[  FAILED  ] $name"; echo "[==========] 1 test(s) run."
       echo "[  PASSED  ] 0 test(s)."; echo "[  FAILED  ] 1 test(s), listed below:"
       echo "[  FAILED  ] $name" ;;
    esac
    [ "$1" = failed ] && exit 1
    exit 0
}

mk() { make -s -C "$top" SANITIZER="${LFE_SANITIZER:-}" DESTDIR="$dir/root" PREFIX=/usr "$@"; }
mk install >"$dir/out" 2>&1 || end failed "make install failed: $(cat "$dir/out")"
want="etc/lfepolld.conf etc/sysctl.d/60-lfepoll.conf usr/bin/lfbench usr/bin/lfepolld
usr/lib/systemd/system/lfepolld.service usr/lib/systemd/system/lfepolld.socket
usr/share/man/man1/lfbench.1 usr/share/man/man8/lfepolld.8 usr/share/lfepoll/lua/README.md
$(cd "$top" && ls lua/*.lua lua/bench/*.lua lua/bench/wrk/*.lua | sed 's|^|usr/share/lfepoll/|')"
got=$(cd "$dir/root" && find . -type f | sed 's|^\./||' | sort)
[ "$got" = "$(echo "$want" | tr ' ' '\n' | sort)" ] ||
    end failed "installed files differ from the list: want
$(echo "$want" | tr ' ' '\n' | sort)
got
$got"
"$dir/root/usr/bin/lfepolld" --version | grep -q '^lfepolld ' || end failed "installed lfepolld --version"
grep -q '^ExecStart=/usr/bin/lfepolld ' "$dir/root/usr/lib/systemd/system/lfepolld.service" ||
    end failed "the installed unit's ExecStart= does not point at /usr/bin/lfepolld"
cmp -s "$top/sysctl.conf" "$dir/root/etc/sysctl.d/60-lfepoll.conf" || end failed "sysctl.conf differs"
for m in usr/share/man/man8/lfepolld.8 usr/share/man/man1/lfbench.1; do
    if command -v man >/dev/null; then
        w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$dir/root/$m" 2>&1 >/dev/null)
        [ -z "$w" ] || end failed "man -l $m warns: $w"
        LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$dir/root/$m" 2>/dev/null | grep -q 'SYNOPSIS' ||
            end failed "man -l $m renders no SYNOPSIS"
    elif [ "${CI:-}" = true ]; then
        end failed "man is missing (Debian package man-db)"
    fi
done
# Every option the daemon has is in its man page.
for o in $("$dir/root/usr/bin/lfepolld" --help | grep -o '^  --[a-z-]*' | tr -d ' '); do
    grep -q -- "${o//-/\\\\-}" "$top/man/lfepolld.8" || end failed "lfepolld(8) does not describe $o"
done
for o in $("$dir/root/usr/bin/lfbench" --help | grep -o '^  --[a-z0-9-]*' | tr -d ' '); do
    grep -q -- "${o//-/\\\\-}" "$top/man/lfbench.1" || end failed "lfbench(1) does not describe $o"
done
# The man pages' EXAMPLES run after make install, from any directory: a file they name is an
# installed one, under $(PREFIX)/share/lfepoll (here /usr/share/lfepoll; the pages say
# /usr/local, the default PREFIX), never a path of the clone (lfbench(1) named
# lua/bench/kv_mix.lua, which only a clone's top has).
for m in man/lfepolld.8 man/lfbench.1; do
    ex=$(sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$top/$m" | sed 's/\\-/-/g')
    [ -n "$ex" ] || end failed "$m has no EXAMPLES"
    for f in $(grep -o '/usr/local/share/lfepoll/[^ ]*' <<<"$ex"); do
        [ -f "$dir/root/usr/share/lfepoll/${f#/usr/local/share/lfepoll/}" ] ||
            end failed "$m's EXAMPLES name $f, which make install does not put there"
    done
    rel=$(grep -oE '(^| )(lua|examples|etc)/[^ ]*' <<<"$ex")
    [ -z "$rel" ] || end failed "$m's EXAMPLES name $rel, a path of the clone, not of an install"
done
# The example config, every line enabled, is what the daemon accepts.
sed 's/^#\([a-z]\)/\1/' "$dir/root/etc/lfepolld.conf" >"$dir/all.conf"
out=$("$dir/root/usr/bin/lfepolld" --config "$dir/all.conf" --version 2>&1) ||
    end failed "the example config, every line enabled: $out"
# An existing config is neither overwritten by install nor removed by uninstall.
echo "listen = 127.0.0.1:1" >"$dir/root/etc/lfepolld.conf"
mk install >/dev/null 2>&1 || end failed "second make install failed"
grep -q '127.0.0.1:1' "$dir/root/etc/lfepolld.conf" || end failed "install overwrote an existing config"
mk uninstall >"$dir/out" 2>&1 || end failed "make uninstall failed: $(cat "$dir/out")"
left=$(cd "$dir/root" && find . -type f | sed 's|^\./||')
[ "$left" = "etc/lfepolld.conf" ] || end failed "after uninstall, want only the edited config left; got: $left"
end passed ""
