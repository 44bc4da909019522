#!/usr/bin/env bash
# The cost of the VMM's host seccomp filters on the first-response path,
# on real KVM (the testbed where /dev/kvm is kvm_pvm): the fixture server
# in a microVM with --seccomp on and with --seccomp off, in alternating
# rounds in one testbed session, beside the bare process.
#   benches/seccomp.sh [ROUNDS] [RUNS_PER_ROUND]    (default 4 × 5)
# Prints a Markdown table of medians over all runs of each mode.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-4}
runs=${2:-5}
"$top/scripts/build" >&2
t=$top/target/mcpvm
scenario=$(mktemp)
out=$(mktemp -d)
trap 'rm -rf "$scenario" "$out"' EXIT
cat > "$scenario" <<SCEN
for r in \$(seq $rounds); do
  for m in on off; do
    mcpvm bench first-response --json --seccomp \$m --runs $runs --host bin/mcp-fixture -- /bin/mcp-fixture \
      > "\$MCPVM_OUT/\$m-\$r.json" || exit 1
  done
done
SCEN
"$top/testbed/run" --timeout 3600 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/bin/mcp-fixture:bin/mcp-fixture" \
  --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio" \
  --file "$scenario:scenario.sh" -- sh scenario.sh
python3 - "$out" "$rounds" "$runs" <<'PY'
import json, os, statistics, sys
out, rounds, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def medians(mode):
    reps = [json.load(open(os.path.join(out, f"{mode}-{r}.json"))) for r in range(1, rounds + 1)]
    # Each report gives its own median; the table gives the median of those.
    pick = lambda key: statistics.median(r[key]["median"] for r in reps)
    return pick("vm_initialize"), pick("vm_tools_list"), pick("bare_initialize")
on, off = medians("on"), medians("off")
print(f"| ms, median of {rounds} rounds × {runs} runs | seccomp on | seccomp off | on / off |")
print("|---|---:|---:|---:|")
for i, name in enumerate(["VM: spawn → handshake response", "VM: spawn → tools/list response", "bare process: spawn → handshake (same rounds)"]):
    print(f"| {name} | {on[i]:.1f} | {off[i]:.1f} | {on[i] / off[i]:.3f} |")
PY
