#!/usr/bin/env bash
# First-response benchmark on real KVM (the testbed where /dev/kvm is
# kvm_pvm): the fixture MCP server inside a microVM (`mcpvm run`) beside
# the same VM under Firecracker (../shared/peers/firecracker, a peer for
# benchmarks only, behind the same host side: `mcpvm bench
# peer-run`) and the same binary as a bare process, alternating
# runs.
#   benches/first-response.sh [RUNS] [BENCH OPTION...]   prints a Markdown table
# MCPVM_FIRECRACKER=PATH names another Firecracker binary.
# OLD_BUILD=DIR runs DIR/bin/mcpvm (an older checkout's target/mcpvm, or
# any dir with its [profile.vm] binary in bin/) beside ours in every run
# of the same session (`--other-mcpvm`): before and after a change.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20}
shift || true
"$top/scripts/build" >&2
t=$top/target/mcpvm
peer=()
. "$top/benches/lib/firecracker.sh"
firecracker_peer first-response firecracker "mcpvm and the bare process"
other=()
if [ -n "${OLD_BUILD:-}" ]; then
  [ -x "$OLD_BUILD/bin/mcpvm" ] || { echo "first-response: $OLD_BUILD/bin/mcpvm is missing: give an older checkout's target/mcpvm" >&2; exit 1; }
  # An older mcpvm looks for its kernel and initramfs next to itself.
  peer+=(--file "$OLD_BUILD/bin/mcpvm:old/bin/mcpvm" --file "$t/kernel/vmlinux:old/kernel/vmlinux"
         --file "$t/initramfs-test.cpio:old/initramfs-test.cpio")
  other=(--other-mcpvm old/bin/mcpvm)
fi
"$top/testbed/run" --timeout 1800 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/bin/mcp-fixture:bin/mcp-fixture" \
  --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio" \
  "${peer[@]}" \
  -- mcpvm bench first-response --runs "$runs" --firecracker firecracker "${other[@]}" "$@" \
     --host bin/mcp-fixture -- /bin/mcp-fixture
