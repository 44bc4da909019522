#!/usr/bin/env bash
# Share of tool calls that end in a tool error when the probe generates
# the arguments, on the real servers the probe tests install (host
# processes: server-everything, server-memory, mcp-server-time), for one or
# more mcpvm binaries side by side (e.g. before and after a change):
#   benches/arguments.sh [MCPVM_BINARY...]     (default: target/debug/mcpvm)
# Needs scripts/build (target/mcpvm/host-servers). Tools annotated
# destructive are not called, as in any probe.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
hs=$top/target/mcpvm/host-servers/bin
[ -x "$hs/mcp-server-everything" ] || { echo "arguments: run scripts/build first ($hs missing)" >&2; exit 1; }
[ $# -gt 0 ] || set -- "$top/target/debug/mcpvm"
work=$(mktemp -d "${TMPDIR:-/tmp}/mcpvm-arguments.XXXXXX")
trap 'rm -rf "$work"' EXIT
for exe in "$@"; do
  python3 - "$exe" "$hs" "$work" <<'PY'
import json, subprocess, sys
exe, hs, work = sys.argv[1:]
servers = {
    "everything": [hs + "/mcp-server-everything"],
    "memory": ["env", f"MEMORY_FILE_PATH={work}/memory.jsonl", hs + "/mcp-server-memory"],
    "time": [hs + "/mcp-server-time"],
}
total = failed = 0
rows = []
for name, cmd in servers.items():
    out = subprocess.run([exe, "--json", "probe", "--exit-grace", "2", "--"] + cmd,
                         capture_output=True, text=True, timeout=300).stdout
    r = json.loads(out.strip().splitlines()[-1])
    calls = [s for s in r["steps"] if s["step"].startswith("tools/call:") and s["outcome"] != "skipped"]
    bad = [s["step"].split(":", 1)[1] for s in calls if s["outcome"] in ("tool_error", "error")]
    total += len(calls)
    failed += len(bad)
    rows.append(f"{name} {len(bad)}/{len(calls)} ({', '.join(bad) or 'none'})")
print(f"{exe}: {failed}/{total} calls failed ({100 * failed / max(total, 1):.0f}%): " + "; ".join(rows))
PY
done
