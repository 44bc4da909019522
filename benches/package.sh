#!/usr/bin/env bash
# What `--package` costs before its VM starts: the first use of a package
# (its layer resolved, installed and made in a fresh store; npm's and
# pip's download caches warm after one untimed build) beside a later use
# (found in the store), both as `mcpvm image build --package` (which is
# what `run --package` does first), and the size of a server's layer per
# node runtime (the image's node, or a node of its own in the layer).
#   benches/package.sh [RUNS]     (default 3)
# Prints Markdown tables.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
"$top/scripts/build" >&2
mcpvm=$top/target/mcpvm/bin/mcpvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
secs() { # command... -> seconds
  local t0=$EPOCHREALTIME
  "$@" >/dev/null 2>>"$work/log" </dev/null
  python3 -c "print(round($EPOCHREALTIME - $t0, 2))"
}
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| package | first use (layer built), s | later use (cached), s |"
echo "|---|---:|---:|"
for spec in npm:@modelcontextprotocol/server-memory@2026.8.31 pypi:mcp-server-time==2026.10.19; do
  "$mcpvm" image build --package "$spec" --images "$work/warm" >/dev/null 2>&1
  cold=() warm=()
  for i in $(seq "$runs"); do
    store=$work/store-$i-$RANDOM
    cold+=("$(secs "$mcpvm" image build --package "$spec" --images "$store")")
    warm+=("$(secs "$mcpvm" image build --package "$spec" --images "$store")")
    rm -rf "$store"
  done
  echo "| \`$spec\` | $(med "${cold[@]}") ($(IFS=/; echo "${cold[*]}")) | $(med "${warm[@]}") ($(IFS=/; echo "${warm[*]}")) |"
done
echo
echo "| server-memory's layer on | MB |"
echo "|---|---:|"
for rt in node node20 node22 node24 node26; do
  printf '[servers.m]\npackage = "@modelcontextprotocol/server-memory"\nversion = "2026.8.31"\nruntime = "%s"\ncommand = "mcp-server-memory"\n' "$rt" > "$work/$rt.toml"
  "$mcpvm" image build --catalogue "$work/$rt.toml" --catalogue-only --images "$work/sizes-$rt" >/dev/null 2>>"$work/log"
  layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers']['m']['layer'])" "$work/sizes-$rt/index.json")
  python3 -c "import os,sys; print('| %s | %.1f |' % (sys.argv[1], os.path.getsize(sys.argv[2]) / 1e6))" "$rt" "$work/sizes-$rt/$layer"
done
