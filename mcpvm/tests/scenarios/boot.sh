# Boot scenarios, run on real KVM by testbed/run (directly or nested).
# Each case leaves $MCPVM_OUT/<case>.out (stdout), .err (stderr), .rc.
# Payload: bin/mcpvm, vmlinux, bzImage, initramfs.cpio, triple-fault.elf.
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

# SIGTERM while the guest runs: a clean stop with 128+15.
mcpvm boot --json --timeout 60 --kernel vmlinux --initrd initramfs.cpio --cmdline 'quiet -- /bin/sleep 600' \
  > "$MCPVM_OUT/sigterm.out" 2> "$MCPVM_OUT/sigterm.err" &
pid=$!
sleep 4
kill -TERM $pid
wait $pid
echo $? > "$MCPVM_OUT/sigterm.rc"
