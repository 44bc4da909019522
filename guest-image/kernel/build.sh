#!/usr/bin/env bash
# Builds the mcpvm guest kernel from Debian's linux-source-6.12 package:
# tinyconfig + mcpvm.config, built-in only. The result is cached under a key
# made of every input (source package version, config fragment, this script),
# so an unchanged kernel costs one hash and a directory lookup.
#
# Prints the cache directory holding vmlinux, bzImage and .config.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${MCPVM_CACHE:-${HOME:-/root}/.cache/mcpvm}
tarball=/usr/src/linux-source-6.12.tar.xz

log() { echo "kernel: $*" >&2; }

if [ ! -f "$tarball" ]; then
  echo "kernel: $tarball is missing; install it with 'apt-get install linux-source-6.12' (scripts/setup does)" >&2
  exit 1
fi

src_version=$(dpkg-query -W -f='${Version}' linux-source-6.12)
key=$( { echo "$src_version"; cat "$here/mcpvm.config" "$here/build.sh"; } | sha256sum | cut -c1-16)
out="$cache/kernel/$key"
if [ -f "$out/vmlinux" ] && [ -f "$out/bzImage" ]; then
  log "cached $out"
  echo "$out"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/mcpvm-kernel.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building linux-source $src_version with mcpvm.config (key $key); about 4 minutes on 2 cores"
tar -C "$work" -xf "$tarball"
cd "$work"/linux-source-6.12
make -s tinyconfig
./scripts/kconfig/merge_config.sh -m .config "$here/mcpvm.config" >/dev/null
make -s olddefconfig

# merge_config silently drops options whose dependencies are unmet: check
# that every option we ask for is set as asked.
missing=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  name=${line%%=*}; want=${line#*=}
  if [ "$want" = n ]; then
    grep -q "^$name=" .config && { log "$name is set but we asked for n"; missing=1; }
  else
    grep -qx "$name=$want" .config || { log "$name=$want did not take (dependency unmet?)"; missing=1; }
  fi
done < "$here/mcpvm.config"
[ "$missing" = 0 ] || { echo "kernel: config fragment not applied as written" >&2; exit 1; }

make -s -j"$(nproc)" vmlinux bzImage KBUILD_BUILD_TIMESTAMP="@0" \
  KBUILD_BUILD_USER=mcpvm KBUILD_BUILD_HOST=mcpvm >&2

mkdir -p "$cache/kernel"
stage=$(mktemp -d "$cache/kernel/.stage.XXXXXX")
cp vmlinux arch/x86/boot/bzImage .config "$stage/"
rm -rf "$out"
mv "$stage" "$out"
log "built $out"
echo "$out"
