# MCP snapshots on real KVM (testbed/run): snapshot the fixture after
# mcpvm's template initialize, then restore COPIES (default 10) VMs from
# it at once, each an MCP session of its own. Payload: bin/mcpvm,
# kernel/vmlinux, initramfs-test.cpio.
set -u
. ./case.sh
COPIES=${COPIES:-10}

progress "snapshot the fixture"
case_ take mcpvm run --timeout 300 --console "$MCPVM_OUT/take-console.txt" \
  --snapshot-to snap -- /bin/mcp-fixture
ls snap > "$MCPVM_OUT/snap-files.txt" 2>&1
cp snap/initialize.json "$MCPVM_OUT/initialize.json" 2>/dev/null
# The snapshot ages a little: a restored clock that is not stepped to the
# host's would lag by this much.
sleep 20
date +%s > "$MCPVM_OUT/host-time.txt"

# One MCP session: `session NAME RUN-ARGS...` runs `mcpvm run RUN-ARGS`
# and sends initialize, tools/list, a note and whoami, each after the
# answer to the one before (its id in the output), so nothing races the
# end of stdin. Leaves NAME.txt (stdout), NAME-stderr.txt, NAME.code.
session() {
  i=$1
  shift
  out="$MCPVM_OUT/$i.txt"
  rm -f "fifo$i" && mkfifo "fifo$i"
  mcpvm run --timeout 240 --timings "$MCPVM_OUT/$i-timings.json" "$@" \
    < "fifo$i" > "$out" 2> "$MCPVM_OUT/$i-stderr.txt" &
  pid=$!
  exec 3> "fifo$i"
  ask() {
    printf '%s\n' "$1" >&3
    n=0
    until grep -q "\"id\":$2[,}]" "$out" 2>/dev/null || [ $n -ge 1800 ]; do
      sleep 0.1
      n=$((n + 1))
    done
  }
  ask '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"copy'$i'","version":"1"}}}' 1
  printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}' >&3
  ask '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' 2
  ask '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"note","arguments":{"text":"'$i'"}}}' 3
  ask '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"whoami","arguments":{}}}' 4
  exec 3>&-
  wait $pid
  echo $? > "$MCPVM_OUT/$i.code"
}

progress "restore $COPIES copies at once"
i=1
while [ $i -le "$COPIES" ]; do
  session copy$i --from-snapshot snap &
  i=$((i + 1))
done
wait

progress "warm-start cache"
# The first --warm run takes the snapshot, the second restores it; another
# environment is another key.
session warm1 --warm --snapshots cache -- /bin/mcp-fixture
session warm2 --warm --snapshots cache -- /bin/mcp-fixture
ls cache > "$MCPVM_OUT/cache-after-two.txt"
session warm3 --warm --snapshots cache --env MODE=other -- /bin/mcp-fixture
ls cache > "$MCPVM_OUT/cache-after-three.txt"
cat cache/*/inputs.json > "$MCPVM_OUT/warm-inputs.json"

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
# No run directory (sockets) is left behind by any of them.
ls -A /tmp/mcpvm-0 > "$MCPVM_OUT/leftovers.txt" 2>&1
