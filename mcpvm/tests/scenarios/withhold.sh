# Withholding profiles enforced in the guest (testbed/run). Each case
# runs busybox in the test initramfs under one profile and leaves its
# output, plus the agent's events in <case>.events.
# Payload: bin/mcpvm, kernel/vmlinux, initramfs-test.cpio.
set -u
. ./case.sh
R="mcpvm run --timeout 120"
ev() { echo "--events=$MCPVM_OUT/$1.events"; }

case_ ro_root $R --profile ro-root+root $(ev ro_root) -- /bin/sh -c 'touch /x; echo root=$?; touch /tmp/x; echo tmp=$?'
case_ no_tmp $R --profile no-tmp+root -- /bin/sh -c 'touch /tmp/x; echo tmp=$?; touch /x; echo root=$?'
case_ deny_exec $R --profile deny-exec $(ev deny_exec) -- /bin/sh -c 'echo started; /bin/true; echo rc=$?'
case_ deny_net $R --profile deny-net-sockets $(ev deny_net) -- /bin/sh -c 'nc 127.0.0.1 9 < /dev/null; echo rc=$?'
case_ baseline $R --profile baseline $(ev baseline) -- /bin/sh -c 'nproc; cat /sys/class/misc/hw_random/rng_current; echo hi > /tmp/x'
case_ observed_deny $R --profile baseline+deny-exec $(ev observed_deny) -- /bin/sh -c 'echo started; /bin/true; echo rc=$?'
case_ no_rng $R --profile no-rng -- /bin/sh -c 'cat /sys/class/misc/hw_random/rng_current 2>&1; nproc'
case_ tiny_mem $R --profile tiny-mem+one-cpu -- /bin/sh -c 'grep MemTotal /proc/meminfo; nproc'
case_ low_fds $R --profile low-fds -- /bin/sh -c 'ulimit -n'
case_ no_env $R --profile no-env --env ONLY=this -- /bin/env
case_ deny_group $R --profile deny-fs-write $(ev deny_group) -- /bin/sh -c 'mkdir /tmp/d; echo rc=$?'
# A server that does not exit when its stdin closes is stopped with its
# VM (--timeout here, the probe's exit grace in an audit): its calls so
# far are sent while it runs, a few seconds after the close.
case_ keeps_running mcpvm run --timeout 30 --profile baseline $(ev keeps_running) -- /bin/sh -c 'cat > /dev/null; echo closed; exec sleep 600'
case_ unknown $R --profile ro-rot -- /bin/true
ls -A /tmp/mcpvm-0 > "$MCPVM_OUT/leftovers.txt" 2>&1
