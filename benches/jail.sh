#!/usr/bin/env bash
# What the jail costs on the first response, on real KVM (the testbed): a
# catalogued server probed with `--jail off` and with the jail (`--jail
# on`), alternating in one testbed session after one warm-up run that is
# not counted.
#   benches/jail.sh [RUNS] [SERVER]   (default 10 memory)
# Prints a Markdown table of the probe's spawn → handshake answer.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-10}
server=${2:-memory}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$top/benches/lib/probe-pair.sh" "$out" "$runs" "$server" "--jail off" "--jail on"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$top/benches/lib python3 - "$out" "$runs" "$server" <<'PY'
import sys
from pair import load, first, table
out, runs, server = sys.argv[1], int(sys.argv[2]), sys.argv[3]
table(f"{server}, spawn → handshake answer, {runs} runs each", [
    ("`--jail off`", first(load(out, "a", runs, "jail"), "unjailed", "jail")),
    ("`--jail on`", first(load(out, "b", runs, "jail"), "jailed", "jail")),
])
PY
