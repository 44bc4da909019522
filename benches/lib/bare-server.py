# Prints the shell lines (for a testbed scenario) that run server NAME as a
# bare process on the testbed host, from the same images the VM uses (the
# runtime and the server's layer mounted with loop, erofs and overlay,
# entered with chroot), and the `mcpvm bench first-response` line that
# measures it beside the VM.
#   bare-server.py LISTING NAME BENCH-ARGS
# LISTING is `mcpvm --json image list` of the catalogue and store the VM
# runs from: the server's layer, and its command line, environment and
# setup line with its needs spelt out (a browser server's variables and
# site), so that both peers start the same server the same way: as the
# guest's unprivileged user mcp (uid 1000, its home and the workspace its
# own), after the setup line run as root, unless the entry asks for root.
import json, shlex, sys
listing = json.load(open(sys.argv[1]))
name = sys.argv[2]
bench_args = sys.argv[3]
e = next(s for s in listing["servers"] if s["name"] == name)
if e["state"] != "built":
    sys.exit(f"bare-server: {name} is {e['state']} in {listing['store']}: build it first")
layer = e["layer"]
d = f"/opt/mcp/{name}"
root_user = e.get("root", False)
home = "/root" if root_user else "/home/mcp"
user = "root" if root_user else "mcp"
env = ([f"PYTHONPATH={d}"] if e["runtime"] == "python" else [])
env += [f"HOME={home}", f"USER={user}", f"LOGNAME={user}"]
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
print(f"mkdir -p {root}{home}")
if e.get("setup"):
    print(f"chroot {root} /usr/bin/env HOME={home} /bin/sh -c {shlex.quote(e['setup'])} 2>&1 || true")
spec = []
if not root_user:
    print(f"chown -R 1000:1000 {root}{home} && if [ -d {root}/workspace ]; then chown -R 1000:1000 {root}/workspace; fi")
    # The image's setpriv: the testbed host's chroot is busybox's.
    spec = ["/usr/bin/setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
host = " ".join(shlex.quote(a) for a in ["chroot", root] + spec + argv)
print(f"echo '## {name}'")
print(f"mcpvm bench first-response {bench_args} --server {name} --host {host}")
