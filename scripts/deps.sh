#!/bin/sh
# What the build and the tests need from the system, installed when missing (the Makefile's
# deps, deps-run, format-deps and fuzz-deps). As root it installs; as anyone else it prints the
# command that would and, for what the build cannot do without, fails.
#
#   scripts/deps.sh debs PKG...                    Debian packages: dpkg's record of each
#   scripts/deps.sh tool COMMAND PKG [WHAT]        a command on PATH, from Debian package PKG
#   scripts/deps.sh pip MODULE PKG USER WITHOUT    a Python module, from pip's PKG; USER needs
#                                                  it, WITHOUT says what happens without (only
#                                                  said, never a failure: the tests skip)
set -u

root() { [ "$(id -u)" = 0 ]; }

# Installs the Debian packages "$@" quietly; the caller has printed what and why.
apt_install() {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

debs() {
    missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing="$missing $p"
    done
    [ -n "$missing" ] || return 0
    if root; then
        echo "installing Debian packages:$missing"
        # shellcheck disable=SC2086 # one word per package
        apt_install $missing || exit 1
    else
        echo "missing Debian packages; install them with:"
        echo "  sudo apt-get install -y$missing"
        exit 1
    fi
}

tool() {
    command -v "$1" >/dev/null 2>&1 && return 0
    if root; then
        echo "installing Debian packages: $2"
        apt_install "$2" || exit 1
    else
        echo "missing ${3:-$1}; install it with:"
        echo "  sudo apt-get install -y $2"
        exit 1
    fi
}

pip() {
    python3 -c "import $1" 2>/dev/null && return 0
    if root; then
        echo "installing Python package: $2 ($3)"
        python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip || exit 1
        python3 -m pip install -q "$2" 2>/dev/null ||
            python3 -m pip install -q --break-system-packages "$2" || exit 1
    else
        echo "missing Python package $1 ($4);"
        echo "install it with:"
        echo "  sudo python3 -m pip install $2"
    fi
}

case ${1:-} in
debs | tool | pip)
    what=$1
    shift
    "$what" "$@"
    ;;
*)
    echo "usage: $0 debs PKG... | tool COMMAND PKG [WHAT] | pip MODULE PKG USER WITHOUT" >&2
    exit 2
    ;;
esac
