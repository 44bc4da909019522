# MCP snapshots on real KVM (testbed/run): snapshot the fixture after
# mcpvm's template initialize, then restore COPIES (default 10) VMs from
# it at once, each an MCP session of its own; the same with server-memory
# (node, from the catalogue). Payload: bin/mcpvm, kernel/vmlinux,
# initramfs-test.cpio, images/ (index.json, the runtime, memory's layer).
set -u
. ./case.sh
COPIES=${COPIES:-10}
# A session whose server is gone must not take the scenario with it.
trap '' PIPE

progress "snapshot the fixture"
case_ take mcpvm run --timeout 300 --console "$MCPVM_OUT/take-console.txt" \
  --snapshot-to snap -- /bin/mcp-fixture
ls snap > "$MCPVM_OUT/snap-files.txt" 2>&1
cp snap/initialize.json "$MCPVM_OUT/initialize.json" 2>/dev/null
# The snapshot ages a little: a restored clock that is not stepped to the
# host's would lag by this much.
sleep 20
date +%s > "$MCPVM_OUT/host-time.txt"

# The session helpers go in a file: each phase that runs several sessions
# is one case (its own time limit, and testbed/run's watch for a wedged
# host, which retries the scenario on a fresh one).
echo "MCPVM_OUT='$MCPVM_OUT'" > session.sh
cat >> session.sh <<'HELPERS'
trap '' PIPE
# One MCP session: `session NAME RUN-ARGS...` runs `mcpvm run RUN-ARGS`
# and sends initialize, tools/list, and the calls CALL3 and CALL4 print
# for NAME (by default the fixture's note and whoami), each after the
# answer to the one before (its id in the output), so nothing races the
# end of stdin. Leaves NAME.txt (stdout), NAME-stderr.txt, NAME.code.
CALL3=fixture_note
CALL4=fixture_whoami
fixture_note() { echo '{"name":"note","arguments":{"text":"'$1'"}}'; }
fixture_whoami() { echo '{"name":"whoami","arguments":{}}'; }
memory_create() { echo '{"name":"create_entities","arguments":{"entities":[{"name":"'$1'","entityType":"copy","observations":["made in '$1'"]}]}}'; }
memory_read() { echo '{"name":"read_graph","arguments":{}}'; }
session() {
  i=$1
  shift
  out="$MCPVM_OUT/$i.txt"
  rm -f "in$i" "out$i" && mkfifo "in$i" "out$i"
  mcpvm run --timeout 600 --timings "$MCPVM_OUT/$i-timings.json" "$@" \
    < "in$i" > "out$i" 2> "$MCPVM_OUT/$i-stderr.txt" &
  pid=$!
  exec 3> "in$i" 4< "out$i"
  # Sends a request, then reads (blocking, no polling: the testbed host
  # has one CPU for ten VMs) until the line that answers it.
  ask() {
    printf '%s\n' "$1" >&3
    while IFS= read -r line <&4; do
      printf '%s\n' "$line" >> "$out"
      case "$line" in *"\"id\":$2,"* | *"\"id\":$2}"*) return 0 ;; esac
    done
  }
  ask '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"'$i'","version":"1"}}}' 1
  printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}' >&3
  ask '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' 2
  ask '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":'"$($CALL3 $i)"'}' 3
  ask '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":'"$($CALL4 $i)"'}' 4
  exec 3>&-
  cat <&4 >> "$out"
  exec 4<&-
  wait $pid
  echo $? > "$MCPVM_OUT/$i.code"
}
HELPERS

CASE_LIMIT=600 case_ restore_copies sh -c '. ./session.sh
  i=1
  while [ $i -le '"$COPIES"' ]; do
    session copy$i --from-snapshot snap &
    i=$((i + 1))
  done
  wait'

# The first --warm run takes the snapshot, the second restores it; another
# environment is another key.
CASE_LIMIT=600 case_ warm_cache sh -c '. ./session.sh
  session warm1 --warm --snapshots cache -- /bin/mcp-fixture
  session warm2 --warm --snapshots cache -- /bin/mcp-fixture
  ls cache > "$MCPVM_OUT/cache-after-two.txt"
  session warm3 --warm --snapshots cache --env MODE=other -- /bin/mcp-fixture
  ls cache > "$MCPVM_OUT/cache-after-three.txt"'
cat cache/*/inputs.json > "$MCPVM_OUT/warm-inputs.json"
# The probe (and so the audit) through the cache: one snapshot, two runs.
case_ probe_warm1 mcpvm probe --json --vm --warm --snapshots cache-probe -- /bin/mcp-fixture
case_ probe_warm2 mcpvm probe --json --vm --warm --snapshots cache-probe -- /bin/mcp-fixture
ls cache-probe > "$MCPVM_OUT/probe-cache.txt"

progress "bad snapshots"
# A flipped byte in the state, and a snapshot of another format version.
mkdir -p corrupt old
for d in corrupt old; do
  cp snap/state $d/ && ln -s "$PWD/snap/memory" $d/memory
done
sed -i 's/"cmdline":"/"cmdline":"x/' corrupt/state
sed -i '1s/"version":[0-9]*/"version":1/' old/state
case_ corrupt mcpvm run --from-snapshot corrupt
case_ old_version mcpvm run --from-snapshot old
# The testbed host keeps every file in memory: the fixture's snapshots
# go before ten node servers are restored.
rm -rf snap cache cache-probe corrupt old

progress "snapshot server-memory"
# Node under nested emulation: tens of seconds to start (docs/testbed.md).
case_ take_memory mcpvm run --timeout 400 --images images --server memory --mem 384 \
  --snapshot-to snap-memory
CASE_LIMIT=900 case_ restore_memory_copies sh -c '. ./session.sh
  CALL3=memory_create
  CALL4=memory_read
  i=1
  while [ $i -le '"$COPIES"' ]; do
    session memory$i --from-snapshot snap-memory &
    i=$((i + 1))
  done
  wait'

# No run directory (sockets) is left behind by any of them.
ls -A /tmp/mcpvm-0 > "$MCPVM_OUT/leftovers.txt" 2>&1
