# Catalogued servers in microVMs, run on real KVM by testbed/run.
# Each case leaves $MCPVM_OUT/<case>.out (stdout), .err (stderr), .rc.
# Payload: bin/mcpvm, kernel/vmlinux, initramfs-test.cpio, images/ (the
# store: index.json, runtime and layers), catalogue.toml.
set -u
. ./case.sh
CASE_LIMIT=600
# The discover wait defaults to the init timeout in a VM: python servers
# take up to two minutes to answer under nested emulation.
P="mcpvm probe --json --images images --mem 768 --init-timeout 400 --step-timeout 200"

# Every no-network server: handshake and listings, no tool calls. (memory,
# sequential-thinking and git answer, and are called, in the audit test:
# its baseline runs: catalogue_linux.rs, mod audit.)
for s in everything time sqlite markitdown; do
  case_ "server_$s" $P --only-given --server "$s"
done
# The filesystem server on a host directory: it reads a file placed there
# and writes one; the write comes back only with a writable workspace.
mkdir -p ws_ro ws_rw
echo 'hello from the host workspace' > ws_ro/hello.txt
cp ws_ro/hello.txt ws_rw/
W='--call read_text_file={"path":"/workspace/hello.txt"} --call write_file={"path":"/workspace/new.txt","content":"written-in-the-guest"}'
case_ server_filesystem $P --only-given $W --server filesystem --workspace ws_ro
ls ws_ro > "$MCPVM_OUT/ws_ro_after.txt"
# Observed (--profile observe): what each call did is recorded, and the
# recording changes nothing the server does.
case_ server_filesystem_rw $P --only-given $W --server filesystem --workspace ws_rw,rw \
  --profile observe
ls ws_rw > "$MCPVM_OUT/ws_rw_after.txt"
cat ws_rw/new.txt > "$MCPVM_OUT/ws_rw_new.txt" 2>/dev/null

# Ground truth for --security: server-filesystem 2025.3.28 (CVE-2025-53110,
# CVE-2025-53109) and the catalogue's fixed release, each called once on
# a file of the workspace and then attacked.
case_ security_cve $P --security --only-given --call 'read_file={"path":"/workspace/hello.txt"}' \
  --catalogue cve.toml --server filesystem-cve --workspace ws_ro
case_ security_fixed $P --security --only-given --call 'read_text_file={"path":"/workspace/hello.txt"}' \
  --server filesystem --workspace ws_ro
# mcp-server-git 2025.11.25 (CVE-2025-68144, CVE-2025-68145) and the
# catalogue's release, each called on its repository and attacked.
G='--security --only-given --call git_status={"repo_path":"/workspace/repo"} --call git_diff={"repo_path":"/workspace/repo","target":"HEAD"}'
case_ security_git_cve $P $G --catalogue cve.toml --server git-cve
case_ security_git_fixed $P $G --server git

# A server that needs node 22 (the image has 20) on the node its layer
# carries, observed so that its processes' executable is on record.
case_ server_node22 $P --only-given --profile observe --catalogue runtimes.toml --server sentry-node22

# A server named by its package instead of a catalogue entry (its layer
# built by scripts/build, as `run --package` does on first use).
case_ server_package $P --only-given --package npm:@modelcontextprotocol/server-memory@2026.8.31

# A Debian package in the server's layer (ripgrep, which the runtime
# lacks) runs in the guest: the setup line prints its version, then the
# server reads the end of its input and exits.
case_ server_apt mcpvm run --images images --mem 768 --timeout 300 --catalogue apt.toml \
  --server memory-rg < /dev/null

# Asking for a credential the environment lacks: one clear error.
case_ server_needs_key mcpvm run --images images --server github
# A server the catalogue does not have.
case_ server_unknown mcpvm run --images images --server no-such-server

# Every tool of every offline server called with generated arguments (the
# catalogue's audit_calls removed): a baseline audit, one vCPU per guest
# (the testbed host has one CPU).
sed '/^audit_calls/d' catalogue.toml > generated.toml
printf '[defaults]\nvcpus = 1\n' > tb.toml
CASE_LIMIT=1200 CASE_TEE=1 case_ generated mcpvm audit --catalogue generated.toml \
  --images images --profiles baseline --profiles-file tb.toml --jobs 1 \
  --init-timeout 400 --step-timeout 200 --out g
cp g/results.jsonl "$MCPVM_OUT/generated.jsonl" 2>/dev/null
# A server whose baseline fails on its own (everything: a URL fetch with
# no network, a tool that needs the client's task support) under a
# profile that changes nothing for it: judged as baseline, not fragile.
CASE_LIMIT=600 CASE_TEE=1 case_ judged mcpvm audit --catalogue generated.toml \
  --images images --servers everything --profiles baseline,deny-exec --profiles-file tb.toml \
  --jobs 1 --init-timeout 400 --step-timeout 200 --out j
cp j/report.md "$MCPVM_OUT/judged_report.md" 2>/dev/null
