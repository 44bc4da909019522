#!/usr/bin/env bash
# The figures that matter for deployment, in one command: boot beside
# Firecracker and QEMU microvm (and each VMM alone on the null kernel),
# first response and warm start of the fixture beside Firecracker and the
# bare process,
# the stdio relay beside Firecracker and bare cat, the VMM's own memory beside
# Firecracker's, and density of restored server-memory VMs. On a host with VMX/SVM and a real /dev/kvm every part runs directly
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
echo; echo "## First response and warm start: fixture, beside Firecracker ($((runs * 2)) runs each)"; echo
"$b/first-response.sh" $((runs * 2)) --warm
echo; echo "## Relay: stdio through the microVM"; echo
"$b/relay.sh" 1000 64 3
echo; echo "## The VMM's own memory beside Firecracker (RSS less guest pages, KiB)"; echo
"$b/vmm-memory.sh" 5
echo; echo "## Density: restored server-memory VMs in open sessions"; echo
"$b/density.sh"
