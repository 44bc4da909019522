#!/usr/bin/env bash
# deploy/slurm/e2e.sh: the Slurm deployment end to end on this machine.
# Starts a single-node cluster of its own (Debian's slurm-wlm and munge,
# installed if missing; its own key, sockets, ports and state in a
# temporary directory, torn down at the end), submits a small audit (the
# memory and sequential-thinking servers × baseline) as 2 shards (a
# shard runs whole servers: one each) with
# deploy/slurm/submit, each task running its shard in the testbed
# (testbed/run: this machine's /dev/kvm is kvm_pvm), and a merge after
# them. Then:
#   1. the merged results match one unsharded audit of the same slice,
#      cell by cell (outcome) and server by server (verdict, reason);
#   2. a lost task (shard 1's directory removed) makes the merge exit 3
#      naming shard 1/2 as missing; re-submitting index 1 alone completes
#      it and the merge matches again.
# Exit 0 when all holds. Takes a few minutes (four testbed sessions).
# Another slice: MCPVM_E2E_CATALOGUE=FILE (its servers, --catalogue-only)
# with MCPVM_E2E_IMAGES=STORE (where their layers were built),
# MCPVM_E2E_SERVERS=A,B and MCPVM_E2E_PROFILES=P,Q (default
# baseline,deny-exec): the registry's generated catalogue is checked so
# (docs/scale-out.md, "The registry's whole list").
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
say() { echo "slurm-e2e: $*" >&2; }
for p in slurm-wlm munge; do
  dpkg -s "$p" >/dev/null 2>&1 || { say "installing $p"; apt-get install -y -qq --no-install-recommends "$p" >/dev/null; }
done
t=$top/target/mcpvm
[ -x "$t/bin/mcpvm" ] || "$top/scripts/build" >&2
servers=${MCPVM_E2E_SERVERS:-memory,sequential-thinking}
profiles=${MCPVM_E2E_PROFILES:-baseline}
catalogue=${MCPVM_E2E_CATALOGUE:-}
. "$top/benches/lib/names.sh"
IFS=, read -r -a names <<< "$servers"
check_server_names slurm-e2e "${names[@]}"
case "$profiles" in *[!a-z0-9,+-]*|'') say "MCPVM_E2E_PROFILES takes profile names, got '$profiles'"; exit 1 ;; esac
[ -z "$catalogue" ] || [ -f "$catalogue" ] || { say "no catalogue at $catalogue"; exit 1; }
work=$(mktemp -d)
c=$work/cluster
mkdir -p "$c/state" "$c/spool" "$c/log"
stop() {
  for p in slurmd slurmctld munged; do
    [ -f "$c/$p.pid" ] && kill "$(cat "$c/$p.pid")" 2>/dev/null || true
  done
  sleep 1
  rm -rf "$work"
}
trap stop EXIT

# The cluster: munge with a key of its own, one controller, one node.
head -c 1024 /dev/urandom > "$c/munge.key"; chmod 600 "$c/munge.key"
/usr/sbin/munged --force --key-file="$c/munge.key" --socket="$c/munge.sock" \
  --pid-file="$c/munged.pid" --log-file="$c/log/munged.log" --seed-file="$c/munge.seed"
host=$(hostname)
cat > "$c/slurm.conf" <<CONF
ClusterName=mcpvm-e2e
SlurmctldHost=$host
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$c/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$c/state
SlurmdSpoolDir=$c/spool
SlurmctldPidFile=$c/slurmctld.pid
SlurmdPidFile=$c/slurmd.pid
SlurmctldLogFile=$c/log/slurmctld.log
SlurmdLogFile=$c/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$(nproc) RealMemory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024)) State=UNKNOWN
PartitionName=audit Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$c/slurm.conf
/usr/sbin/slurmctld -c
/usr/sbin/slurmd
for _ in $(seq 30); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 1; done
sinfo -h -o %T | grep -q idle || { say "the node did not come up"; cat "$c/log/"*; exit 1; }
say "cluster up: $(sinfo -h -o '%P %D %T %c CPUs')"

# What a task runs as "mcpvm": the audit in the testbed, its --out
# directory brought back (and sent in first, so a re-run resumes it).
store=${MCPVM_E2E_IMAGES:-$t/images}
python3 - "$store" "$work/store" "$servers" <<'PY'
import json, os, sys
src, dst, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
index = json.load(open(os.path.join(src, "index.json")))
missing = [n for n in names if n not in index["servers"]]
if missing:
    sys.exit(f"slurm-e2e: {src} has no layer for {', '.join(missing)}: build them first (mcpvm image build)")
index["servers"] = {n: index["servers"][n] for n in names}
os.makedirs(dst)
for n in [index["runtime"]] + [s["layer"] for s in index["servers"].values()]:
    os.link(os.path.join(src, n), os.path.join(dst, n))
