#!/usr/bin/env bash
# The VMM's own memory on real KVM (the testbed where /dev/kvm is
# kvm_pvm): RSS less the guest's pages, split into the binary's file
# pages and anonymous memory, for `mcpvm run` and for the same VM under
# Firecracker (../shared/peers/firecracker, a peer for benchmarks only)
# behind the same host side (`mcpvm bench peer-run`), alternating
# rounds, after one warm-up round that is not reported. Same VM in every
# run: 256 MiB, 1 vCPU, the test initramfs, `/bin/sh -c 'sleep 14'`,
# smaps read 10 s after the start.
#   benches/vmm-memory.sh [ROUNDS]   a line per process and round as it goes,
#                                    then a Markdown table of the medians
# OLD_BUILD=DIR adds DIR/bin/mcpvm (an older checkout's target/mcpvm) as
# a third VMM, for before/after, its lines tagged OLD_LABEL (default
# "old"); MCPVM_FIRECRACKER=PATH names another Firecracker binary.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5}
"$top/scripts/build" >&2
t=$top/target/mcpvm
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
files=(--file "$t/bin/mcpvm:bin/mcpvm" --file "$t/bin/mcpvm-tools:bin/mcpvm-tools"
       --file "$t/kernel/vmlinux:kernel/vmlinux" --file "$t/initramfs-test.cpio:initramfs-test.cpio"
       --file "$work/scenario.sh:scenario.sh")
. "$top/benches/lib/firecracker.sh"
firecracker_peer vmm-memory bin/firecracker mcpvm
files+=("${peer[@]}")
if [ -n "${OLD_BUILD:-}" ]; then
  [ -x "$OLD_BUILD/bin/mcpvm" ] || { echo "vmm-memory: $OLD_BUILD/bin/mcpvm is missing: give an older checkout's target/mcpvm" >&2; exit 1; }
  files+=(--file "$OLD_BUILD/bin/mcpvm:old/bin/mcpvm")
  # Builds from before the split into two binaries have no mcpvm-tools.
  [ -e "$OLD_BUILD/bin/mcpvm-tools" ] && files+=(--file "$OLD_BUILD/bin/mcpvm-tools:old/bin/mcpvm-tools")
fi
cat > "$work/scenario.sh" <<'SCEN'
set -u
. ./case.sh
# `own TAG PID`: RSS less the guest's mapping (the one mapping of 256 MiB
# or more), split into file-backed pages and anonymous ones. (With one
# VMM running, its file pages are its alone: Private_* would count them;
# `mcpvm bench density` reads private pages with many VMMs sharing.)
own() {
  awk -v tag="$1" '
    /^[0-9a-f]+-[0-9a-f]+ / { path=$6; size=0 }
    /^Size:/ { size=$2 }
    /^Rss:/ { rss=$2; total+=rss; if (size >= 262144) guest+=rss; else if (path ~ /\//) file+=rss; else anon+=rss }
    END { printf "%s own=%d file=%d anon=%d guest=%d KiB\n", tag, total-guest, file, anon, guest }
  ' "/proc/$2/smaps"
}
# Run in the background, it replaces its subshell: $! is the VMM's pid.
vm() { exec "$@" --kernel ./kernel/vmlinux --initrd ./initramfs-test.cpio --mem 256 --vcpus 1 -- /bin/sh -c 'sleep 14' < /dev/null > /dev/null 2>&1; }
round() {
  vm ./bin/mcpvm run & pid=$!; sleep 10
  own mcpvm "$pid"; wait "$pid"
  if [ -x old/bin/mcpvm ]; then
    vm ./old/bin/mcpvm run & pid=$!; sleep 10
    own "$OLD_LABEL" "$pid"; wait "$pid"
  fi
  if [ -x bin/firecracker ]; then
    vm ./bin/mcpvm-tools bench peer-run --firecracker=./bin/firecracker & pid=$!; sleep 10
    fc=
    for p in /proc/[0-9]*; do
      [ "$(cat "$p/comm" 2>/dev/null)" = firecracker ] && fc=${p#/proc/}
    done
    own firecracker "$fc"; own firecracker-host-side "$pid"; wait "$pid"
  fi
}
round > /dev/null
i=1
while [ "$i" -le "$ROUNDS" ]; do
  round | tee -a rounds.txt | sed "s/^/round $i: /" | while read -r l; do progress "$l"; done
  i=$((i + 1))
done
# Medians per process over the rounds, and each VMM's to Firecracker's.
sort rounds.txt | awk '
  function med(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { tag = $1; if (!(tag in own)) order[++tags] = tag
    for (f = 2; f <= 4; f++) { split($f, kv, "="); v[tag, kv[1]] = v[tag, kv[1]] " " kv[2] }
    own[tag] = 1 }
  END {
    fc = ("firecracker" in own) ? med(v["firecracker", "own"]) : 0
    print "| process (medians of " ENVIRON["ROUNDS"] " rounds, KiB) | RSS − guest pages | file pages | anonymous | / Firecracker |"
    print "|---|---:|---:|---:|---:|"
    for (i = 1; i <= tags; i++) {
      t = order[i]; o = med(v[t, "own"])
      printf "| %s | %d | %d | %d | %s |\n", t, o, med(v[t, "file"]), med(v[t, "anon"]), \
        (fc && t != "firecracker-host-side") ? sprintf("%.2f", o / fc) : "-"
    }
  }'
SCEN
"$top/testbed/run" --timeout $((600 + rounds * 120)) "${files[@]}" -- env ROUNDS="$rounds" OLD_LABEL="${OLD_LABEL:-old}" sh scenario.sh
