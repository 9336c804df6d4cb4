#!/usr/bin/env bash
# collect.sh: copies the C peers of build/peers (not go_echo, tokio_echo: device.sh does not run
# them) into .dev/peers, and into .dev/lib the shared libraries that ./lfepolld, ./lfbench and
# those peers need beyond glibc and the C++ runtime (libev, libjemalloc, liblua5.4, libuv, libz,
# liburing...), so that they run on the big machine with LD_LIBRARY_PATH=$PWD/.dev/lib; then prints
# the size of what the run on the big machine carries: lfepolld lfbench .dev (the limit is 64 MiB in all).
# Run from the repository root after `make lfepolld lfbench peers` (again after each rebuild).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .dev/lib .dev/peers
mkdir -p .dev/lib .dev/peers
for p in echoload epoll_reuseport epoll_st uring_echo uv_echo; do
    if [[ -x build/peers/$p ]]; then cp build/peers/$p .dev/peers/; else echo "collect: build/peers/$p not built (make peers)" >&2; fi
done
bins=(./lfepolld ./lfbench .dev/peers/*)
# glibc's parts, the dynamic loader and the GCC runtime are on every Ubuntu image (apt needs
# libstdc++ and libgcc_s); a copy of glibc from here could not run with the big machine's loader.
skip='^(linux-vdso|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|libmvec|ld-linux[^ ]*|libgcc_s|libstdc\+\+)\.so'
missing=0
for b in "${bins[@]}"; do
    while read -r name _ path _; do
        [[ $name =~ $skip ]] && continue
        [[ $path == /* ]] || { echo "collect: $b: $name not found here" >&2; missing=1; continue; }
        [[ -e .dev/lib/$name ]] || cp -L "$path" ".dev/lib/$name"
    done < <(ldd "$b" | grep '=>')
done
echo "binaries: ${bins[*]}"
echo "libraries in .dev/lib:"
ls -l .dev/lib | tail -n +2 | awk '{printf "  %-24s %9d B\n", $9, $5}'
# What is copied to the big machine: the ignored paths the run needs, with the tracked tree.
carry=(lfepolld lfbench .dev)
echo "carried (ignored paths): $(du -cb "${carry[@]}" | tail -1 | cut -f1) B = $(du -cb "${carry[@]}" | tail -1 | awk '{printf "%.1f MiB", $1 / 1048576}')"
echo "tracked and untracked-not-ignored tree: $(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | awk '{printf "%.1f MiB", $1 / 1048576}')"
echo "highest glibc symbol version needed (the big machine needs at least this glibc):" \
    "$(for b in "${bins[@]}" .dev/lib/*; do objdump -T "$b" 2>/dev/null; done | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
exit $missing
