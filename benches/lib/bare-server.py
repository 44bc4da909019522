# Prints the shell lines (for a testbed scenario) that run server NAME as a
# bare process on the testbed host, from the same images the VM uses (the
# runtime and the server's layer mounted with loop, erofs and overlay,
# entered with chroot), and the `mcpvm bench first-response` line that
# measures it beside the VM.
#   bare-server.py LISTING NAME BENCH-ARGS
# LISTING is `mcpvm --json image list` of the catalogue and store the VM
# runs from: the server's layer, and its command line, environment and
# setup line with its needs spelt out (a browser server's variables and
# site), so that both peers start the same server the same way.
import json, shlex, sys
listing = json.load(open(sys.argv[1]))
name = sys.argv[2]
bench_args = sys.argv[3]
e = next(s for s in listing["servers"] if s["name"] == name)
if e["state"] != "built":
    sys.exit(f"bare-server: {name} is {e['state']} in {listing['store']}: build it first")
layer = e["layer"]
d = f"/opt/mcp/{name}"
env = ([f"PYTHONPATH={d}"] if e["runtime"] == "python" else []) + ["HOME=/tmp"]
env += [f"{k}={v}" for k, v in e["env"].items()]
argv = ["/usr/bin/env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin"] + env + e["argv"]
root = f"/srv/root-{name}"
print(f"# {name}: {layer}")
print(f"mkdir -p /srv/l-{name} {root} && mount -o loop,ro images/{layer} /srv/l-{name}")
# Writable, as the guest's root is (a tmpfs over the images).
print(f"mkdir -p /srv/w-{name} && mount -t tmpfs w /srv/w-{name} && mkdir -p /srv/w-{name}/u /srv/w-{name}/w")
print(f"mount -t overlay overlay -o lowerdir=/srv/l-{name}:/srv/rt,upperdir=/srv/w-{name}/u,workdir=/srv/w-{name}/w {root}")
# What the guest agent mounts (and a browser needs: /dev/shm, /sys).
print(f"mount -t tmpfs tmp {root}/tmp && mount -t tmpfs run {root}/run && mount -t proc proc {root}/proc")
print(f"mount --bind /dev {root}/dev && mkdir -p {root}/dev/shm && mount -t tmpfs shm {root}/dev/shm")
print(f"mount -t sysfs sys {root}/sys")
# The workspace the VM gets, if the scenario made one (ws/).
print(f"if [ -d ws ]; then mkdir -p {root}/workspace && cp -a ws/. {root}/workspace/; fi")
if e.get("setup"):
    print(f"chroot {root} /bin/sh -c {shlex.quote(e['setup'])} 2>&1 || true")
host = " ".join(shlex.quote(a) for a in ["chroot", root] + argv)
print(f"echo '## {name}'")
print(f"mcpvm bench first-response {bench_args} --server {name} --host {host}")
