#!/usr/bin/env bash
# What observing a server costs on its first response and on a tool
# call, on real KVM (the testbed where /dev/kvm is kvm_pvm): a catalogued
# server probed with and without an observing profile, alternating in one
# testbed session after one warm-up run that is not counted. PROFILE:
# `baseline` (every system call counted) or `observe` (files, programs
# and addresses recorded with arguments, per request). CALL: a tool call
# both sides make (`TOOL={json}`; default for memory: create_entities,
# which writes the server's memory file); none for another server unless
# given.
#   benches/observe.sh [RUNS] [SERVER] [PROFILE] [CALL]   (default 5 memory baseline)
# Prints Markdown tables: medians of the probe's spawn → handshake answer
# and of the call's request → answer, and how the calls were counted (the
# agent's syscalls event) or how many were recorded.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
server=${2:-memory}
profile=${3:-baseline}
call=${4:-}
if [ -z "$call" ] && [ "$server" = memory ]; then
  call='create_entities={"entities":[{"name":"mcpvm","entityType":"tool","observations":["observed"]}]}'
fi
case "$call" in *"'"*) echo "observe: CALL may not hold a single quote" >&2; exit 2 ;; esac
both=""
[ -z "$call" ] || both="--call '$call'"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$top/benches/lib/probe-pair.sh" "$out" "$runs" "$server" "$both" "$both --profile $profile"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$top/benches/lib python3 - "$out" "$runs" "$server" "$profile" "${call%%=*}" <<'PY'
import sys
from pair import load, first, table
out, runs, server, profile, tool = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
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
if tool:
    def took(rs, label):
        ts = []
        for r in rs:
            st = next((s for s in r["steps"] if s["step"] == f"tools/call:{tool}"), None)
            if st is None or st["outcome"] != "ok":
                sys.exit(f"observe: a {label} run's {tool} call did not answer ok")
            ts.append(st["took_ms"])
        return ts
    def effects(rs):
        n = {(s.get("effects") or {}).get("calls", 0) for r in rs
             for s in r["steps"] if s["step"] == f"tools/call:{tool}"}
        return "/".join(str(x) for x in sorted(n))
    print()
    table(f"{server}, the {tool} call (request → answer), {runs} runs each", [
        ("no profile", took(plain, "plain")),
        (f"`--profile {profile}` ({effects(observed)} effects recorded in the call)", took(observed, "observed")),
    ])
PY
