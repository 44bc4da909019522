# Boot scenarios, run on real KVM by testbed/run (directly or nested).
# Each case leaves $MCPVM_OUT/<case>.out (stdout), .err (stderr), .rc.
# Payload: bin/mcpvm, bin/vsock-load, vmlinux, bzImage, initramfs.cpio,
# triple-fault.elf.
set -u
case_() {
  name=$1; shift
  "$@" > "$MCPVM_OUT/$name.out" 2> "$MCPVM_OUT/$name.err"
  echo $? > "$MCPVM_OUT/$name.rc"
}
B="mcpvm boot --json --timeout 60"

case_ pvh          $B --kernel vmlinux --initrd initramfs.cpio
case_ bzimage_smp  $B --kernel bzImage --initrd initramfs.cpio --vcpus 2 --cmdline quiet
case_ status       $B --kernel vmlinux --initrd initramfs.cpio --vcpus 4 --cmdline 'quiet -- /bin/sh -c "echo from-guest-shell; exit 3"'
case_ timeout      mcpvm boot --json --timeout 3 --kernel vmlinux --initrd initramfs.cpio --cmdline 'quiet -- /bin/sleep 600'
case_ panic        $B --kernel vmlinux --cmdline quiet
case_ serial_off   $B --kernel vmlinux --initrd initramfs.cpio --serial off
case_ serial_file  $B --kernel vmlinux --initrd initramfs.cpio --serial file --serial-file "$MCPVM_OUT/serial_file.log"
case_ triple_fault $B --kernel triple-fault.elf

# 64 concurrent guest vsock streams, 64 KiB echoed on each, through
# --vsock-uds (guest connects to CID 2 port 5000 -> /tmp/v.sock_5000).
vsock-load host-echo /tmp/v.sock_5000 64 > /dev/null 2>&1 &
echo_pid=$!
case_ vsock64 $B --kernel vmlinux --initrd initramfs.cpio --vsock-uds /tmp/v.sock --cmdline 'quiet -- /bin/vsock-load guest 5000 64 65536'
kill $echo_pid 2>/dev/null
ls /tmp/v.sock > "$MCPVM_OUT/vsock_socket_left.txt" 2>/dev/null

# SIGTERM while the guest runs: a clean stop with 128+15.
mcpvm boot --json --timeout 60 --kernel vmlinux --initrd initramfs.cpio --cmdline 'quiet -- /bin/sleep 600' \
  > "$MCPVM_OUT/sigterm.out" 2> "$MCPVM_OUT/sigterm.err" &
pid=$!
sleep 4
kill -TERM $pid
wait $pid
echo $? > "$MCPVM_OUT/sigterm.rc"
