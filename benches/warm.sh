#!/usr/bin/env bash
# Warm starts on real KVM (the testbed where /dev/kvm is kvm_pvm), in one
# testbed run: for the fixture and for server-memory, spawn → first
# response and spawn → tools/list of the VM restored from a snapshot
# taken after `initialize`, beside the cold-booted VM and the same server
# as a bare process on the testbed host (alternating runs); then ten
# server-memory VMs restored from one snapshot at once, each with an open
# MCP session, and the host memory they take together.
#   benches/warm.sh [RUNS]   prints Markdown tables
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20}
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images
index=$store/index.json
scenario=$(mktemp)
out=$(mktemp -d)
listing=$(mktemp)
trap 'rm -rf "$scenario" "$out" "$listing"' EXIT
"$t/bin/mcpvm" --json image list --images "$store" > "$listing"
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$index")
layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers']['memory']['layer'])" "$index")
{
  echo "set -eu"
  echo "echo '## fixture'"
  echo "mcpvm bench first-response --runs \$RUNS --warm --host bin/mcp-fixture -- /bin/mcp-fixture"
  echo "mkdir -p /srv/rt && mount -o loop,ro images/$runtime /srv/rt"
  python3 "$top/benches/lib/bare-server.py" "$listing" memory \
    '--runs $RUNS --warm --images images --mem 768'
  cat <<'SCEN'
# Ten restored copies of server-memory, each initialized by its own client
# and holding its session open while the host's memory is read.
mcpvm run --images images --mem 768 --server memory --snapshot-to snap < /dev/null > /dev/null
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
for i in 1 2 3 4 5 6 7 8 9 10; do
  mkfifo in$i
  mcpvm run --from-snapshot snap < in$i > out$i 2>/dev/null &
  echo $! >> pids
  # Holds the session open: the server's stdin ends when it is killed.
  sleep 100000 > in$i &
  echo $! >> holders
  printf '%s\n' "$init" > in$i
done
n=0
until [ "$(grep -l '"id":1' out* 2>/dev/null | wc -l)" -ge 10 ] || [ $n -ge 600 ]; do sleep 1; n=$((n + 1)); done
echo "answered: $(grep -l '"id":1' out* | wc -l)" >&2
sleep 5
for p in $(cat pids); do
  awk '/^Rss:/ {r=$2} /^Pss:/ {p=$2} END {print r, p}' /proc/$p/smaps_rollup
done > "$MCPVM_OUT/ten.txt"
kill $(cat holders) $(cat pids); wait
SCEN
} > "$scenario"
"$top/testbed/run" --timeout 5400 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/bin/mcp-fixture:bin/mcp-fixture" \
  --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio" \
  --file "$index:images/index.json" --file "$store/$runtime:images/$runtime" \
  --file "$store/$layer:images/$layer" --file "$scenario:scenario.sh" \
  -- sh -c "RUNS=$runs sh scenario.sh"
python3 - "$out" <<'PY'
import sys
ten = [tuple(map(int, l.split())) for l in open(f"{sys.argv[1]}/ten.txt") if l.strip()]
rss, pss = sum(r for r, _ in ten), sum(p for _, p in ten)
print(f"\n{len(ten)} server-memory VMs restored from one 768 MiB snapshot, each in an open MCP session: "
      f"RSS sum {rss/1024:.0f} MiB, PSS sum {pss/1024:.0f} MiB (10 x guest memory = 7680 MiB)")
PY
