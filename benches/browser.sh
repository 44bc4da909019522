#!/usr/bin/env bash
# A browser server's first answers on real KVM (the testbed where
# /dev/kvm is kvm_pvm): @playwright/mcp with Debian's Chromium (needs =
# ["browser"], mcpvm/tests/fixtures/needs-catalogue.toml) in a microVM
# beside the same server as a bare process on the testbed host, started
# from the same images (the runtime and its layer mounted with loop,
# erofs and overlay, entered with chroot; its variables and its served
# site as the VM has them), alternating runs. Each run: spawn → handshake
# → tools/list → the first browser_navigate answer (the browser starts
# on it) to the seeded page served on the loopback.
#   benches/browser.sh [RUNS] [SERVER]   prints a Markdown table
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
server=${2:-playwright}
case "$server" in
  playwright) call='browser_navigate={"url":"http://127.0.0.1:8080/page.html"}' ;;
  chrome-devtools) call='navigate_page={"pageId":1,"type":"url","url":"http://127.0.0.1:8080/page.html"}' ;;
  *) echo "browser: a server of mcpvm/tests/fixtures/needs-catalogue.toml that drives a browser: playwright or chrome-devtools" >&2; exit 2 ;;
esac
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images-needs
catalogue=$top/mcpvm/tests/fixtures/needs-catalogue.toml
scenario=$(mktemp)
listing=$(mktemp)
trap 'rm -f "$scenario" "$listing"' EXIT
"$t/bin/mcpvm" --json image list --catalogue "$catalogue" --catalogue-only --images "$store" > "$listing"
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$listing")
layer=$(python3 -c "import json,sys; print(next(s['layer'] for s in json.load(open(sys.argv[1]))['servers'] if s['name'] == sys.argv[2]))" "$listing" "$server")
{
  echo "set -eu"
  # The testbed host's loopback carries the bare peer's site.
  echo "ip link set lo up 2>/dev/null || true"
  echo "mkdir -p ws && cp page.html ws/page.html"
  echo "mkdir -p /srv/rt && mount -o loop,ro images/$runtime /srv/rt"
  python3 "$top/benches/lib/bare-server.py" "$listing" "$server" \
    "--runs \$RUNS --images images --catalogue needs.toml --catalogue-only --workspace ws --mem 1024 --call '$call'"
} > "$scenario"
"$top/testbed/run" --timeout 5400 \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh" \
  --file "$catalogue:needs.toml" --file "$top/mcpvm/tests/fixtures/browser-page.html:page.html" \
  --disk-file "$store/index.json:images/index.json" --disk-file "$store/$runtime:images/$runtime" \
  --disk-file "$store/$layer:images/$layer" \
  -- sh -c "RUNS=$runs sh scenario.sh"
