#!/usr/bin/env bash
# What observing a server costs on its first response, on real KVM (the
# testbed where /dev/kvm is kvm_pvm): a catalogued server probed with and
# without `--profile baseline` (every system call counted), alternating
# in one testbed session after one warm-up run that is not counted.
#   benches/observe.sh [RUNS] [SERVER]   (default 5 memory)
# Prints a Markdown table: medians of the probe's spawn → handshake
# answer, and how the calls were counted (the agent's syscalls event).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
server=${2:-memory}
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images
scenario=$(mktemp)
out=$(mktemp -d)
trap 'rm -rf "$scenario" "$out"' EXIT
index=$store/index.json
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$index")
layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers'][sys.argv[2]]['layer'])" "$index" "$server")
cat > "$scenario" <<SCEN
set -u
probe() { mcpvm probe --server $server --only-given --images images --mem 512 --vcpus 1 --json "\$@"; }
probe > /dev/null 2>&1 || true
for r in \$(seq $runs); do
  probe > "\$MCPVM_OUT/plain-\$r.json" 2> "\$MCPVM_OUT/plain-\$r.err"
  probe --profile baseline > "\$MCPVM_OUT/observed-\$r.json" 2> "\$MCPVM_OUT/observed-\$r.err"
done
SCEN
"$top/testbed/run" --timeout 3600 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/kernel/vmlinux:kernel/vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh" \
  --file "$index:images/index.json" --file "$store/$runtime:images/$runtime" \
  --file "$store/$layer:images/$layer" -- sh scenario.sh
python3 - "$out" "$runs" "$server" <<'PY'
import json, os, statistics, sys
out, runs, server = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(mode):
    rs = []
    for r in range(1, runs + 1):
        p = os.path.join(out, f"{mode}-{r}.json")
        try:
            rs.append(json.load(open(p)))
        except (OSError, ValueError) as e:
            sys.exit(f"observe: {mode} run {r} left no result ({e}); see {p[:-5]}.err")
    return rs
def first(rs, mode):
    ts = [r["timings"]["handshake_ms"] for r in rs]
    if any(t is None for t in ts):
        sys.exit(f"observe: a {mode} run never answered the handshake")
    return ts
def counted(rs):
    by = set()
    for r in rs:
        for e in r.get("guest_events") or []:
            if e.get("event") == "syscalls":
                by.add(e.get("counted_by", "notification"))
    return ", ".join(sorted(by)) or "no syscalls event"
plain, observed = load("plain"), load("observed")
p, o = first(plain, "plain"), first(observed, "observed")
mp, mo = statistics.median(p), statistics.median(o)
print(f"| {server}, spawn → handshake answer, {runs} runs each | min | median | max |")
print("|---|---:|---:|---:|")
print(f"| no profile | {min(p):.0f} | {mp:.0f} | {max(p):.0f} |")
print(f"| `--profile baseline` (counted by: {counted(observed)}) | {min(o):.0f} | {mo:.0f} | {max(o):.0f} |")
print(f"\nobserved / plain (medians): **{mo / mp:.2f}×**")
PY
