#!/usr/bin/env bash
# Packs a guest initramfs (newc cpio, uncompressed: it is small, and the
# kernel then copies instead of decompressing).
#   --agent PATH   the static guest agent, installed as /init
#   --busybox      add Debian's static busybox and its applet links, so a
#                  command given after `--` on the kernel command line has a
#                  shell and tools to run
#   --file SRC:DEST  add a file at DEST inside the image (repeatable)
#   --out FILE     written atomically (temp file, then rename)
set -euo pipefail
agent= busybox=0 out= extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --agent) agent=$2; shift 2 ;;
    --busybox) busybox=1; shift ;;
    --out) out=$2; shift 2 ;;
    --file) extra+=("$2"); shift 2 ;;
    *) echo "initramfs: unknown option $1 (use --agent PATH [--busybox] --out FILE)" >&2; exit 2 ;;
  esac
done
[ -n "$agent" ] && [ -n "$out" ] || { echo "initramfs: --agent and --out are required" >&2; exit 2; }
[ -x "$agent" ] || { echo "initramfs: agent $agent is not an executable file" >&2; exit 1; }

root=$(mktemp -d "${TMPDIR:-/tmp}/mcpvm-initramfs.XXXXXX")
trap 'rm -rf "$root" "$out.tmp"' EXIT
mkdir -p "$root"/{bin,dev,proc,sys,tmp,run,etc}
install -m 0755 "$agent" "$root/init"
if [ "$busybox" = 1 ]; then
  bb=/bin/busybox
  [ -x "$bb" ] || { echo "initramfs: $bb missing; install busybox-static (scripts/setup does)" >&2; exit 1; }
  install -m 0755 "$bb" "$root/bin/busybox"
  for applet in $("$bb" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done
fi
for f in "${extra[@]}"; do
  src=${f%%:*}; dest=${f#*:}
  [ -f "$src" ] || { echo "initramfs: $src does not exist" >&2; exit 1; }
  mkdir -p "$root/$(dirname "$dest")"
  install -m 0755 "$src" "$root/$dest"
done
# Fixed mtimes and sorted names: the same inputs give the same bytes.
find "$root" -exec touch -h -d @0 {} +
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 --reproducible) > "$out.tmp"
mv "$out.tmp" "$out"
trap 'rm -rf "$root"' EXIT
echo "initramfs: $out ($(du -h "$out" | cut -f1))" >&2
