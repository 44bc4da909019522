#!/usr/bin/env bash
# Boot benchmark on real KVM (the testbed where /dev/kvm is kvm_pvm):
# mcpvm beside QEMU microvm and Firecracker (../shared/peers/firecracker,
# a peer for benchmarks only, when it is there), same kernel, initrd,
# memory and vCPUs, alternating runs.
#   benches/boot.sh [RUNS] [BENCH OPTION...]   prints a Markdown table (docs/benchmarks.md)
#   e.g. benches/boot.sh 10 --no-tsc-deadline
# MCPVM_FIRECRACKER=PATH names another Firecracker binary.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10}
shift || true
"$top/scripts/build" >&2
t=$top/target/mcpvm
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$top/benches/qemu-bundle.sh" "$work/qemu"
peer=()
. "$top/benches/lib/firecracker.sh"
firecracker_peer boot firecracker "mcpvm and QEMU"
"$top/testbed/run" --timeout 1800 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs.cpio" --file "$work/qemu:qemu" "${peer[@]}" \
  -- mcpvm bench boot --runs "$runs" --kernel vmlinux --initrd initramfs.cpio --qemu qemu/qemu \
     --firecracker firecracker "$@"
