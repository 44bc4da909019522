#!/usr/bin/env bash
# What `mcpvm probe --security` costs and finds on catalogued servers, on
# real KVM (the testbed): each server probed once with every tool called
# and attacked, one after another in one testbed session.
#   benches/security.sh [SERVER…]   (default: memory time everything)
# MCPVM_BENCH_OUT=DIR keeps each server's probe result there.
# Prints a Markdown table: tools attacked, attacks sent, wall time of the
# whole probe and of its attacks per tool, and the findings by class.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(memory time everything)
. "$top/benches/lib/names.sh"
check_server_names security "${servers[@]}"
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images
index=$store/index.json
scenario=$(mktemp)
if [ -n "${MCPVM_BENCH_OUT:-}" ]; then
  out=$MCPVM_BENCH_OUT; mkdir -p "$out"
  trap 'rm -f "$scenario" "$scenario.servers"' EXIT
else
  out=$(mktemp -d)
  trap 'rm -rf "$scenario" "$scenario.servers" "$out"' EXIT
fi
files=(--file "$index:images/index.json")
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$index")
files+=(--file "$store/$runtime:images/$runtime")
for s in "${servers[@]}"; do
  layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers'][sys.argv[2]]['layer'])" "$index" "$s")
  files+=(--file "$store/$layer:images/$layer")
done
cat > "$scenario" <<SCEN
set -u
while read -r s; do
  cut -d' ' -f1 /proc/uptime > "\$MCPVM_OUT/\$s.uptime"
  mcpvm probe --json --security --server \$s --images images --mem 768 --vcpus 1 \
    --init-timeout 400 --step-timeout 60 > "\$MCPVM_OUT/\$s.json" 2> "\$MCPVM_OUT/\$s.err"
  cut -d' ' -f1 /proc/uptime >> "\$MCPVM_OUT/\$s.uptime"
done < servers
SCEN
printf '%s\n' "${servers[@]}" > "$scenario.servers"
"$top/testbed/run" --timeout 3600 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh" \
  --file "$scenario.servers:servers" "${files[@]}" -- sh scenario.sh
python3 - "$out" "${servers[@]}" <<'PY'
import collections, json, os, sys
out, servers = sys.argv[1], sys.argv[2:]
print("| server | tools attacked | attacks | probe wall time (s) | attacks per tool (s, median) | findings |")
print("|---|---:|---:|---:|---:|---|")
for s in servers:
    try:
        r = json.load(open(os.path.join(out, f"{s}.json")))
    except (OSError, ValueError) as e:
        sys.exit(f"security: {s} left no result ({e}); see {out}/{s}.err")
    start, end = map(float, open(os.path.join(out, f"{s}.uptime")).read().split())
    wall = end - start
    attacks = [st for st in r["steps"] if st["step"].startswith("attack:")]
    per_tool = collections.defaultdict(float)
    for st in attacks:
        per_tool[st["step"]] += st["took_ms"] / 1000
    times = sorted(per_tool.values())
    median = times[len(times) // 2] if times else 0
    classes = collections.Counter(f["class"] for f in r.get("findings", []))
    found = ", ".join(f"{c} ×{n}" for c, n in sorted(classes.items())) or "none"
    print(f"| {s} | {len(per_tool)} | {len(attacks)} | {wall:.0f} | {median:.1f} | {found} |")
PY
