# mcpvm audit on real KVM (testbed/run): three catalogued servers × four
# profiles and the check of each server's proposed allow-list (a cell
# under it), interrupted after its first cell and resumed.
# Then the security column on sound servers beside a vulnerable one.
# Payload: bin/mcpvm, kernel/vmlinux, initramfs-test.cpio, images/,
# catalogue.toml, cve.toml.
set -u
. ./case.sh
# The testbed host has one CPU: two vCPUs there only make the guests
# wait on each other (docs/testbed.md), so the defaults give one.
printf '[defaults]\nvcpus = 1\n' > testbed-profiles.toml
A="mcpvm audit --images images --profiles-file testbed-profiles.toml --servers memory,git,sequential-thinking --profiles baseline,no-tmp,deny-exec,ro-root --check-proposals --jobs 1 --init-timeout 400 --step-timeout 200 --run-timeout 600 --out a"

progress "audit: first run, stopped after its first cell"
$A > "$MCPVM_OUT/first.out" 2> "$MCPVM_OUT/first.err" &
pid=$!
i=0
while [ "$(cat a/results.jsonl 2>/dev/null | wc -l)" -lt 1 ] && [ $i -lt 900 ]; do sleep 1; i=$((i+1)); done
kill -TERM $pid
wait $pid
echo $? > "$MCPVM_OUT/first.rc"
# Nothing of the stopped audit may be left running: its probe and run
# get SIGTERM when their parent dies, and a run stops its VM (a few
# seconds under nested emulation). Whatever is left after 20 s stays.
i=0
while [ $i -lt 20 ]; do
  ps -o pid,args | grep -E 'mcpvm (probe|run|audit)' | grep -v grep > "$MCPVM_OUT/after_kill.txt"
  [ -s "$MCPVM_OUT/after_kill.txt" ] || break
  sleep 1; i=$((i+1))
done
head -n 1 a/results.jsonl > "$MCPVM_OUT/first_record.json"

CASE_LIMIT=1800 CASE_TEE=1 case_ resume $A
for f in results.jsonl report.md report.html audit.json proposals.json effects.json; do cp "a/$f" "$MCPVM_OUT/$f"; done
for f in a/profiles/*.toml; do cp "$f" "$MCPVM_OUT/proposal_$(basename "$f")"; done

# Cells run more than once: every run's first response is kept beside the
# first run's record and evidence.
CASE_LIMIT=900 CASE_TEE=1 case_ repeat mcpvm audit --images images \
  --profiles-file testbed-profiles.toml --servers memory --profiles baseline,deny-exec \
  --repeat 2 --jobs 1 --init-timeout 400 --step-timeout 200 --run-timeout 600 --out r
for f in results.jsonl report.md audit.json; do cp "r/$f" "$MCPVM_OUT/repeat_$f"; done
ls r/runs/memory > "$MCPVM_OUT/repeat_runs.txt"

# The audit's security column. No false positives: sound servers, every
# tool called (generated arguments) and attacked; beside them
# server-filesystem 2025.3.28's read_file, whose CVEs the column must show,
# and the fetch server, whose roles with it make a flow across the two.
{ sed '/^audit_calls/d' catalogue.toml
  sed '/^\[servers.filesystem-cve\]/a audit_calls = { read_file = { path = "/workspace/data.json" } }' cve.toml
} > security.toml
CASE_LIMIT=1500 CASE_TEE=1 case_ security_audit mcpvm audit --catalogue security.toml \
  --images images --servers memory,time,everything,filesystem-cve,fetch --profiles baseline --security \
  --profiles-file testbed-profiles.toml --jobs 1 --init-timeout 400 --step-timeout 200 --fail-on high --out s
for f in results.jsonl report.md report.html findings.sarif; do
  cp "s/$f" "$MCPVM_OUT/security_$f" 2>/dev/null
done
cp security.toml "$MCPVM_OUT/security_catalogue.toml"

# Compatibility verdicts on a slice: time (it answers, and takes the
# robustness probes), brave-search started without its key, and an entry
# whose layer was never built (an install that failed): each a row with
# its verdict, and the audit runs the rest.
{ sed -n '/^\[servers.time\]/,/^$/p' catalogue.toml
  printf '[servers.brave-search]\npackage = "@modelcontextprotocol/server-brave-search"\nversion = "0.6.2"\nruntime = "node"\ncommand = "mcp-server-brave-search"\n\n'
  printf '[servers.never-built]\npackage = "@modelcontextprotocol/server-memory"\nversion = "0.0.1-mcpvm-never-built"\nruntime = "node"\ncommand = "mcp-server-memory"\n'
} > compat.toml
CASE_LIMIT=1200 CASE_TEE=1 case_ compat mcpvm audit --catalogue compat.toml --catalogue-only \
  --images images --servers time,brave-search,never-built --profiles baseline --robustness \
  --profiles-file testbed-profiles.toml --jobs 1 --init-timeout 400 --step-timeout 200 --out c
for f in compat.json report.md; do cp "c/$f" "$MCPVM_OUT/compat_$f" 2>/dev/null; done
