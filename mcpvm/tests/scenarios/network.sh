# The guest's network through the host's egress proxy (docs/network.md),
# run on real KVM by testbed/run. The testbed host stands in for the
# internet, and nothing leaves it: an address of its own (198.51.100.7,
# TEST-NET-2, on its loopback), names for it in its /etc/hosts, and busybox
# httpd serving a page there and on its own 127.0.0.1.
# Each case leaves $MCPVM_OUT/<case>.out, .err, .rc and <case>.events.
# Payload: bin/mcpvm, kernel/vmlinux, initramfs-test.cpio, images/ (the
# store with the fetch and everything layers), net-catalogue.toml.
set -u
. ./case.sh
CASE_LIMIT=600

ip link set lo up
ip addr add 198.51.100.7/32 dev lo
mkdir -p /etc /srv/www
cat > /etc/hosts <<'HOSTS'
127.0.0.1 localhost
198.51.100.7 allowed.test other.test
169.254.169.254 meta.test
127.0.0.1 rebind.test
10.0.0.1 private.test
fd00::1 v6.test
::ffff:127.0.0.1 mapped.test
HOSTS
echo 'hosts: files' > /etc/nsswitch.conf
echo 'hello from the testbed host' > /srv/www/index.html
busybox httpd -p 198.51.100.7:8080 -h /srv/www
busybox httpd -p 198.51.100.7:80 -h /srv/www
busybox httpd -p 127.0.0.1:8081 -h /srv/www

R="mcpvm run --timeout 200"
# The stand-in is an address the testbed host holds, which the proxy
# refuses as the host's own: shown once, then declared a stand-in.
case_ host_own $R --allow-net allowed.test:8080 --events="$MCPVM_OUT/host_own.events" \
  -- /bin/sh -c "wget -qO- http://allowed.test:8080/; echo \"rc=\$?\""
export MCPVM_EGRESS_NOT_HOST=198.51.100.7
ev() { echo "--events=$MCPVM_OUT/$1.events"; }
# (No -T: Debian's static busybox wget crashes with it.)
get() { echo "wget -qO- http://$1/; echo \"rc=\$?\""; }

case_ allowed $R --allow-net allowed.test:8080 $(ev allowed) -- /bin/sh -c "$(get allowed.test:8080)"
case_ other_name $R --allow-net allowed.test:8080 $(ev other_name) -- /bin/sh -c "$(get other.test:8080)"
# A second run with the same events file (as a server the probe restarts
# gets) appends: the first run's events stay.
case_ other_name_again $R --allow-net allowed.test:8080 $(ev other_name) -- /bin/sh -c "$(get again.test:8080)"
case_ other_port $R --allow-net allowed.test:80 $(ev other_port) -- /bin/sh -c "$(get allowed.test:8080)"
case_ direct_ip $R --allow-net allowed.test:8080 $(ev direct_ip) -- /bin/sh -c "$(get 198.51.100.7:8080)"
# Any name on 8080: the names that lead to the host's loopback, link-local
# (metadata), private and unique-local addresses, and those addresses
# written directly, are all refused; the guest's own 127.0.0.1 is its own.
case_ ssrf $R --allow-net '*:8080' $(ev ssrf) -- /bin/sh -c "
  for n in meta.test rebind.test private.test v6.test mapped.test 169.254.169.254 10.1.2.3 127.0.0.1; do
    echo \"== \$n\"; $(get '$n:8080')
  done
  $(get '127.0.0.1:8081')"
case_ host_allowed $R --allow-net host.mcpvm.internal:8081 $(ev host_allowed) -- /bin/sh -c "
  $(get host.mcpvm.internal:8081); $(get host.mcpvm.internal:8080)"
case_ host_unnamed $R --allow-net allowed.test:8080 $(ev host_unnamed) -- /bin/sh -c "$(get host.mcpvm.internal:8081)"
case_ deny_net $R --profile deny-net --allow-net allowed.test:8080 $(ev deny_net) -- /bin/sh -c "$(get allowed.test:8080)"
case_ no_network $R $(ev no_network) -- /bin/sh -c "$(get allowed.test:8080); ls /sys/class/net"
# A flood: 300 connections at once, each given up after 5 s, and 300
# lookups, then a request that must be answered once the flood has
# drained (tried for up to 60 s: a connection given up before the host
# decided holds a proxy stream for up to 20 s, see docs/network.md).
case_ flood $R --mem 512 --allow-net allowed.test:8080 $(ev flood) -- /bin/sh -c "
  i=0; while [ \$i -lt 300 ]; do nc -w 5 allowed.test 8080 </dev/null >/dev/null 2>&1 & i=\$((i+1)); done
  i=0; while [ \$i -lt 300 ]; do nslookup n\$i.test >/dev/null 2>&1 & i=\$((i+1)); done
  wait; ok=1; t=0
  while [ \$t -lt 20 ]; do if wget -qO- http://allowed.test:8080/; then ok=0; break; fi; t=\$((t+1)); sleep 3; done
  echo \"rc=\$ok after \$t retries\""

