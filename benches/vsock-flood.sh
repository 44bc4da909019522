#!/usr/bin/env bash
# A hostile guest floods virtio-vsock, on real KVM (the testbed where
# /dev/kvm is kvm_pvm): 3000 streams to a host program that listens with a
# backlog of one and never accepts, 3000 to a port nobody listens on,
# 1500 to a host program that accepts them all, holding what connects.
# Prints what the guest saw, how the VM ended and the VMM's peak RSS.
#   benches/vsock-flood.sh
# The same case runs in the suite (scenarios/boot.sh, vsock_flood); this
# runs it alone and prints the numbers docs/security.md quotes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/build" >&2
t=$top/target/mcpvm
scenario=$(mktemp)
out=$(mktemp -d)
trap 'rm -rf "$scenario" "$out"' EXIT
{
  echo 'set -u'
  cat <<'SCEN'
# A hostile guest floods vsock: 3000 streams to a host program that
# listens with a backlog of one and never accepts (port 6000), 3000 to a
# port nobody listens on (6001), then 1500 to a host program that accepts
# them all (6002), holding what connects: the VMM's limit is 1024 streams. The VMM
# must answer every one (connect or reset), keep the guest's other
# streams working and stay within a memory budget; its peak RSS is
# sampled while it runs.
vsock-load host-stuck /tmp/f.sock_6000 > /dev/null 2>&1 &
stuck_pid=$!
vsock-load host-echo /tmp/f.sock_6002 1500 > /dev/null 2>&1 &
flood_echo_pid=$!
g='ulimit -n 4096; for p in 6000 6001; do /bin/vsock-load flood $p 3000; done; /bin/vsock-load flood 6002 1500; echo flood-survived'
mcpvm boot --json --timeout 240 --kernel vmlinux --initrd initramfs.cpio --vsock-uds /tmp/f.sock \
  --cmdline "quiet -- /bin/sh -c \"$g\"" > "$MCPVM_OUT/vsock_flood.out" 2> "$MCPVM_OUT/vsock_flood.err" &
pid=$!
peak=0
# (A finished job stays a zombie until waited for, and kill -0 succeeds on it.)
while kill -0 $pid 2>/dev/null && ! grep -q '^State:.*zombie' /proc/$pid/status 2>/dev/null; do
  kb=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null)
  [ -n "$kb" ] && [ "$kb" -gt "$peak" ] && peak=$kb
  sleep 0.5
done
wait $pid
echo $? > "$MCPVM_OUT/vsock_flood.rc"
echo $peak > "$MCPVM_OUT/vsock_flood_peak_kb.txt"
kill $stuck_pid $flood_echo_pid 2>/dev/null
SCEN
  echo 'cat "$MCPVM_OUT/vsock_flood.out" "$MCPVM_OUT/vsock_flood.err"'
  echo 'echo "exit: $(cat "$MCPVM_OUT/vsock_flood.rc"); VMM peak RSS: $(cat "$MCPVM_OUT/vsock_flood_peak_kb.txt") kB"'
} > "$scenario"
"$top/testbed/run" --timeout 900 --out "$out" \
  --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/vsock-load:bin/vsock-load" \
  --file "$t/kernel/vmlinux:vmlinux" --file "$t/initramfs-test.cpio:initramfs.cpio" \
  --file "$scenario:scenario.sh" -- sh scenario.sh
