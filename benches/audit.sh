#!/usr/bin/env bash
# Audit throughput on real KVM (the testbed where /dev/kvm is kvm_pvm):
# `mcpvm audit` over catalogued servers × profiles, timed, with the
# testbed host's memory in use sampled every second (peak reported).
#   benches/audit.sh [SERVERS] [PROFILES] [JOBS]
#   e.g. benches/audit.sh memory,time,git baseline,deny-exec,no-tmp 1
# Defaults: every offline server, the ten built-in profiles, 1 job (the
# testbed host has one CPU). Prints the audit's summary and the figures.
# A user's own catalogue: MCPVM_BENCH_CATALOGUE=FILE and
# MCPVM_BENCH_IMAGES=DIR (the store `mcpvm image build --catalogue FILE
# --images DIR` filled). The reports land in MCPVM_BENCH_OUT (default: a
# temporary directory, named at the end).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
servers=${1:-}
profiles=${2:-}
jobs=${3:-1}
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=${MCPVM_BENCH_IMAGES:-$t/images}
scenario=$(mktemp)
trap 'rm -f "$scenario"' EXIT
files=(--file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux"
       --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh")
for f in "$store"/index.json "$store"/*.erofs; do files+=(--file "$f:images/$(basename "$f")"); done
opts="--images images --jobs $jobs --init-timeout 400 --step-timeout 200"
if [ -n "${MCPVM_BENCH_CATALOGUE:-}" ]; then
  files+=(--file "$MCPVM_BENCH_CATALOGUE:catalogue.toml")
  opts="$opts --catalogue catalogue.toml"
fi
[ -n "$servers" ] && opts="$opts --servers $servers"
[ -n "$profiles" ] && opts="$opts --profiles $profiles"
cat > "$scenario" <<SCEN
used() { awk '/MemTotal/ {t=\$2} /MemAvailable/ {a=\$2} END {print int((t-a)/1024)}' /proc/meminfo; }
idle=\$(used); echo \$idle > peak
( while :; do u=\$(used); [ "\$u" -gt "\$(cat peak)" ] && echo \$u > peak; sleep 1; done ) &
sampler=\$!
# The nested testbed host has one CPU: guests get one vCPU there.
extra=
if [ "\$MCPVM_TESTBED" = nested ]; then printf '[defaults]\\nvcpus = 1\\n' > tb.toml; extra="--profiles-file tb.toml"; fi
start=\$(date +%s)
mcpvm --json audit $opts \$extra --out a > summary.json
end=\$(date +%s)
kill \$sampler
cp a/report.md a/report.html a/results.jsonl "\$MCPVM_OUT/"
runs=\$(wc -l < a/results.jsonl)
echo "audit: \$runs runs in \$((end - start)) s"
awk -v r=\$runs -v s=\$((end - start)) 'BEGIN { printf "throughput: %.2f runs per minute\n", r * 60 / s }'
echo "host memory in use: idle \$idle MiB, peak \$(cat peak) MiB (+\$((\$(cat peak) - idle)) MiB)"
cat summary.json
SCEN
out=${MCPVM_BENCH_OUT:-$(mktemp -d)}
"$top/testbed/run" --timeout 10800 --out "$out" "${files[@]}" -- sh scenario.sh
echo "report: $out/report.md" >&2
