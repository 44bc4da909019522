# `mcpvm run` scenarios on real KVM (testbed/run). Each case leaves
# $MCPVM_OUT/<case>.out/.err/.rc. Payload: bin/mcpvm, kernel/vmlinux,
# initramfs-test.cpio (agent, busybox, /bin/mcp-fixture).
set -u
. ./case.sh

# A real MCP client (rmcp, in mcpvm probe) against the fixture in a VM.
# With --vm the probe starts `mcpvm run` itself and adds the VM's phases;
# the robustness probes restart the VM after a crash and for "reopen",
# which a writable workspace makes worth running (what a run writes
# there outlives its VM; otherwise every start is the first again).
mkdir -p ws
case_ probe_fixture mcpvm probe --json --vm --robustness --answer-timeout 3 --workspace ws,rw \
  --call 'add={"a":2,"b":40}' --call 'echo={"text":"through vsock"}' \
  --call 'write={"bytes":100000}' -- /bin/mcp-fixture

# 16 MiB each way, hashes compared, with a reader that starts late so the
# writer must stall on credit and socket buffers.
head -c 16777216 /dev/urandom > big
sha256sum < big | cut -d' ' -f1 > "$MCPVM_OUT/big.sha"
case_ to_guest sh -c 'mcpvm run --timeout 600 -- /bin/sh -c "sleep 2; sha256sum" < big'
case_ from_guest sh -c 'mcpvm run --timeout 600 -- /bin/sh -c "head -c 16777216 /dev/urandom | tee /tmp/b | sha256sum >&2; cat /tmp/b" | (sleep 2; sha256sum)'

# The client pauses 12 s before the last 500 kB, so the server exits
# while its tail waits in the VM, the VMM and the host's socket: every
# byte must arrive. (Before, the VMM dropped what the host socket had not
# taken when both sides ended, and the VM powered off after fixed waits:
# about 4.04 of 4.4 MB came, every time.)
case_ slow_tail sh -c 'mcpvm run --timeout 600 -- /bin/sh -c "head -c 4400000 /dev/urandom | tee /tmp/b | sha256sum >&2; cat /tmp/b" | ({ dd bs=100000 count=39 iflag=fullblock status=none; sleep 12; cat; } | tee b | sha256sum; wc -c < b)'

# A writable workspace's copy comes back whole, each of five times: the
# VM must not power off while its tail is still in flight (it did, about
# one run in ten, before the agent waited for the host to end the stream).
case_ workspace_back sh -c 'for i in 1 2 3 4 5; do
  rm -rf wsb; mkdir wsb
  g=$(mcpvm run --timeout 300 --workspace wsb,rw -- /bin/sh -c "head -c 12000000 /dev/urandom > /workspace/big; sha256sum /workspace/big" < /dev/null | cut -d" " -f1)
  h=$(sha256sum wsb/big 2>/dev/null | cut -d" " -f1)
  echo "$i $g $h"
done'

# Without a network the guest still has its loopback: nobody listens on
# port 9, so the connection is refused (with lo down it was "Network is
# unreachable").
case_ loopback mcpvm run --timeout 120 -- /bin/sh -c 'nc 127.0.0.1 9 < /dev/null 2>&1; echo rc=$?'

# The server exits in the middle of a request: the client sees EOF and
# the VMM exits with the server's status.
case_ crash sh -c 'printf "%s\n" \
  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}" \
  "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}" \
  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"exit\",\"arguments\":{\"code\":7}}}" \
  | mcpvm run --timeout 120 -- /bin/mcp-fixture'

# The host reader goes away mid-stream: the server is cut off, nothing hangs.
case_ host_disconnect sh -c 'mcpvm run --timeout 120 -- /bin/sh -c "yes mcpvm" | head -c 1000 | wc -c'

progress "sigint and kill -9"
# Ctrl-C stops the VM cleanly (130). (Not a pipeline: ash's `wait PID`
# waits for the whole job.)
# It also inherits fd 7, which it must close; while it runs, every one of
# its threads is listed with its seccomp mode (2: filtered).
mcpvm run -- /bin/sleep 600 < /dev/null > "$MCPVM_OUT/sigint.out" 2> "$MCPVM_OUT/sigint.err" 7> inherited &
pid=$!
sleep 4
# Each open fd with what it points at: the VMM's own fds reuse low
# numbers (7 among them), so the test looks for the inherited file.
for f in /proc/$pid/fd/*; do
  echo "${f##*/} $(readlink $f)"
