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
files=(--file "$t/bin/mcpvm:bin/mcpvm" --file "$t/kernel/vmlinux:kernel/vmlinux"
       --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$scenario:scenario.sh"
       --file "$store/index.json:images/index.json")
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$store/index.json")
files+=(--file "$store/$runtime:images/$runtime")
{
  echo "set -eu"
  echo "mkdir -p /srv/rt && mount -o loop,ro images/$runtime /srv/rt"
  for s in $servers; do
    # The server's layer, command and environment, as the catalogue says.
    python3 - "$top/guest-image/catalogue.toml" "$store/index.json" "$s" <<'PY'
import json, shlex, sys, tomllib
cat = tomllib.load(open(sys.argv[1], "rb"))["servers"]
index = json.load(open(sys.argv[2]))
name = sys.argv[3]
e = cat[name]
layer = index["servers"][name]["layer"]
d = f"/opt/mcp/{name}"
exe = f"{d}/node_modules/.bin/{e['command']}" if e["runtime"] == "node" else f"{d}/bin/{e['command']}"
env = ([f"PYTHONPATH={d}"] if e["runtime"] == "python" else []) + ["HOME=/tmp"]
env += [f"{k}={v}" for k, v in e.get("env", {}).items()]
argv = ["/usr/bin/env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin"] + env + [exe] + e.get("args", [])
root = f"/srv/root-{name}"
print(f"# {name}: {layer}")
print(f"mkdir -p /srv/l-{name} {root} && mount -o loop,ro images/{layer} /srv/l-{name}")
print(f"mount -t overlay overlay -o lowerdir=/srv/l-{name}:/srv/rt {root}")
print(f"mount -t tmpfs tmp {root}/tmp && mount -t proc proc {root}/proc && mount --bind /dev {root}/dev")
if e.get("setup"):
    print(f"chroot {root} /bin/sh -c {shlex.quote(e['setup'])} 2>&1 || true")
host = " ".join(shlex.quote(a) for a in ["chroot", root] + argv)
print(f"echo '## {name}'")
print(f"mcpvm bench first-response --runs $RUNS --images images --mem 768 --server {name} --host {host}")
PY
    layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers'][sys.argv[2]]['layer'])" "$store/index.json" "$s")
    files+=(--file "$store/$layer:images/$layer")
  done
} > "$scenario"
"$top/testbed/run" --timeout 5400 "${files[@]}" -- sh -c "RUNS=$runs sh scenario.sh"