json.dump(index, open(os.path.join(dst, "index.json"), "w"))
PY
printf '[defaults]\nvcpus = 1\n' > "$work/tb.toml"
# The catalogue goes in by a path of ours: the wrapper below is written
# with it, and a path is the user's text.
[ -z "$catalogue" ] || cp "$catalogue" "$work/catalogue.toml"
cat > "$work/mcpvm-in-testbed" <<WRAP
#!/usr/bin/env bash
set -euo pipefail
args=() out=
while [ \$# -gt 0 ]; do
  if [ "\$1" = --out ]; then out=\$2; args+=(--out out); shift 2; else args+=("\$1"); shift; fi
done
files=(--file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools"
  --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio"
  --file "$work/tb.toml:tb.toml" ${catalogue:+--file "$work/catalogue.toml:catalogue.toml"})
for f in "$work/store"/*; do files+=(--file "\$f:images/\$(basename "\$f")"); done
mkdir -p "\$out"
for f in audit.json results.jsonl; do [ -f "\$out/\$f" ] && files+=(--file "\$out/\$f:resume/\$f"); done
q="\${args[*]}"  # plain flags and paths: no quoting needed
"$top/testbed/run" --timeout 1500 --out "\$out" "\${files[@]}" -- sh -c \
  "mkdir -p out; cp resume/* out/ 2>/dev/null; mcpvm \$q; rc=\\\$?; cp out/audit.json out/results.jsonl \\\$MCPVM_OUT/; exit \\\$rc"
WRAP
chmod +x "$work/mcpvm-in-testbed"
flags="--images images --profiles-file tb.toml --servers $servers --profiles $profiles --jobs 1 --init-timeout 400 --step-timeout 200 --run-timeout 600"
[ -z "$catalogue" ] || flags="--catalogue catalogue.toml --catalogue-only $flags"
cells=$(( ${#names[@]} * $(echo "$profiles" | tr ',' '\n' | grep -c .) ))
export MCPVM=$work/mcpvm-in-testbed MCPVM_MERGE=$t/bin/mcpvm

wait_for() { # job ids: until none is pending or running
  while squeue -h -j "$(echo "$@" | tr ' ' ,)" 2>/dev/null | grep -q .; do sleep 5; done
}
state() { scontrol show job "$1" 2>/dev/null | grep -o 'ExitCode=[0-9:]*' | head -1; }

out=$work/audit
say "submitting 2 shards and a merge"
read -r array merge < <("$top/deploy/slurm/submit" 2 "$out" -- $flags)
wait_for "$array" "$merge"
say "array $array and merge $merge done (merge $(state "$merge"))"
cat "$out"/slurm-merge-*.out >&2

say "one unsharded audit of the same slice, for comparison"
"$MCPVM" audit $flags --out "$work/whole" >/dev/null 2>"$work/whole.err" || true
"$MCPVM_MERGE" audit merge --out "$work/whole-report" "$work/whole" 2>/dev/null || true

compare() { # merged dir, reference dir
  python3 - "$1" "$2" "$cells" <<'PY'
import json, os, sys
a, b, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
cells = lambda d: {(r["server"], r["profile"]): r["outcome"] for r in map(json.loads, open(os.path.join(d, "results.jsonl")))}
verdicts = lambda d: {v["server"]: (v["verdict"], v["reason"]) for v in json.load(open(os.path.join(d, "compat.json")))}
ca, cb = cells(a), cells(b)
print(f"slurm-e2e: cells sharded {sorted(ca.items())}", file=sys.stderr)
print(f"slurm-e2e: cells whole   {sorted(cb.items())}", file=sys.stderr)
assert len(cb) == want, f"the unsharded audit ran {len(cb)} cells, not {want}"
assert ca == cb, "the cells differ"
assert verdicts(a) == verdicts(b), f"verdicts differ: {verdicts(a)} {verdicts(b)}"
print(f"slurm-e2e: same {len(ca)} cells and verdicts {verdicts(a)}", file=sys.stderr)
PY
}
compare "$out/merged" "$work/whole-report"

say "a lost task: shard 1's output removed"
rm -rf "$out/shard-1"
set +e
"$MCPVM_MERGE" audit merge --out "$out/merged" "$out"/shard-* 2> "$work/lost.err"
rc=$?
set -e
cat "$work/lost.err" >&2
[ "$rc" = 3 ] || { say "the merge exited $rc, not 3"; exit 1; }
grep -q "shard 1/2 is missing" "$work/lost.err" || { say "the merge did not name shard 1/2"; exit 1; }
say "re-submitting index 1 alone"
read -r array merge < <("$top/deploy/slurm/submit" 2 "$out" 1 -- $flags)
wait_for "$array" "$merge"
say "merge $(state "$merge")"
compare "$out/merged" "$work/whole-report"
say "ok"
