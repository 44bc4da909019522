#!/usr/bin/env bash
# The figures that matter for deployment, in one command: boot beside
# Firecracker and QEMU microvm (and each VMM alone on the null kernel),
# first response and warm start of the fixture beside the bare process,
# the stdio relay beside bare cat, and density of restored server-memory
# VMs. On a host with VMX/SVM and a real /dev/kvm every part runs directly
# (testbed/run's direct mode): these are then the real numbers. Here, where
# /dev/kvm is kvm_pvm, each part runs in the nested testbed, which
# inflates every guest-side time (docs/benchmarks.md says by how much).
#   benches/deployment.sh [RUNS]     prints every table, Markdown
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10}
b=$top/benches
mode=direct
[ -e /sys/module/kvm_pvm ] || [ ! -e /dev/kvm ] && mode="nested testbed (figures inflated)"
echo "# mcpvm deployment benchmarks ($(date -u +%F), $(nproc) CPUs, KVM: $mode)"
echo; echo "## Boot ($runs alternating runs each)"; echo
"$b/boot.sh" "$runs"
echo; echo "## First response and warm start: fixture ($((runs * 2)) runs each)"; echo
top=$top runs=$runs bash -c '
  t=$top/target/mcpvm
  "$top/testbed/run" --timeout 3600 \
    --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcp-fixture:bin/mcp-fixture" \
    --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio" \
    -- mcpvm bench first-response --runs $((runs * 2)) --warm --host bin/mcp-fixture -- /bin/mcp-fixture'
echo; echo "## Relay: stdio through the microVM"; echo
"$b/relay.sh" 1000 64
echo; echo "## Density: restored server-memory VMs in open sessions"; echo
"$b/density.sh"
