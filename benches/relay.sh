#!/usr/bin/env bash
# Relay benchmark on real KVM (the testbed where /dev/kvm is kvm_pvm):
# 1 KiB round trips and bulk throughput through cat in a microVM beside
# the same VM under Firecracker (../shared/peers/firecracker, a peer for
# benchmarks only, behind the same host side: `mcpvm bench
# peer-run`) and bare cat, in turn, ROUNDS times.
#   benches/relay.sh [ROUND_TRIPS] [BULK_MIB] [ROUNDS]   prints a Markdown table
# MCPVM_FIRECRACKER=PATH names another Firecracker binary.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/build" >&2
t=$top/target/mcpvm
peer=()
. "$top/benches/lib/firecracker.sh"
firecracker_peer relay firecracker "mcpvm and bare cat"
"$top/testbed/run" --timeout 3600 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs-test.cpio" "${peer[@]}" \
  -- mcpvm bench relay --round-trips "${1:-1000}" --bulk-mib "${2:-64}" --rounds "${3:-3}" --firecracker firecracker
