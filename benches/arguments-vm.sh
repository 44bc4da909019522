#!/usr/bin/env bash
# Share of tool calls that fail on the probe's generated arguments, on the
# offline catalogue in microVMs (the testbed where /dev/kvm is kvm_pvm):
# `mcpvm audit --profiles baseline` with every catalogued `audit_calls`
# removed, so that every tool of every server is called with generated
# arguments. Optionally beside an older build, in the same testbed session
# and on the same kernel and images:
#   benches/arguments-vm.sh [OLD_BUILD]
# OLD_BUILD is an older checkout's target/mcpvm (bin/mcpvm and
# initramfs-test.cpio, from its scripts/build or the same cargo and
# initramfs commands). Prints, per build, each server's failed calls.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
old=${1:-}
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images
work=$(mktemp -d "${TMPDIR:-/tmp}/mcpvm-arguments-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
sed '/^audit_calls/d' "$top/guest-image/catalogue.toml" > "$work/generated.toml"
files=(--file "$t/bin/mcpvm:after/bin/mcpvm" --file "$t/bin/mcpvm-tools:after/bin/mcpvm-tools" --file "$t/kernel/vmlinux:after/kernel/vmlinux"
       --file "$t/initramfs-test.cpio:after/initramfs-test.cpio"
       --file "$work/generated.toml:generated.toml" --file "$work/scenario.sh:scenario.sh")
builds=after
if [ -n "$old" ]; then
  for f in bin/mcpvm initramfs-test.cpio; do
    [ -e "$old/$f" ] || { echo "arguments-vm: $old/$f is missing: give an older checkout's target/mcpvm" >&2; exit 1; }
  done
  # Builds before the split into two binaries have no mcpvm-tools.
  [ -e "$old/bin/mcpvm-tools" ] && files+=(--file "$old/bin/mcpvm-tools:before/bin/mcpvm-tools")
  files+=(--file "$old/bin/mcpvm:before/bin/mcpvm" --file "$t/kernel/vmlinux:before/kernel/vmlinux"
          --file "$old/initramfs-test.cpio:before/initramfs-test.cpio")
  builds="before after"
fi
for f in "$store"/index.json "$store"/*.erofs; do files+=(--file "$f:images/$(basename "$f")"); done
cat > "$work/scenario.sh" <<SCEN
set -u
. ./case.sh
# The nested testbed host has one CPU: guests get one vCPU there.
printf '[defaults]\nvcpus = 1\n' > tb.toml
for b in $builds; do
  CASE_LIMIT=10800 CASE_TEE=1 case_ \$b \$b/bin/mcpvm audit --catalogue generated.toml --images images \
    --profiles baseline --profiles-file tb.toml --jobs 1 --init-timeout 400 --step-timeout 200 --out \$b-audit
  cp \$b-audit/results.jsonl "\$MCPVM_OUT/\$b.jsonl"
  cp \$b-audit/report.md "\$MCPVM_OUT/\$b-report.md" 2>/dev/null
done
SCEN
out=$work/out
"$top/testbed/run" --timeout 14400 --out "$out" "${files[@]}" -- sh scenario.sh
python3 - "$out" $builds <<'PY'
import json, os, sys
out, builds = sys.argv[1], sys.argv[2:]
for b in builds:
    recs = sorted((json.loads(l) for l in open(os.path.join(out, b + ".jsonl"))), key=lambda r: r["server"])
    total = failed = 0
    print(f"\n{b}:\n\n| server | baseline | tool calls failed | which |\n|---|---|---:|---|")
    for r in recs:
        ok, bad = r["tools_ok"], r["tools_failed"]
        total += len(ok) + len(bad)
        failed += len(bad)
        why = []
        for e in r["evidence"]["errors"]:
            step, kind, said = (e.split(": ", 2) + ["", ""])[:3]
            if step.startswith("tools/call:"):
                why.append(f"{step.removeprefix('tools/call:')} ({kind}): {said[:60]}")
        why = "; ".join(why).replace("|", "\\|")
        print(f"| {r['server']} | {r['outcome']} | {len(bad)} of {len(ok) + len(bad)} | {why} |")
    print(f"\n{b}: {failed} of {total} tool calls failed ({100 * failed / max(total, 1):.0f}%)")
    # How many calls reached their tool (builds that measure it).
    reach = [r["reach"] for r in recs if r.get("reach")]
    if reach:
        called = sum(x["called"] for x in reach)
        reached = sum(x["reached"] for x in reach)
        first = sum(x.get("first_reached", 0) for x in reach)
        print(f"{b}: {reached} of {called} calls reached their tool ({100 * reached / max(called, 1):.0f}%), "
              f"{first} on the first try ({100 * first / max(called, 1):.0f}%)")
        for r in recs:
            for x in (r.get("reach") or {}).get("not_reached", []):
                print(f"  not reached: {r['server']}: {x[:160]}")
    # What the servers declare, as the report judged it (definitions and
    # names across servers): each finding is a false positive to explain
    # or a true one (docs/security-audit.md).
    report = os.path.join(out, b + "-report.md")
    if os.path.exists(report):
        text = open(report).read()
        start = text.find("## What the servers declare")
        if start < 0:
            print(f"{b}: nothing flagged in what the servers declare")
        else:
            end = text.find("\n## ", start + 1)
            print(text[start:end if end > 0 else None])
PY
