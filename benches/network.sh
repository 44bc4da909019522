#!/usr/bin/env bash
# What the guest's network costs (docs/network.md), on real KVM (the
# testbed where /dev/kvm is kvm_pvm), in one testbed session. The testbed
# host stands in for the internet: an address of its own (198.51.100.7)
# named allowed.test in its /etc/hosts, busybox httpd serving a small page
# and a 64 MiB file. Measured in the same session, each beside its peer:
#   - a small HTTP request (connect, GET, a 28-byte page) and the 64 MiB
#     download, from the testbed host directly and from a guest through
#     the egress path;
#   - DNS lookups from the guest (the agent, the host's proxy, the host's
#     resolver) and the proxy's own share (the events' duration_ms);
#   - the fetch server's first response with its network on (its rules)
#     and with none (no rules), alternating after one warm-up.
#   benches/network.sh [N] [RUNS]   (default 50 requests and lookups, 3 fetch runs)
# Prints Markdown tables.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-50}
runs=${2:-3}
"$top/scripts/build" >&2
t=$top/target/mcpvm
store=$t/images
index=$store/index.json
runtime=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runtime'])" "$index")
layer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['servers']['fetch']['layer'])" "$index")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# fetch with its rules, and without any: the same layer either way.
sed 's/^network = .*/network = []/' "$top/mcpvm/tests/fixtures/net-catalogue.toml" > "$work/offline.toml"
cat > "$work/scenario.sh" <<SCEN
set -u
ip link set lo up
ip addr add 198.51.100.7/32 dev lo
mkdir -p /etc /srv/www
echo '198.51.100.7 allowed.test' > /etc/hosts
echo 'hosts: files' > /etc/nsswitch.conf
echo 'hello from the testbed host' > /srv/www/index.html
dd if=/dev/zero of=/srv/www/big bs=1M count=64 2>/dev/null
busybox httpd -p 198.51.100.7:8080 -h /srv/www
busybox httpd -p 198.51.100.7:80 -h /srv/www
# busybox time prints "real 0m 1.23s" on stderr, to 10 ms.
requests='i=0; while [ \$i -lt $n ]; do wget -qO /dev/null http://198.51.100.7:8080/ || echo failed; i=\$((i+1)); done'
lookups='i=0; while [ \$i -lt $n ]; do nslookup allowed.test > /dev/null || echo failed; i=\$((i+1)); done'
big='wget -qO /dev/null http://198.51.100.7:8080/big || echo failed'
for what in requests big; do
  eval "cmd=\\\$\$what"
  ( time sh -c "\$cmd" ) 2> "\$MCPVM_OUT/host-\$what.time"
done
# In one guest: a lookup first, so the address is known by its name.
mcpvm run --timeout 900 --allow-net allowed.test:8080 --events "\$MCPVM_OUT/guest.events" -- /bin/sh -c "
  nslookup allowed.test > /dev/null
  ( time sh -c '\$requests' ) 2> /tmp/requests.time; cat /tmp/requests.time
  ( time sh -c '\$big' ) 2> /tmp/big.time; cat /tmp/big.time
  ( time sh -c '\$lookups' ) 2> /tmp/lookups.time; cat /tmp/lookups.time
" > "\$MCPVM_OUT/guest.out" 2> "\$MCPVM_OUT/guest.err"
P="mcpvm probe --json --images images --mem 768 --vcpus 1 --init-timeout 400 --step-timeout 200 --server fetch --only-given"
\$P --catalogue net.toml > /dev/null 2>&1 || true
for r in \$(seq $runs); do
  \$P --catalogue net.toml > "\$MCPVM_OUT/on-\$r.json" 2> "\$MCPVM_OUT/on-\$r.err"
  \$P --catalogue offline.toml > "\$MCPVM_OUT/off-\$r.json" 2> "\$MCPVM_OUT/off-\$r.err"
done
SCEN
out=$work/out
"$top/testbed/run" --timeout 3600 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:kernel/vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs-test.cpio" --file "$work/scenario.sh:scenario.sh" \
  --file "$top/mcpvm/tests/fixtures/net-catalogue.toml:net.toml" --file "$work/offline.toml:offline.toml" \
  --file "$index:images/index.json" --file "$store/$runtime:images/$runtime" \
  --file "$store/$layer:images/$layer" -- sh scenario.sh >&2
python3 - "$out" "$n" "$runs" <<'PY'
import json, re, statistics, sys
out, n, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def real(text, what):
    m = re.search(r"real\s+(?:(\d+)m\s*)?([\d.]+)s", text)
    if not m:
        sys.exit(f"network: no time for {what} in: {text!r}")
    return 60 * int(m.group(1) or 0) + float(m.group(2))
guest = open(f"{out}/guest.out").read()
if "failed" in guest:
    sys.exit(f"network: a guest request failed:\n{guest}\n{open(out + '/guest.err').read()}")
times = re.findall(r"real[^\n]*", guest)
if len(times) != 3:
    sys.exit(f"network: expected three timings from the guest, got:\n{guest}")
g_req, g_big, g_dns = (real(t, "guest") for t in times)
h_req = real(open(f"{out}/host-requests.time").read(), "host requests")
h_big = real(open(f"{out}/host-big.time").read(), "host download")
events = [json.loads(l) for l in open(f"{out}/guest.events") if l.strip()]
dns = [e["duration_ms"] for e in events if e.get("event") == "net" and e["kind"] == "dns"]
conns = [e for e in events if e.get("event") == "net" and e["kind"] == "connect"]
print(f"| {n} small HTTP requests, sequential | testbed host directly | guest through the egress path | ratio |")
print("|---|---|---|---|")
print(f"| per request | {1000*h_req/n:.1f} ms | {1000*g_req/n:.1f} ms | {g_req/h_req:.2f}× |")
mb = 64
print(f"| 64 MiB download | {mb/h_big:.0f} MiB/s ({h_big:.2f} s) | {mb/g_big:.0f} MiB/s ({g_big:.2f} s) | {g_big/h_big:.2f}× the time |")
print()
print(f"| {n} DNS lookups from the guest (nslookup → agent → proxy → host resolver) | median in the proxy (decide + getaddrinfo) |")
print("|---|---|")
print(f"| {1000*g_dns/n:.1f} ms each | {statistics.median(dns):.2f} ms ({len(dns)} lookups) |")
print()
def first(prefix):
    v = []
    for r in range(1, runs + 1):
        res = json.load(open(f"{out}/{prefix}-{r}.json"))
        v.append(res["timings"]["handshake_ms"])
    return v
on, off = first("on"), first("off")
print(f"| fetch, spawn → handshake answer, {runs} runs each, alternating | median | range |")
print("|---|---|---|")
print(f"| no network (no rules) | {statistics.median(off):.0f} ms | {min(off):.0f}–{max(off):.0f} |")
print(f"| network on (`*:80`, `*:443`) | {statistics.median(on):.0f} ms | {min(on):.0f}–{max(on):.0f} |")
print(f"| ratio on/off | {statistics.median(on)/statistics.median(off):.2f}× | |")
PY
