#!/usr/bin/env bash
# Density on real KVM (the testbed where /dev/kvm is kvm_pvm): N
# server-memory VMs restored from one snapshot, each initialized by its
# own client and kept in an open session; at each count, memory (RSS, PSS,
# the guest's pages, the VMM's own) and threads per VM, the restore time
# of the Nth, and whether every VM still answers tools/list.
#   benches/density.sh [COUNTS] [MEM_MIB]   prints a Markdown table
# COUNTS defaults to 10,50,100,200; the testbed host gets
# MCPVM_TESTBED_MEM (default here 16384) MiB so that memory, not the
# harness, is what stops it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
counts=${1:-10,50,100,200}
mem=${2:-256}
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images
index=$store/index.json
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$index")
layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers']['memory']['layer'])" "$index")
MCPVM_TESTBED_MEM=${MCPVM_TESTBED_MEM:-16384} "$top/testbed/run" --timeout 5400 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" \
  --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio" \
  --file "$index:images/index.json" --file "$store/$runtime:images/$runtime" \
  --file "$store/$layer:images/$layer" \
  -- sh -c "ulimit -n 65536; mcpvm bench density --counts $counts --mem $mem --images images --server memory --answer-timeout 120"
