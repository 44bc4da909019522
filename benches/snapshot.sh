#!/usr/bin/env bash
# VMM snapshots on real KVM (the testbed where /dev/kvm is kvm_pvm), before
# the MCP path has them: how soon a restored VM runs guest code beside how
# soon a cold boot reaches userspace, in alternating rounds of one testbed
# session, and the host memory of 10 VMs restored from one snapshot at once.
#   benches/snapshot.sh [ROUNDS]    (default 5)
# Prints a Markdown table.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5}
"$top/scripts/build" >&2
t=$top/target/mcpvm
scenario=$(mktemp)
out=$(mktemp -d)
trap 'rm -rf "$scenario" "$out"' EXIT
cat > "$scenario" <<SCEN
K="--kernel vmlinux --initrd initramfs.cpio"
# The snapshot: a booted guest idling in a shell loop.
mcpvm boot --json --timeout 120 \$K --cmdline 'quiet -- /bin/sh -c "echo ready; while :; do sleep 1; done"' \\
  --serial file --serial-file source.log --snapshot-to snap > /dev/null &
pid=\$!
i=0
while ! grep -q ready source.log 2>/dev/null && [ \$i -lt 900 ]; do sleep 0.1; i=\$((i+1)); done
kill -USR1 \$pid; wait \$pid || exit 1
for r in \$(seq $rounds); do
  mcpvm boot --json --timeout 60 \$K --serial off --cmdline 'quiet -- /bin/true' > "\$MCPVM_OUT/cold-\$r.json"
  mcpvm boot --json --timeout 1 --restore snap --serial off > "\$MCPVM_OUT/restore-\$r.json"
done
# Ten at once, measured while they idle.
for n in \$(seq 10); do
  mcpvm boot --timeout 60 --restore snap --serial off > /dev/null 2>&1 &
  echo \$! >> pids
done
sleep 15
for p in \$(cat pids); do
  awk '/^Rss:/ {r=\$2} /^Pss:/ {p=\$2} END {print r, p}' /proc/\$p/smaps_rollup
done > "\$MCPVM_OUT/ten.txt"
kill \$(cat pids); wait
SCEN
"$top/testbed/run" --timeout 1800 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" \
  --file "$t/kernel/vmlinux:vmlinux" --file "$t/initramfs-test.cpio:initramfs.cpio" \
  --file "$scenario:scenario.sh" -- sh scenario.sh
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def t(kind, key):
    return [json.load(open(f"{out}/{kind}-{r}.json"))["timings_ms"][key] for r in range(1, rounds + 1)]
cold_user, cold_entry = t("cold", "boot_timer"), t("cold", "kernel_entry")
restored = t("restore", "kernel_entry")
row = lambda name, v: f"| {name} | {min(v):.0f} | {statistics.median(v):.0f} | {max(v):.0f} |"
print(f"| from VMM start to (ms, {rounds} alternating rounds) | min | median | max |")
print("|---|---|---|---|")
print(row("cold boot: first guest instruction", cold_entry))
print(row("cold boot: userspace up (boot timer)", cold_user))
print(row("restore: guest running again, userspace included", restored))
print(f"\nrestore vs cold boot to userspace, medians: {statistics.median(cold_user) / statistics.median(restored):.1f}x sooner")
ten = [tuple(map(int, l.split())) for l in open(f"{out}/ten.txt") if l.strip()]
rss, pss = sum(r for r, _ in ten), sum(p for _, p in ten)
print(f"\n10 VMs restored from one 256 MiB snapshot, idle: RSS sum {rss/1024:.0f} MiB, PSS sum {pss/1024:.0f} MiB (10 x guest memory = 2560 MiB)")
PY
