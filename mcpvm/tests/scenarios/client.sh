# mcpvm audit --config on real KVM (testbed/run): a client's configuration
# naming two published packages, an `npx` and a `uvx` entry (their layers
# built by scripts/build, as `audit --config` builds them on first use),
# a local script and a remote server. The packages are audited side by
# side with the security column, the rest are rows that say why, nothing
# the file names runs on this host (the script would leave a marker), the
# file is only read, and --fix writes the wrapped configuration apart.
# Payload: bin/mcpvm, bin/mcpvm-tools, kernel/vmlinux, initramfs-test.cpio,
# images/ (the two layers).
set -u
. ./case.sh
printf '[defaults]\nvcpus = 1\n' > testbed-profiles.toml
cat > mcp.json <<'JSON'
{"mcpServers": {
  "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory@2026.8.31"]},
  "time": {"command": "uvx", "args": ["mcp-server-time==2026.10.19"]},
  "script": {"command": "sh", "args": ["-c", "touch /tmp/a-configured-command-ran"]},
  "remote": {"url": "https://mcp.example.com/mcp"}
}}
JSON
cp mcp.json mcp.json.before
CASE_LIMIT=1500 CASE_TEE=1 case_ client mcpvm audit --config mcp.json --images images --fix \
  --profiles-file testbed-profiles.toml --jobs 1 --init-timeout 400 --step-timeout 200 --out c
for f in setup.json results.jsonl report.md fixed-config.json; do
  cp "c/$f" "$MCPVM_OUT/client_$f" 2>/dev/null
done
{
  if cmp -s mcp.json mcp.json.before; then echo "the configuration is unchanged"; fi
  if [ -e /tmp/a-configured-command-ran ]; then echo "a configured command ran"; fi
} > "$MCPVM_OUT/host.txt"
