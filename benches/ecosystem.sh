#!/usr/bin/env bash
# The ecosystem audit: the popular-servers corpus (guest-image/corpus/
# popular.toml, docs/ecosystem.md) in microVMs on real KVM (the testbed
# where /dev/kvm is kvm_pvm), one command from install to verdicts.
#   benches/ecosystem.sh [SERVERS]    comma-separated; default: every one
# MCPVM_ECOSYSTEM_CATALOGUE=FILE audits another catalogue (default the
#   corpus, guest-image/corpus/popular.toml).
# 1. builds the corpus's layers into their own store (cached by key; a
#    server that does not install is recorded there with why);
# 2. audits every server of the corpus under `deny-net` (its egress rules
#    dropped: every lookup and connection is refused and logged, so no
#    traffic leaves this machine), with the robustness probes and the
#    security column;
# 3. merges the shards' journals (one testbed host a core, below) into
#    compat.json, report.md, report.html and results.jsonl in
#    MCPVM_BENCH_OUT (default: a temporary directory, named at the end),
#    prints the audit's throughput in servers per hour and renders
#    docs/ecosystem.md's table there as table.md (benches/lib/
#    ecosystem-table.py, with the build's sizes and times, build.json;
#    for the corpus, its verdicts weighted by npm downloads too), the
#    calls that reached their tools as reach.md and what the
#    layers' install scripts did as install.md. Each shard's cells' whole
#    probe results come back as shard-I/runs.tgz (steps, times, the
#    tools' definitions; a shard run again for its runs as released
#    keeps its first run's as shard-I/runs-first.tgz).
# MCPVM_CORPUS_IMAGES=DIR names the store (default ~/.cache/mcpvm/corpus-images).
# MCPVM_ECOSYSTEM_DEADLINE=SECONDS stops the audit after that long (what
#   it recorded comes back, its reports rendered over it);
# MCPVM_ECOSYSTEM_SHARDS=N splits the audit over N testbed hosts run side
#   by side (default: the machine's cores, the testbed host having one CPU).
# MCPVM_ECOSYSTEM_RESUME=DIR resumes the audit an earlier run left in DIR
#   (its shard-I/ journals, audit.json and results.jsonl; with one shard,
#   DIR's own), with the same servers (another set is refused at once,
#   naming them): the cells recorded are not run again, but those of a
#   server whose layer was built again differently (a store made on
#   another machine, a build fixed since) are (`audit --rerun-changed`).
# MCPVM_ECOSYSTEM_PROBES="FLAGS" replaces the audit's hostile steps
#   (default "--robustness --security"); "" is the calls alone: the
#   coverage pass (how many calls reach their tools, docs/benchmarks.md).
# MCPVM_ECOSYSTEM_BUILD=DIR audits with another build of mcpvm (its
#   target/mcpvm: bin/, kernel/, initramfs-test.cpio) under this bench:
#   benches/side-by-side.sh, an older commit's against this one's.
# MCPVM_ECOSYSTEM_PROFILES=P,Q,... audits under these profiles instead of
#   `deny-net` alone: the withholding sweep (docs/withholding.md, "What
#   the popular servers need"), e.g. baseline,no-tmp,tiny-mem,deny-exec
#   with MCPVM_ECOSYSTEM_PROBES="--robustness --check-proposals". Every
#   one of them denies the network too (the audit's profiles file sets
#   `deny_net` in its defaults), so nothing leaves the machine and each
#   is judged against `baseline`; what each took is rendered as needs.md.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
servers=${1:-}
catalogue=${MCPVM_ECOSYSTEM_CATALOGUE:-$top/guest-image/corpus/popular.toml}
[ -f "$catalogue" ] || { echo "ecosystem: no catalogue at $catalogue" >&2; exit 1; }
# Every server of the corpus (or those named): the ones that did not
# install are rows of the audit too. Names are checked before anything
# runs, and reach the testbed's scenario as a file, never as its text.
# Its entries as TOML reads them (a sub-table, [servers.NAME.env], is
# part of its entry), control characters escaped so that a name stays
# on its line and is refused whole below.
[ -n "$servers" ] || servers=$(python3 -c 'import json, sys, tomllib
names = tomllib.load(open(sys.argv[1], "rb")).get("servers", {})
print(",".join(json.dumps(n)[1:-1] for n in names))' "$catalogue") \
  || { echo "ecosystem: $catalogue is not a catalogue TOML can read" >&2; exit 1; }
. "$top/benches/lib/names.sh"
IFS=, read -r -a names <<< "$servers"
[ ${#names[@]} -gt 0 ] || { echo "ecosystem: no servers in $catalogue" >&2; exit 1; }
check_server_names ecosystem "${names[@]}"
# A journal resumes only with its own servers (its cells were split and
# ordered over them): said now, not after the layers are built.
if [ -n "${MCPVM_ECOSYSTEM_RESUME:-}" ]; then
  python3 - "$MCPVM_ECOSYSTEM_RESUME" "$servers" <<'PY' || exit 1
import json, os, sys
d, given = sys.argv[1], set(sys.argv[2].split(","))
path = next((p for p in (os.path.join(d, "audit.json"), os.path.join(d, "shard-0", "audit.json")) if os.path.isfile(p)), None)
if path is None:
    sys.exit(f"ecosystem: MCPVM_ECOSYSTEM_RESUME={d!r} holds no audit.json: not an earlier run's output")
try:
    had = set(json.load(open(path))["servers"])
except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit(f"ecosystem: {path} is not an audit's audit.json ({e})")
if had != given:
    clip = lambda s: ", ".join(sorted(s)[:5]) + (f" and {len(s) - 5} more" if len(s) > 5 else "")
    parts = [f"{w}: {clip(s)}" for w, s in (("given, not in its journal", given - had), ("in its journal, not given", had - given)) if s]
    sys.exit(f"ecosystem: {path} is an audit of other servers ({'; '.join(parts)}); resume with its servers: "
             + ",".join(sorted(had))[:4000])
PY
fi
limit=${MCPVM_ECOSYSTEM_DEADLINE:-14000}
case "$limit" in ''|*[!0-9]*) echo "ecosystem: MCPVM_ECOSYSTEM_DEADLINE takes seconds, got $(printf '%q' "$limit")" >&2; exit 1 ;; esac
"$top/scripts/build" >&2
t=${MCPVM_ECOSYSTEM_BUILD:-$top/target/mcpvm}
[ -x "$t/bin/mcpvm" ] || { echo "ecosystem: no mcpvm build in $t (MCPVM_ECOSYSTEM_BUILD names one: its bin/, kernel/ and initramfs-test.cpio)" >&2; exit 1; }
store=${MCPVM_CORPUS_IMAGES:-${MCPVM_CACHE:-$HOME/.cache/mcpvm}/corpus-images}
build=(--catalogue "$catalogue" --catalogue-only --images "$store")
[ -n "${1:-}" ] && build+=(--servers "$servers")
out=${MCPVM_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
echo "ecosystem: building the corpus's layers into $store" >&2
start=$(date +%s)
"$t/bin/mcpvm" --json image build "${build[@]}" > "$out/build.json" || echo "ecosystem: some layers did not build; their rows say why" >&2
echo "ecosystem: layers ready in $(( $(date +%s) - start )) s" >&2
scenario=$(mktemp)
names_file=$(mktemp)
trap 'rm -f "$scenario" "$names_file"' EXIT
printf '%s\n' "$servers" > "$names_file"
files=(--file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux"
       --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh" --file "$catalogue:popular.toml"
       --file "$names_file:servers")
# The store (3.6 GB for the whole corpus since three layers carry a
# browser) is past what an initramfs can carry into the testbed host: it
# travels on a disk (listed again when layers were built here since).
# Only what the index names goes: the runtime and each server's layer,
# not the install microVMs' tools layers or superseded files.
store_files() {
  disk=()
  local f
  while IFS= read -r f; do
    [ -f "$store/$f" ] && disk+=(--disk-file "$store/$f:images/$f")
  done < <(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
names = [d.get("runtime")] + [s.get("layer") for s in d.get("servers", {}).values()]
print("\n".join(["index.json"] + sorted({n for n in names if n and "/" not in n and n.endswith(".erofs")})))' "$store/index.json")
}
# The payload, in MiB: the testbed host unpacks it into its /tmp (a
# tmpfs of half its memory).
store_mib() {
  local n=0 i
  for ((i = 1; i < ${#disk[@]}; i += 2)); do n=$(( n + $(stat -c %s "${disk[$i]%%:*}") / 1048576 )); done
  echo "$n"
}
resume=${MCPVM_ECOSYSTEM_RESUME:-}
# The testbed host has one CPU (testbed/run): the audit is split into
# shards, one testbed host per core, each running every N-th cell
# (`mcpvm audit --shard`), and merged here (`mcpvm audit merge`), as the
# scale-out runs it (docs/scale-out.md).
shards=${MCPVM_ECOSYSTEM_SHARDS:-$(nproc)}
case "$shards" in ''|*[!0-9]*|0) echo "ecosystem: MCPVM_ECOSYSTEM_SHARDS takes a whole number of shards, got '$shards'" >&2; exit 1 ;; esac
probes=${MCPVM_ECOSYSTEM_PROBES---robustness --security}
case " $probes " in *[!a-z\ -]*) echo "ecosystem: MCPVM_ECOSYSTEM_PROBES takes audit flags only, got '$probes'" >&2; exit 1 ;; esac
profiles=${MCPVM_ECOSYSTEM_PROFILES:-deny-net}
case "$profiles" in ''|*[!a-z0-9,+-]*) echo "ecosystem: MCPVM_ECOSYSTEM_PROFILES takes profile names joined by commas (e.g. baseline,no-tmp), got '$profiles'" >&2; exit 1 ;; esac
# Any other profiles than `deny-net` deny the network by the audit's
# profiles file: no cell's traffic leaves this machine.
deny_all=
[ "$profiles" = deny-net ] || deny_all=1
cat > "$scenario" <<SCEN
# The nested testbed host has one CPU: guests get one vCPU there.
# Every profile of a sweep denies the network ([defaults] deny_net).
extra=
printf '[defaults]\\n' > tb.toml
if [ "\$MCPVM_TESTBED" = nested ]; then printf 'vcpus = 1\\n' >> tb.toml; extra="--profiles-file tb.toml"; fi
if [ -n "$deny_all" ]; then printf 'deny_net = true\\n' >> tb.toml; extra="--profiles-file tb.toml"; fi
# As a case (testbed/case.sh): the audit's progress lines (servers done,
# the current one, the ETA) reach the serial log, and testbed/run's
# output, as they come.
. ./case.sh
mkdir -p a
rerun=
[ -d resume ] && cp resume/audit.json resume/results.jsonl a/ && rerun=--rerun-changed
start=\$(date +%s)
CASE_LIMIT=$limit CASE_TEE=1 case_ audit \
  mcpvm --json audit --catalogue popular.toml --catalogue-only --images images --servers "\$(cat servers)" \
  --profiles $profiles $probes \$extra --jobs 1 --init-timeout 300 --step-timeout 120 \
  --run-timeout 900 --shard "\$(cat shard)" --out a \$rerun
end=\$(date +%s)
# The journal, also when the audit was cut short: the host merges the
# shards' journals into the reports, and a later run resumes from it
# (MCPVM_ECOSYSTEM_RESUME).
cp a/audit.json a/results.jsonl "\$MCPVM_OUT/"
cp a/as-released.toml "\$MCPVM_OUT/" 2>/dev/null
# Each cell's whole probe result (its steps and their times, the tools'
# definitions as listed): where the time went, and what each tool says
# of itself, compressed; none if it does not fit the results disk.
tar -czf "\$MCPVM_OUT/runs.tgz" -C a runs 2>/dev/null || rm -f "\$MCPVM_OUT/runs.tgz"
mv "\$MCPVM_OUT/audit.out" summary.json
cells=\$(grep -c '"server"' a/results.jsonl)
echo "ecosystem: shard \$(cat shard): \$cells cells recorded, the audit ran \$((end - start)) s (exit \$(cat "\$MCPVM_OUT/audit.rc"))"
cat summary.json
SCEN
# Each testbed host unpacks the layers into its /tmp, a tmpfs of half
# its memory: it gets twice the payload and room for its guests (a
# browser's VM takes 1 GiB), at least what the corpus took before.
store_files
payload=$(store_mib)
want=$(( 2 * payload + 3072 ))
floor=$(( shards > 1 ? 7168 : 12288 ))
export MCPVM_TESTBED_MEM=${MCPVM_TESTBED_MEM:-$(( want > floor ? want : floor ))}
echo "ecosystem: $payload MiB of images for each testbed host, which gets ${MCPVM_TESTBED_MEM} MiB" >&2
echo "ecosystem: auditing in $shards shard(s), one testbed host each" >&2
# run_shards FROM I...: shards I... side by side, each on a testbed host
# of its own, resumed from FROM/shard-I when FROM is given.
run_shards() {
  local from_dir=$1 i from f p failed=0
  shift
  store_files
  local pids=()
  for i in "$@"; do
    mkdir -p "$out/shard-$i"
    echo "$i/$shards" > "$out/shard-$i.id"
    local sf=(--file "$out/shard-$i.id:shard")
    if [ -n "$from_dir" ]; then
      from=$from_dir/shard-$i
      [ "$shards" = 1 ] && [ ! -d "$from" ] && from=$from_dir
      # A copy, without the runs as released that could not be built
      # where they ran: the audit makes those again (and writes the
      # entries to build here, below).
      local staged=$out/shard-$i.resume
      rm -rf "$staged" && mkdir -p "$staged"
      for f in audit.json results.jsonl; do
        [ -f "$from/$f" ] || { echo "ecosystem: $from/$f is missing: not an earlier run's output with $shards shard(s)" >&2; exit 1; }
        cp "$from/$f" "$staged/$f"
        sf+=(--file "$staged/$f:resume/$f")
      done
      python3 "$top/benches/lib/unbuilt-released.py" "$staged/results.jsonl" || true
    fi
    "$top/testbed/run" --timeout 14400 --out "$out/shard-$i" "${files[@]}" "${disk[@]}" "${sf[@]}" -- sh scenario.sh \
      > "$out/shard-$i.log" 2> >(sed -u "s/^/shard $i: /" >&2) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  for i in "$@"; do cat "$out/shard-$i.log"; done
  [ "$failed" = 0 ] || echo "ecosystem: a testbed host failed; the merge below says what its shard lacks" >&2
}
start=$(date +%s)
run_shards "$resume" $(seq 0 $(( shards - 1 )))
wall=$(( $(date +%s) - start ))
# A server that died on today's dependencies is run again as released
# (docs/audit.md, "Old releases"). The testbed host cannot build that
# layer (no registry there, nor the package tools), so where that is why
# the run failed, the layer is built here from the entry the audit wrote
# (as-released.toml), the failed record is dropped and the shard resumed:
# every cell it has is kept and only that run is made again.
again=()
for (( i = 0; i < shards; i++ )); do
  j=$out/shard-$i
  [ -f "$j/as-released.toml" ] && [ -f "$j/results.jsonl" ] || continue
  python3 "$top/benches/lib/unbuilt-released.py" "$j/results.jsonl" || continue
  echo "ecosystem: shard $i: building as released here what the testbed host could not ($j/as-released.toml)" >&2
  "$t/bin/mcpvm" --json image build --catalogue "$j/as-released.toml" --catalogue-only --images "$store" \
    > "$j/build-as-released.json" || echo "ecosystem: shard $i: a layer as released did not build; its row says why" >&2
  # The shard's run again brings back its own runs.tgz: the first run's
  # probe results are kept beside it.
  [ -f "$j/runs.tgz" ] && mv "$j/runs.tgz" "$j/runs-first.tgz"
  again+=("$i")
done
if [ ${#again[@]} -gt 0 ]; then
  start2=$(date +%s)
  run_shards "$out" "${again[@]}"
  echo "ecosystem: the runs as released took $(( $(date +%s) - start2 )) s more" >&2
fi
shard_dirs=()
for (( i = 0; i < shards; i++ )); do [ -f "$out/shard-$i/audit.json" ] && shard_dirs+=("$out/shard-$i"); done
[ ${#shard_dirs[@]} -gt 0 ] || { echo "ecosystem: no shard recorded anything" >&2; exit 1; }
"$t/bin/mcpvm" audit merge --out "$out" "${shard_dirs[@]}" || echo "ecosystem: the merge says the audit is partial (above)" >&2
n=$(grep -c '"server"' "$out/results.jsonl" || true)
servers_run=$(python3 -c 'import json,sys; print(len({json.loads(l)["server"] for l in open(sys.argv[1]) if l.strip()}))' "$out/results.jsonl")
echo "ecosystem: $n cells of $servers_run servers in ${wall} s of wall time on $shards testbed host(s), from start to the last shard's end: $(( servers_run * 3600 / (wall > 0 ? wall : 1) )) servers an hour" >&2
corpus_csv=$top/../shared/corpus/popular-servers.csv
csv=()
[ -f "$corpus_csv" ] && csv=(--csv "$corpus_csv")
# The corpus's verdicts weighted by use (docs/ecosystem.md, "Weighted by
# use"): its downloads table names only its own servers.
downloads=()
[ "$catalogue" = "$top/guest-image/corpus/popular.toml" ] && downloads=(--downloads "$top/guest-image/corpus/downloads-2026-12.tsv")
python3 "$top/benches/lib/ecosystem-table.py" --compat "$out/compat.json" --results "$out/results.jsonl" \
  --audit "$out/audit.json" --index "$store/index.json" --build "$out/build.json" "${csv[@]}" "${downloads[@]}" > "$out/table.md"
# How many calls reached their tools (docs/benchmarks.md).
python3 "$top/benches/lib/reach-table.py" --results "$out/results.jsonl" --catalogue "$catalogue" > "$out/reach.md"
# What the layers' install scripts did (docs/security-audit.md).
python3 "$top/benches/lib/install-table.py" --index "$store/index.json" > "$out/install.md"
# The sweep: what each profile took from each server (effects.json,
# against its baseline cell), and the proposals' check.
if [ -f "$out/effects.json" ]; then
  proposals=()
  [ -f "$out/proposals.json" ] && proposals=(--proposals "$out/proposals.json")
  python3 "$top/benches/lib/needs-table.py" --effects "$out/effects.json" --audit "$out/audit.json" "${proposals[@]}" > "$out/needs.md"
  echo "ecosystem: what the servers need, by profile, in $out/needs.md" >&2
fi
echo "ecosystem: verdicts in $out/compat.json, report in $out/report.html, tables in $out/table.md, $out/reach.md and $out/install.md" >&2
