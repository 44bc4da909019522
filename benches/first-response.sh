#!/usr/bin/env bash
# First-response benchmark on real KVM (the testbed where /dev/kvm is
# kvm_pvm): the fixture MCP server inside a microVM (`mcpvm run`) beside
# the same binary as a bare process, alternating runs.
#   benches/first-response.sh [RUNS]   prints a Markdown table
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20}
"$top/scripts/build" >&2
t=$top/target/mcpvm
"$top/testbed/run" --timeout 1800 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcp-fixture:bin/mcp-fixture" \
  --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio" \
  -- mcpvm bench first-response --runs "$runs" --host bin/mcp-fixture -- /bin/mcp-fixture
