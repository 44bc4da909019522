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
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$top/benches/lib/probe-pair.sh" "$out" "$runs" "$server" "" "--profile baseline"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$top/benches/lib python3 - "$out" "$runs" "$server" <<'PY'
import sys
from pair import load, first, table
out, runs, server = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def counted(rs):
    by = set()
    for r in rs:
        for e in r.get("guest_events") or []:
            if e.get("event") == "syscalls":
                by.add(e.get("counted_by", "notification"))
    return ", ".join(sorted(by)) or "no syscalls event"
plain, observed = load(out, "a", runs, "observe"), load(out, "b", runs, "observe")
table(f"{server}, spawn → handshake answer, {runs} runs each", [
    ("no profile", first(plain, "plain", "observe")),
    (f"`--profile baseline` (counted by: {counted(observed)})", first(observed, "observed", "observe")),
])
PY
