#!/usr/bin/env bash
# One testbed session that probes a catalogued server RUNS times with two
# sets of options, alternating (A, B, A, B, …) after one warm-up run that
# is not counted, so both see the same machine. Used by the benches that
# measure what an option costs on the first response.
#   benches/lib/probe-pair.sh OUT RUNS SERVER 'A OPTIONS' 'B OPTIONS'
# Leaves OUT/a-N.json, OUT/b-N.json (probe --json) and their .err.
set -euo pipefail
out=$1 runs=$2 server=$3 a=$4 b=$5
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images
scenario=$(mktemp)
trap 'rm -f "$scenario"' EXIT
index=$store/index.json
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$index")
layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers'][sys.argv[2]]['layer'])" "$index" "$server")
cat > "$scenario" <<SCEN
set -u
probe() { mcpvm probe --server $server --only-given --images images --mem 512 --vcpus 1 --json "\$@"; }
probe > /dev/null 2>&1 || true
for r in \$(seq $runs); do
  probe $a > "\$MCPVM_OUT/a-\$r.json" 2> "\$MCPVM_OUT/a-\$r.err"
  probe $b > "\$MCPVM_OUT/b-\$r.json" 2> "\$MCPVM_OUT/b-\$r.err"
done
SCEN
"$top/testbed/run" --timeout 3600 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh" \
  --file "$index:images/index.json" --file "$store/$runtime:images/$runtime" \
  --file "$store/$layer:images/$layer" -- sh scenario.sh
