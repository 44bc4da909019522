# A guest floods vsock (see boot.sh): run by boot.sh as a case and by
# benches/vsock-flood.sh alone. Payload: bin/mcpvm, bin/vsock-load,
# vmlinux, initramfs.cpio. mcpvm boot's output is this script's; the VMM's
# peak RSS goes to $MCPVM_OUT/vsock_flood_peak_kb.txt.
vsock-load host-stuck /tmp/f.sock_6000 > /dev/null 2>&1 &
stuck_pid=$!
vsock-load host-echo /tmp/f.sock_6002 1500 > /dev/null 2>&1 &
echo_pid=$!
g='ulimit -n 4096; for p in 6000 6001; do /bin/vsock-load flood $p 3000; done; /bin/vsock-load flood 6002 1500; echo flood-survived'
mcpvm boot --json --timeout 240 --kernel vmlinux --initrd initramfs.cpio --vsock-uds /tmp/f.sock \
  --cmdline "quiet -- /bin/sh -c \"$g\"" &
pid=$!
peak=0
# A finished job stays a zombie until waited for, and kill -0 succeeds on it.
while kill -0 $pid 2>/dev/null && ! grep -q '^State:.*zombie' /proc/$pid/status 2>/dev/null; do
  kb=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null)
  [ -n "$kb" ] && [ "$kb" -gt "$peak" ] && peak=$kb
  sleep 0.5
done
wait $pid
rc=$?
echo $peak > "$MCPVM_OUT/vsock_flood_peak_kb.txt"
kill $stuck_pid $echo_pid 2>/dev/null
exit $rc
