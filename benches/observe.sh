#!/usr/bin/env bash
# What observing a server costs on its first response, on real KVM (the
# testbed where /dev/kvm is kvm_pvm): a catalogued server probed with and
# without an observing profile, alternating in one testbed session after
# one warm-up run that is not counted. PROFILE: `baseline` (every system
# call counted) or `observe` (files, programs and addresses recorded
# with arguments, per request).
#   benches/observe.sh [RUNS] [SERVER] [PROFILE]   (default 5 memory baseline)
# Prints a Markdown table: medians of the probe's spawn → handshake
# answer, and how the calls were counted (the agent's syscalls event) or
# how many were recorded.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
server=${2:-memory}
profile=${3:-baseline}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$top/benches/lib/probe-pair.sh" "$out" "$runs" "$server" "" "--profile $profile"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$top/benches/lib python3 - "$out" "$runs" "$server" "$profile" <<'PY'
import sys
from pair import load, first, table
out, runs, server, profile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def counted(rs):
    by = set()
    for r in rs:
        if r.get("recording"):
            by.add(f"{r['recording']['recorded']} calls recorded")
        for e in r.get("guest_events") or []:
            if e.get("event") == "syscalls" and e.get("used"):
                by.add(f"counted by {e.get('counted_by', 'notification')}")
    return ", ".join(sorted(by)) or "no syscalls event"
plain, observed = load(out, "a", runs, "observe"), load(out, "b", runs, "observe")
table(f"{server}, spawn → handshake answer, {runs} runs each", [
    ("no profile", first(plain, "plain", "observe")),
    (f"`--profile {profile}` ({counted(observed)})", first(observed, "observed", "observe")),
])
PY
