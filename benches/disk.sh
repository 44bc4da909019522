#!/usr/bin/env bash
# virtio-blk cache modes on real KVM (the testbed where /dev/kvm is
# kvm_pvm): the guest reads a 64 MiB image twice (cold, then warm: the
# second read shows the host page cache at work in page mode) and writes
# 64 MiB with fsync, once per mode, alternating, RUNS times.
#   benches/disk.sh [RUNS]   prints one line per run and mode
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
"$top/scripts/build" >&2
t=$top/target/mcpvm
scenario=$(mktemp)
trap 'rm -f "$scenario"' EXIT
cat > "$scenario" <<SCEN
# No double quotes inside: the kernel command line cannot nest them.
g='read t0 x < /proc/uptime; dd if=/dev/vda of=/dev/null bs=1M 2>/dev/null; read t1 x < /proc/uptime;'
g="\$g"' dd if=/dev/vda of=/dev/null bs=1M 2>/dev/null; read t2 x < /proc/uptime;'
g="\$g"' dd if=/dev/zero of=/dev/vdb bs=1M count=64 conv=fsync 2>/dev/null; read t3 x < /proc/uptime;'
g="\$g"' echo RESULT cold_read \$t0 \$t1 warm_read \$t1 \$t2 write \$t2 \$t3'
for i in \$(seq $runs); do
  for mode in page direct; do
    head -c 67108864 /dev/urandom > r.img; head -c 67108864 /dev/zero > w.img; sync
    echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    out=\$(mcpvm boot --serial stdout --kernel vmlinux --initrd initramfs.cpio --disk r.img,cache=\$mode \
      --disk w.img,rw,cache=\$mode --cmdline "quiet -- /bin/sh -c \\"\$g\\"" | grep RESULT)
    echo "run \$i \$mode \$out"
  done
done
SCEN
"$top/testbed/run" --timeout 1800 --file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools" --file "$t/kernel/vmlinux:vmlinux" \
  --file "$t/initramfs-test.cpio:initramfs.cpio" --file "$scenario:scenario.sh" -- sh scenario.sh \
  | awk '/RESULT/ { printf "%s %s %-6s cold read %.2f s  warm read %.2f s  write+fsync %.2f s\n", $1, $2, $3, $7-$6, $10-$9, $13-$12 }'
