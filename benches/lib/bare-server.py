# Prints the shell lines (for a testbed scenario) that run catalogued
# server NAME as a bare process on the testbed host, from the same images
# the VM uses (the runtime and the server's layer mounted with loop, erofs
# and overlay, entered with chroot), and the `mcpvm bench first-response`
# line that measures it beside the VM.
#   bare-server.py CATALOGUE INDEX NAME BENCH-ARGS
import json, shlex, sys, tomllib
cat = tomllib.load(open(sys.argv[1], "rb"))["servers"]
index = json.load(open(sys.argv[2]))
name = sys.argv[3]
bench_args = sys.argv[4]
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
print(f"mcpvm bench first-response {bench_args} --server {name} --host {host}")
