# Boot scenarios, run on real KVM by testbed/run (directly or nested).
# Each case leaves $MCPVM_OUT/<case>.out (stdout), .err (stderr), .rc.
# Payload: bin/mcpvm, bin/vsock-load, vmlinux, bzImage, initramfs.cpio,
# triple-fault.elf, root.ext4, vsock-flood.sh.
set -u
. ./case.sh
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

# A hostile guest floods vsock: 3000 streams to a host program that
# listens with a backlog of one and never accepts (port 6000), 3000 to a
# port nobody listens on (6001), then 1500 to a host program that accepts
# them all (6002), holding what connects: the VMM's limit is 1024
# streams. The VMM must answer every one (connect or reset), keep the
# guest's other streams working and stay within a memory budget; its peak
# RSS is sampled while it runs (vsock-flood.sh, shared with
# benches/vsock-flood.sh). About 100 s alone under nested emulation; a
# case of its own, so that a slow run costs its own limit only.
CASE_LIMIT=420 case_ vsock_flood sh vsock-flood.sh

# SIGTERM while the guest runs: a clean stop with 128+15.
mcpvm boot --json --timeout 60 --kernel vmlinux --initrd initramfs.cpio --cmdline 'quiet -- /bin/sleep 600' \
  > "$MCPVM_OUT/sigterm.out" 2> "$MCPVM_OUT/sigterm.err" &
pid=$!
sleep 4
kill -TERM $pid
wait $pid
echo $? > "$MCPVM_OUT/sigterm.rc"

# Snapshots: a two-vCPU guest counting in quarter seconds is paused by SIGUSR1
# after tick-10 and written to snap/; three VMs restored from it at once
# each count on from where it paused and exit with the guest's 7; the
# snapshot's memory file is untouched by them (copy-on-write); a snapshot
# whose state was edited is refused.
cat > snapshot.sh <<'SNAP'
g='i=0; while [ $i -lt 40 ]; do echo tick-$i; i=$((i+1)); sleep 0.25; done; exit 7'
mcpvm boot --json --timeout 120 --vcpus 2 --kernel vmlinux --initrd initramfs.cpio --cmdline "quiet -- /bin/sh -c \"$g\"" \
  --serial file --serial-file "$MCPVM_OUT/snap_source.log" --snapshot-to snap > "$MCPVM_OUT/snap_source.json" &
pid=$!
i=0
while ! grep -q tick-10 "$MCPVM_OUT/snap_source.log" 2>/dev/null && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
kill -USR1 $pid
wait $pid
echo $? > "$MCPVM_OUT/snap_source.code"
stat -c %Y snap/memory > "$MCPVM_OUT/snap_mtime_before.txt"
# The third asks for no TSC-deadline timer: a restore gives the guest the
# CPUID it booted with (the timer's bit), whatever the caller says.
for n in 1 2 3; do
  no_tsc=; [ $n = 3 ] && no_tsc=--no-tsc-deadline
  mcpvm boot --json --timeout 120 --restore snap $no_tsc --serial file --serial-file "$MCPVM_OUT/snap_restored$n.log" \
    > "$MCPVM_OUT/snap_restored$n.json" &
  eval "p$n=\$!"
done
for n in 1 2 3; do
  eval "wait \$p$n"
  echo $? > "$MCPVM_OUT/snap_restored$n.code"
done
stat -c %Y snap/memory > "$MCPVM_OUT/snap_mtime_after.txt"
mkdir bad
sed 's/tick/tock/' snap/state > bad/state
ln -s ../snap/memory bad/memory
mcpvm boot --restore bad > /dev/null 2> "$MCPVM_OUT/snap_bad_stderr.txt"
echo $? > "$MCPVM_OUT/snap_bad.code"
SNAP
CASE_LIMIT=400 case_ snapshot sh snapshot.sh

# virtio-blk. root.ext4 (built by the test with mkfs.ext4 -d) holds
# hello.txt. Read-only: mounted and read; raw writes refused; a mount
# without -o ro falls back to read-only, so files cannot be created; the
# image is unchanged.
sha256sum root.ext4 > "$MCPVM_OUT/root_before.sha"
# (The kernel command line takes printable ASCII only: one line each.)
g='mkdir -p /mnt; mount -t ext4 -o ro /dev/vda /mnt && cat /mnt/hello.txt && echo ro=$(cat /sys/block/vda/ro) serial=$(cat /sys/block/vda/serial);'
g="$g"' if dd if=/dev/zero of=/dev/vda bs=512 count=1 conv=notrunc 2>/dev/null; then echo raw-write-accepted; else echo raw-write-refused; fi;'
g="$g"' umount /mnt; mount -t ext4 /dev/vda /mnt 2>/dev/null; if touch /mnt/new 2>/dev/null; then echo fs-write-accepted; else echo fs-write-refused; fi'
case_ disk_read $B --kernel vmlinux --initrd initramfs.cpio --disk root.ext4,id=mcpvm-root --cmdline "quiet -- /bin/sh -c \"$g\""
sha256sum root.ext4 > "$MCPVM_OUT/root_after.sha"

# Three disks at once: the read-only ext4 (vda), a raw scratch disk in
# page-cache mode (vdb) and one in O_DIRECT mode (vdc). The guest writes a
# marker at sector 8 of each writable disk; the host reads it back.
head -c 1048576 /dev/zero > scratch.img
head -c 1048576 /dev/zero > direct.img
g='for d in vdb vdc; do printf mcpvm-marker-$d | dd of=/dev/$d bs=512 seek=8 conv=notrunc,fsync 2>/dev/null || echo write-failed-$d; done;'
g="$g"' cat /sys/block/vda/ro /sys/block/vdb/ro /sys/block/vdc/ro /sys/block/vdb/size'
case_ disk_rw $B --kernel vmlinux --initrd initramfs.cpio --disk root.ext4 --disk scratch.img,rw \
  --disk direct.img,rw,cache=direct --cmdline "quiet -- /bin/sh -c \"$g\""
dd if=scratch.img bs=512 skip=8 count=1 2>/dev/null | tr -d '\000' > "$MCPVM_OUT/scratch_marker.txt"
dd if=direct.img bs=512 skip=8 count=1 2>/dev/null | tr -d '\000' > "$MCPVM_OUT/direct_marker.txt"

# A missing image: one clear error, exit 1, before anything boots.
case_ disk_missing $B --kernel vmlinux --initrd initramfs.cpio --disk /nonexistent.img
