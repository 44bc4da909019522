#!/usr/bin/env bash
# The ecosystem audit: the popular-servers corpus (guest-image/corpus/
# popular.toml, docs/ecosystem.md) in microVMs on real KVM (the testbed
# where /dev/kvm is kvm_pvm), one command from install to verdicts.
#   benches/ecosystem.sh [SERVERS]    comma-separated; default: every one
# 1. builds the corpus's layers into their own store (cached by key; a
#    server that does not install is recorded there with why);
# 2. audits every server of the corpus under `deny-net` (its egress rules
#    dropped: every lookup and connection is refused and logged, so no
#    traffic leaves this machine), with the robustness probes and the
#    security column;
# 3. copies compat.json, report.md, report.html and results.jsonl into
#    MCPVM_BENCH_OUT (default: a temporary directory, named at the end),
#    prints the audit's throughput in servers per hour and renders
#    docs/ecosystem.md's table there as table.md (benches/lib/
#    ecosystem-table.py, with the build's sizes and times, build.json),
#    the calls that reached their tools as reach.md and what the
#    layers' install scripts did as install.md.
# MCPVM_CORPUS_IMAGES=DIR names the store (default ~/.cache/mcpvm/corpus-images).
# MCPVM_ECOSYSTEM_DEADLINE=SECONDS stops the audit after that long (what
#   it recorded comes back, its reports rendered over it);
# MCPVM_ECOSYSTEM_RESUME=DIR resumes the audit an earlier run left in DIR
#   (its audit.json and results.jsonl): the cells recorded are not run
#   again.
# MCPVM_ECOSYSTEM_PROBES="FLAGS" replaces the audit's hostile steps
#   (default "--robustness --security"); "" is the calls alone: the
#   coverage pass (how many calls reach their tools, docs/benchmarks.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
servers=${1:-}
"$top/scripts/build" >&2
t=$top/target/mcpvm
catalogue=$top/guest-image/corpus/popular.toml
store=${MCPVM_CORPUS_IMAGES:-${MCPVM_CACHE:-$HOME/.cache/mcpvm}/corpus-images}
build=(--catalogue "$catalogue" --catalogue-only --images "$store")
[ -n "$servers" ] && build+=(--servers "$servers")
out=${MCPVM_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
echo "ecosystem: building the corpus's layers into $store" >&2
start=$(date +%s)
"$t/bin/mcpvm" --json image build "${build[@]}" > "$out/build.json" || echo "ecosystem: some layers did not build; their rows say why" >&2
echo "ecosystem: layers ready in $(( $(date +%s) - start )) s" >&2
# Every server of the corpus (or those named): the ones that did not
# install are rows of the audit too.
[ -n "$servers" ] || servers=$(sed -n 's/^\[servers\.\(.*\)\]$/\1/p' "$catalogue" | paste -sd, -)
scenario=$(mktemp)
trap 'rm -f "$scenario"' EXIT
files=(--file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux"
       --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh" --file "$catalogue:popular.toml")
# The store (2 GB for the whole corpus) is past what an initramfs can
# carry into the testbed host: it travels on a disk.
for f in "$store"/index.json "$store"/*.erofs; do files+=(--disk-file "$f:images/$(basename "$f")"); done
resume=${MCPVM_ECOSYSTEM_RESUME:-}
if [ -n "$resume" ]; then
  for f in audit.json results.jsonl; do
    [ -f "$resume/$f" ] || { echo "ecosystem: $resume/$f is missing: not an earlier run's output" >&2; exit 1; }
    files+=(--file "$resume/$f:resume/$f")
  done
fi
limit=${MCPVM_ECOSYSTEM_DEADLINE:-14000}
probes=${MCPVM_ECOSYSTEM_PROBES---robustness --security}
case " $probes " in *[!a-z\ -]*) echo "ecosystem: MCPVM_ECOSYSTEM_PROBES takes audit flags only, got '$probes'" >&2; exit 1 ;; esac
cat > "$scenario" <<SCEN
# The nested testbed host has one CPU: guests get one vCPU there.
extra=
if [ "\$MCPVM_TESTBED" = nested ]; then printf '[defaults]\\nvcpus = 1\\n' > tb.toml; extra="--profiles-file tb.toml"; fi
# As a case (testbed/case.sh): the audit's progress lines (servers done,
# the current one, the ETA) reach the serial log, and testbed/run's
# output, as they come.
. ./case.sh
mkdir -p a
[ -d resume ] && cp resume/audit.json resume/results.jsonl a/
start=\$(date +%s)
CASE_LIMIT=$limit CASE_TEE=1 case_ audit \
  mcpvm --json audit --catalogue popular.toml --catalogue-only --images images --servers $servers \
  --profiles deny-net $probes \$extra --jobs 1 --init-timeout 300 --step-timeout 120 \
  --run-timeout 900 --out a
end=\$(date +%s)
# What the audit recorded, also when it was cut short: its reports
# rendered over the cells it finished (audit merge), and the journal a
# later run resumes from (MCPVM_ECOSYSTEM_RESUME).
mcpvm audit merge --out b a
cp b/compat.json b/report.md b/report.html b/results.jsonl b/audit.json "\$MCPVM_OUT/" 2>/dev/null
cp b/findings.sarif "\$MCPVM_OUT/" 2>/dev/null
mv "\$MCPVM_OUT/audit.out" summary.json
cells=\$(grep -c '"server"' a/results.jsonl)
echo "ecosystem: \$cells cells recorded, the audit ran \$((end - start)) s (exit \$(cat "\$MCPVM_OUT/audit.rc"))"
cat summary.json
SCEN
# The testbed host unpacks the layers into its memory (2 GB for the whole
# corpus): it gets the memory for them beside its guests.
export MCPVM_TESTBED_MEM=${MCPVM_TESTBED_MEM:-12288}
"$top/testbed/run" --timeout 14400 --out "$out" "${files[@]}" -- sh scenario.sh
corpus_csv=$top/../shared/corpus/popular-servers.csv
python3 "$top/benches/lib/ecosystem-table.py" --compat "$out/compat.json" --results "$out/results.jsonl" \
  --audit "$out/audit.json" --index "$store/index.json" --build "$out/build.json" $([ -f "$corpus_csv" ] && echo --csv "$corpus_csv") > "$out/table.md"
# How many calls reached their tools (docs/benchmarks.md).
python3 "$top/benches/lib/reach-table.py" --results "$out/results.jsonl" --catalogue "$catalogue" > "$out/reach.md"
# What the layers' install scripts did (docs/security-audit.md).
python3 "$top/benches/lib/install-table.py" --index "$store/index.json" > "$out/install.md"
echo "ecosystem: verdicts in $out/compat.json, report in $out/report.html, tables in $out/table.md, $out/reach.md and $out/install.md" >&2
