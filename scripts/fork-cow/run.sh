#!/bin/bash
# The kernel side of docs/fidelity.md's "usemem --prealloc's fork" check, on a host with
# the cgroup v1 memory controller, as root:
#   scripts/fork-cow/run.sh shared|private SIZE_MB WORKERS LIMIT_MB SWAPFILE
# Builds usecow, puts it in a fresh memory cgroup limited to LIMIT_MB, swaps to SWAPFILE
# (made with mkswap), and prints the /proc/vmstat deltas and the elapsed time.
set -euo pipefail
MODE=$1 SIZE=$2 N=$3 LIM=$4 SW=$5
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)/usecow
gcc -O2 -o "$bin" "$here/usecow.c"
CG=/sys/fs/cgroup/memory/reclaimsim-fork-cow
swapon "$SW"
mkdir -p "$CG"
trap 'swapoff "$SW"; rmdir "$CG"' EXIT
echo $((LIM << 20)) > "$CG/memory.limit_in_bytes"
K="pswpin|pswpout|pgfault|pgmajfault|workingset_refault_anon"
grep -E "^($K) " /proc/vmstat > "$bin.v0"
/usr/bin/time -f "elapsed %e" bash -c "echo \$\$ > $CG/cgroup.procs; exec $bin $MODE $SIZE $N"
grep -E "^($K) " /proc/vmstat > "$bin.v1"
paste "$bin.v0" "$bin.v1" | awk '{printf "%s %d\n", $1, $4 - $2}'
