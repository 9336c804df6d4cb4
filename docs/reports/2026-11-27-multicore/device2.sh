#!/usr/bin/env bash
# device2.sh: the second run on the 16-CPU machine: long connections REPS=5 (rp lf lf_os uring), then short
# connections REPS=3 for rp and lf with the scaling curve at 1, 2, 4 server CPUs.
set -uo pipefail
top=$PWD
export LD_LIBRARY_PATH=$top/.dev/lib
PEERS=$top/.dev/peers
{
echo "kernel $(uname -r); CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); nproc $(nproc)"
./lfepolld --apply-sysctl 2>&1 | grep -E '^(set|cannot set) '
echo "20000 65535" > /proc/sys/net/ipv4/ip_local_port_range
lf="$top/lfepolld --listen 127.0.0.1:{port} --admin 127.0.0.1:{aport} --cpus {cpus} -q"
extra="lf_os|all|$lf --oneshot always
uring|all|$PEERS/uring_echo {port} 8 {cpus}"
mc=$(mktemp -d)
SCEN=long REPS=5 DUR=3 WARM=1 ONLY="rp lf lf_os uring" EXTRA=$extra PEERS=$PEERS \
    SRV_CPUS=0-7 CLI_CPUS=8-15 OUT=$mc/long timeout -k 5 150 tests/bench/multicore.sh
echo "long exit $?"
SCEN=short REPS=3 DUR=2 WARM=1 ONLY="rp lf rp_c1 lf_c1 rp_c2 lf_c2 rp_c4 lf_c4" PEERS=$PEERS \
    SRV_CPUS=0-7 CLI_CPUS=8-15 OUT=$mc/short timeout -k 5 150 tests/bench/multicore.sh
echo "short exit $?"
for d in long short; do echo "=== $d"; cat $mc/$d/report.md; echo "--- raw"; cat $mc/$d/raw.txt; cp $mc/$d/curve.dat $OUT/$d.curve.dat 2>/dev/null; done
} 2>&1 | tee $OUT/device2.log
