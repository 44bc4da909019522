#!/usr/bin/env bash
# Probe overhead and bare-process baselines (no KVM needed): for the
# fixture and the real npm/PyPI servers, a minimal raw client beside the
# probe's first-response path, and a full probe run, alternating.
#   benches/probe.sh [RUNS]   prints a Markdown table
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10}
"$top/scripts/build" >&2
t=$top/target/mcpvm
"$t/bin/mcpvm" bench probe --runs "$runs" --fixture "$t/bin/mcp-fixture" --host-servers "$t/host-servers"