# The fetch server as catalogued (network = *:80, *:443) fetching the page:
# allowed as catalogued, refused under deny-net, recorded under observe.
P="mcpvm probe --json --images images --mem 768 --vcpus 1 --init-timeout 400 --step-timeout 200"
F='--catalogue net-catalogue.toml --only-given --call fetch={"url":"http://allowed.test/","raw":true}'
case_ fetch_allowed $P $F --server fetch --profile observe
case_ fetch_denied $P $F --server fetch --profile observe+deny-net
# A server that looks its refused upstream up again and again and never
# answers: the call is cut 20 s after the first refused lookup, not at the
# step timeout (probes/src/calls/upstream.rs).
case_ retry_upstream mcpvm probe --json --vm --mem 768 --vcpus 1 --init-timeout 400 --step-timeout 200 \
  --profile deny-net --allow-net api.upstream.test:443 --only-given \
  --call 'search={"query":"mcpvm"}' -- /bin/mcp-broken retry-upstream

# The same server audited: the network section shows both cells.
printf '[defaults]\nvcpus = 1\n' > testbed-profiles.toml
case_ audit_fetch mcpvm audit --images images --catalogue net-catalogue.toml \
  --profiles-file testbed-profiles.toml --servers fetch --profiles observe,deny-net \
  --jobs 1 --init-timeout 400 --step-timeout 200 --run-timeout 600 --out a
cp a/results.jsonl a/report.md "$MCPVM_OUT/" 2>/dev/null

# Inbound: server-everything speaking Streamable HTTP in a VM, reached
# from the testbed host through `mcpvm run --listen`; an MCP initialize
# POSTed there is answered, then the run is stopped with SIGTERM.
cat > http.sh <<'HTTP'
ip link set lo up
export MCPVM_LISTEN_TOKEN=testbed-token-0123456789
mcpvm run --timeout 500 --images images --mem 768 --vcpus 1 --catalogue net-catalogue.toml \
  --server everything --listen 127.0.0.1:8931 < /dev/null > "$MCPVM_OUT/http_server_out.txt" 2> "$MCPVM_OUT/http_server_err.txt" &
pid=$!
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wget","version":"1"}}}'
i=0
while [ $i -lt 200 ]; do
  if wget -qO "$MCPVM_OUT/http_init.txt" --header 'Content-Type: application/json' \
      --header "Authorization: Bearer $MCPVM_LISTEN_TOKEN" \
      --header 'Accept: application/json, text/event-stream' --post-data "$init" http://127.0.0.1:8931/mcp 2>> "$MCPVM_OUT/http_init_err.txt"; then
    echo "answered after $i tries"; break
  fi
  i=$((i+1)); sleep 2
done
# The same request without the token, and with it from a page of
# another origin: refused, and said why.
wget -qO /dev/null --header 'Content-Type: application/json' --post-data "$init" \
  http://127.0.0.1:8931/mcp 2> "$MCPVM_OUT/http_no_token.txt" && echo "no token: answered"
wget -qO /dev/null --header 'Content-Type: application/json' --header 'Origin: http://evil.example' \
  --header "Authorization: Bearer $MCPVM_LISTEN_TOKEN" --post-data "$init" \
  http://127.0.0.1:8931/mcp 2> "$MCPVM_OUT/http_foreign_origin.txt" && echo "foreign origin: answered"
kill -TERM $pid; wait $pid; echo "run rc=$?"
HTTP
case_ http_listen sh http.sh
# The same server probed over Streamable HTTP (mcpvm probe picks a free
# port for --listen and POSTs there).
case_ http_probe $P --catalogue net-catalogue.toml --server everything --only-given

# A server that answers the probe's POSTs with a redirect to a listener
# of the testbed host's own: the probe (the host) must not follow it
# there, under deny-net as under any profile (docs/security.md, round 4).
busybox nc -l -p 9999 > redirect_target.txt 2>&1 &
target=$!
case_ http_redirect mcpvm probe --json --vm --profile deny-net --init-timeout 120 --step-timeout 60 \
  --listen 127.0.0.1:8932 --guest-port 3001 -- /bin/mcp-broken http-redirect 3001 'http://127.0.0.1:9999/stolen?k=1'
kill $target 2>/dev/null; wait $target 2>/dev/null
printf 'seen:%s' "$(cat redirect_target.txt)" > "$MCPVM_OUT/redirect_target.txt"

ps > "$MCPVM_OUT/ps.txt" 2>&1
ls -A /tmp/mcpvm-0 > "$MCPVM_OUT/leftovers.txt" 2>&1
