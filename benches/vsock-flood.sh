#!/usr/bin/env bash
# A hostile guest floods virtio-vsock, on real KVM (the testbed where
# /dev/kvm is kvm_pvm): 3000 streams to a host program that listens with a
# backlog of one and never accepts, 3000 to a port nobody listens on,
# 1500 to a host program that accepts them all, holding what connects.
# Prints what the guest saw, how the VM ended and the VMM's peak RSS.
#   benches/vsock-flood.sh
# The same case runs in the suite (scenarios/boot.sh, vsock_flood); this
# runs it alone and prints the numbers docs/security.md quotes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/build" >&2
t=$top/target/mcpvm
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$top/testbed/run" --timeout 900 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/bin/vsock-load:bin/vsock-load" \
  --file "$t/kernel/vmlinux:vmlinux" --file "$t/initramfs-test.cpio:initramfs.cpio" \
  --file "$top/mcpvm/tests/scenarios/vsock-flood.sh:vsock-flood.sh" \
  -- sh -c 'sh vsock-flood.sh; rc=$?; echo "exit: $rc; VMM peak RSS: $(cat "$MCPVM_OUT/vsock_flood_peak_kb.txt") kB"'
