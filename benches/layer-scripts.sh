#!/usr/bin/env bash
# What running install scripts in a microVM costs a layer build
# (docs/catalogue.md, "Installs run no package code on the host"): the
# same entry built with its scripts in the VM and with ignore_scripts
# (the host's fetch and unpack alone, what every build does first),
# alternating, each in a fresh store so nothing is cached but npm's own
# download cache (warmed by one untimed build first). Where /dev/kvm
# cannot boot Linux the VM runs in the nested testbed host, whose boot
# is part of what is measured.
#   benches/layer-scripts.sh [RUNS]     (default 3)
# Prints a Markdown table.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
"$top/scripts/build" >&2
mcpvm=$top/target/mcpvm/bin/mcpvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$top/mcpvm/tests/fixtures/npm-scripted" >/dev/null)
entry() { # name package version command extra
  printf '[servers.%s]\npackage = "%s"\nversion = "%s"\nruntime = "node"\ncommand = "%s"\n%s\n\n' "$@"
}
{
  entry fixture mcpvm-fixture-scripted 1.0.0 mcpvm-fixture-scripted \
    "$(printf 'source = "mcpvm-fixture-scripted-1.0.0.tgz"\ninstall_env = { MCPVM_FIXTURE_SKIP_DOWNLOAD = "1" }')"
  entry puppeteer @modelcontextprotocol/server-puppeteer 2025.5.12 mcp-server-puppeteer \
    'install_env = { PUPPETEER_SKIP_DOWNLOAD = "1" }'
} > "$work/vm.toml"
sed 's/^\(install_env = .*\)$/\1\nignore_scripts = true/' "$work/vm.toml" > "$work/host.toml"
build() { # catalogue server -> seconds
  local store=$work/store-$RANDOM t0 t1
  t0=$EPOCHREALTIME
  "$mcpvm" image build --catalogue "$work/$1.toml" --catalogue-only --servers "$2" --images "$store" >/dev/null 2>"$work/last.err" \
    || { cat "$work/last.err" >&2; exit 1; }
  t1=$EPOCHREALTIME
  rm -rf "$store"
  python3 -c "print(round($t1 - $t0, 2))"
}
echo "warming npm's cache" >&2
build host puppeteer >/dev/null
echo "| entry | host only (ignore_scripts), s | scripts in a microVM, s | ratio |"
echo "|---|---:|---:|---:|"
for s in fixture puppeteer; do
  h=() v=()
  for i in $(seq "$runs"); do
    h+=("$(build host "$s")"); v+=("$(build vm "$s")")
    echo "$s run $i: host ${h[-1]} s, vm ${v[-1]} s" >&2
  done
  med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  mh=$(med "${h[@]}"); mv=$(med "${v[@]}")
  printf '| %s | %.1f (%s) | %.1f (%s) | %.0f× |\n' "$s" "$mh" "$(IFS=/; echo "${h[*]}" | sed 's/\([0-9]*\.[0-9]\)[0-9]*/\1/g')" \
    "$mv" "$(IFS=/; echo "${v[*]}" | sed 's/\([0-9]*\.[0-9]\)[0-9]*/\1/g')" "$(python3 -c "print($mv / $mh)")"
done
