#!/usr/bin/env bash
# Per-server first response on real KVM (the testbed where /dev/kvm is
# kvm_pvm): each catalogued server in a microVM (`mcpvm run --server`)
# beside the same server as a bare process on the testbed host, run from
# the same images (the runtime and its layer mounted there with loop,
# erofs and overlay, entered with chroot), alternating runs.
#   benches/servers.sh [RUNS] [SERVER...]   prints a Markdown table per server
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}; shift || true
servers=${*:-memory sequential-thinking time}
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images
scenario=$(mktemp)
trap 'rm -f "$scenario"' EXIT
files=(--file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux"
       --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh"
       --file "$store/index.json:images/index.json")
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$store/index.json")
listing=$(mktemp)
trap 'rm -f "$scenario" "$listing"' EXIT
"$t/bin/mcpvm" --json image list --images "$store" > "$listing"
files+=(--file "$store/$runtime:images/$runtime")
{
  echo "set -eu"
  echo "mkdir -p /srv/rt && mount -o loop,ro images/$runtime /srv/rt"
  for s in $servers; do
    # The server's layer, command and environment, as the catalogue says.
    python3 "$top/benches/lib/bare-server.py" "$listing" "$s" \
      '--runs $RUNS --images images --mem 768'
    layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers'][sys.argv[2]]['layer'])" "$store/index.json" "$s")
    files+=(--file "$store/$layer:images/$layer")
  done
} > "$scenario"
"$top/testbed/run" --timeout 5400 "${files[@]}" -- sh -c "RUNS=$runs sh scenario.sh"
