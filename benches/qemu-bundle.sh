#!/usr/bin/env bash
# Bundles Debian's qemu-system-x86_64 with its shared libraries and the
# microvm BIOS into DIR, with a `DIR/qemu` wrapper, so the testbed host
# (busybox, no Debian userland) can run it for the microvm comparison.
set -euo pipefail
dir=${1:?usage: qemu-bundle.sh DIR}
q=$(command -v qemu-system-x86_64) || { echo "qemu-bundle: qemu-system-x86_64 missing; run scripts/setup" >&2; exit 1; }
rm -rf "$dir"; mkdir -p "$dir/lib" "$dir/share"
cp -L "$q" "$dir/qemu-system-x86_64"
ldd "$q" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | while read -r lib; do cp -L "$lib" "$dir/lib/"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$dir/lib/"
cp -L /usr/share/qemu/bios-microvm.bin "$dir/share/"
cat > "$dir/qemu" <<'W'
#!/bin/sh
d=$(dirname "$0")
exec "$d/lib/ld-linux-x86-64.so.2" --library-path "$d/lib" "$d/qemu-system-x86_64" -L "$d/share" "$@"
W
chmod +x "$dir/qemu"
