# Catalogued servers in microVMs, run on real KVM by testbed/run.
# Each case leaves $MCPVM_OUT/<case>.out (stdout), .err (stderr), .rc.
# Payload: bin/mcpvm, kernel/vmlinux, initramfs-test.cpio, images/ (the
# store: index.json, runtime and layers), catalogue.toml.
set -u
case_() {
  name=$1; shift
  "$@" > "$MCPVM_OUT/$name.out" 2> "$MCPVM_OUT/$name.err"
  echo $? > "$MCPVM_OUT/$name.rc"
}
P="mcpvm probe --json --images images --mem 768 --init-timeout 400 --step-timeout 200 --discover-timeout 120"

# Every no-network server: handshake and listings, no tool calls.
for s in memory everything sequential-thinking time git sqlite markitdown; do
  case_ "server_$s" $P --only-given --server "$s"
done
# The filesystem server reads the file its setup line put in /workspace.
case_ server_filesystem $P --only-given --call 'read_text_file={"path":"/workspace/README.txt"}' --server filesystem

# Asking for a credential the environment lacks: one clear error.
case_ server_needs_key mcpvm run --images images --server github
# A server the catalogue does not have.
case_ server_unknown mcpvm run --images images --server no-such-server
