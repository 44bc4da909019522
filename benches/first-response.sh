#!/usr/bin/env bash
# First-response benchmark on real KVM (the testbed where /dev/kvm is
# kvm_pvm): the fixture MCP server inside a microVM (`mcpvm run`) beside
# the same VM under Firecracker (../shared/peers/firecracker, a peer for
# benchmarks only, behind the same host side: `mcpvm bench
# peer-run`) and the same binary as a bare process, alternating
# runs.
#   benches/first-response.sh [RUNS] [BENCH OPTION...]   prints a Markdown table
# MCPVM_FIRECRACKER=PATH names another Firecracker binary.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20}
shift || true
"$top/scripts/build" >&2
t=$top/target/mcpvm
peer=()
. "$top/benches/lib/firecracker.sh"
firecracker_peer first-response firecracker "mcpvm and the bare process"
"$top/testbed/run" --timeout 1800 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/bin/mcp-fixture:bin/mcp-fixture" \
  --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio" \
  "${peer[@]}" \
  -- mcpvm bench first-response --runs "$runs" --firecracker firecracker "$@" \
     --host bin/mcp-fixture -- /bin/mcp-fixture
