#!/usr/bin/env bash
# Boot benchmark on real KVM (the testbed where /dev/kvm is kvm_pvm):
# mcpvm beside QEMU microvm, same kernel and initrd, alternating runs.
#   benches/boot.sh [RUNS]      prints a Markdown table (docs/benchmarks.md)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10}
"$top/scripts/build" >&2
t=$top/target/mcpvm
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$top/benches/qemu-bundle.sh" "$work/qemu"
"$top/testbed/run" --timeout 1800 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/kernel/vmlinux:vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs.cpio" --file "$work/qemu:qemu" \
  -- mcpvm bench boot --runs "$runs" --kernel vmlinux --initrd initramfs.cpio --qemu qemu/qemu