done > "$MCPVM_OUT/sigint_fds.txt"
for t in /proc/$pid/task/*; do
  echo "$(cat $t/comm) $(awk '/^Seccomp:/ {print $2}' $t/status)"
done > "$MCPVM_OUT/sigint_threads.txt"
# The jail, seen from outside: its namespaces, its root, its capabilities.
for ns in user mnt net ipc uts pid; do
  [ "$(readlink /proc/$pid/ns/$ns)" = "$(readlink /proc/self/ns/$ns)" ] && echo "$ns shared" || echo "$ns own"
done > "$MCPVM_OUT/jail_ns.txt"
(cd /proc/$pid/root && find . -maxdepth 6 | sort) > "$MCPVM_OUT/jail_root.txt" 2>&1
awk '/^Cap(Eff|Prm|Bnd):/' /proc/$pid/status > "$MCPVM_OUT/jail_caps.txt"
kill -INT $pid
wait $pid
echo $? > "$MCPVM_OUT/sigint.rc"

# A jailed run's sockets live in the jail: kill -9 leaves nothing.
mcpvm run -- /bin/sleep 600 < /dev/null > /dev/null 2>&1 &
pid=$!
sleep 4
kill -9 $pid
wait $pid 2>/dev/null
ls -A /tmp/mcpvm-0 > "$MCPVM_OUT/after_kill9_jailed.txt" 2>/dev/null
# Unjailed, kill -9 leaves a run directory; the next run removes it.
mcpvm run --jail off -- /bin/sleep 600 < /dev/null > /dev/null 2>&1 &
pid=$!
sleep 4
kill -9 $pid
wait $pid 2>/dev/null
ls -A /tmp/mcpvm-0 > "$MCPVM_OUT/after_kill9.txt"
echo | mcpvm run -- /bin/true > /dev/null 2>&1

# No socket files are left behind.
ls -A /tmp/mcpvm-0 > "$MCPVM_OUT/leftovers.txt" 2>&1

# The server outgrows a small VM: the OOM killer ends it and the user is told.
# Observed: what the whoami call did, and what the server did at start.
case_ observed mcpvm probe --json --vm --profile observe --only-given --call 'whoami={}' -- /bin/mcp-fixture
# A deliberately vulnerable server, attacked (--security: observed, with
# canaries planted): its prefix-checked read_file reaches
# /workspace_secret, run hands its text to a shell, fetch connects
# anywhere; echo is sound.
mkdir -p vws && echo 'notes' > vws/notes.txt
case_ vulnerable mcpvm probe --json --vm --security --workspace vws --only-given \
  --sarif "$MCPVM_OUT/vulnerable.sarif" --fail-on high \
  --call 'read_file={"path":"/workspace_secret/secret.txt"}' --call 'echo={"text":"hi"}' \
  --call 'run={"text":"hi"}' --call 'fetch={"url":"http://example.invalid/"}' \
  -- /bin/mcp-broken vulnerable
# A secret given by file reaches the server by environment only: no
# process's argv shows it while the probe runs (sampled every 50 ms; the
# pattern is written so that the sampler's own argv does not match it),
# and the probe's result, where the server prints it on stderr, names it.
printf 'MCPVM_TEST_TOKEN=tok-5f2c9a7e-not-in-argv\n' > secret.env
(while :; do cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -c 'tok-5f2c9a7[e]'; sleep 0.05; done > "$MCPVM_OUT/secret_argv_hits.txt") &
sampler=$!
case_ secret mcpvm probe --json --vm --env-file secret.env --secret MCPVM_TEST_TOKEN \
  --only-given --call 'echo={"text":"x"}' \
  -- /bin/sh -c 'echo "token=$MCPVM_TEST_TOKEN" >&2; exec /bin/mcp-fixture'
kill $sampler; wait $sampler 2>/dev/null
case_ oom mcpvm probe --json --step-timeout 120 --only-given --call 'alloc={"mib":512}' -- mcpvm run --mem 96 -- /bin/mcp-fixture

# Phase times of one run.
case_ timings sh -c 'echo hi | mcpvm run --timings "$MCPVM_OUT/timings.json" -- /bin/cat'

# A guest kernel that panics is said with the console's last lines, the
# only account of why (here an initrd with nothing in it: no init).
head -c 4096 /dev/zero > empty.cpio
case_ panic_console mcpvm run --timeout 120 --initrd empty.cpio -- /bin/true
