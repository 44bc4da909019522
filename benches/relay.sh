#!/usr/bin/env bash
# Relay benchmark on real KVM (the testbed where /dev/kvm is kvm_pvm):
# 1 KiB round trips and bulk throughput through cat in a microVM beside
# bare cat.   benches/relay.sh [ROUND_TRIPS] [BULK_MIB]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/build" >&2
t=$top/target/mcpvm
"$top/testbed/run" --timeout 1800 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs-test.cpio" \
  -- mcpvm bench relay --round-trips "${1:-1000}" --bulk-mib "${2:-64}"
