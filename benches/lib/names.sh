# shellcheck shell=bash
# Sourced by the benches that hand server names (from a catalogue, a
# journal or their command line) to a testbed scenario: a name must be a
# catalogue's server name (lowercase letters, digits and '-', at most
# 64) before it goes anywhere near a shell, and then it goes as data.
#   check_server_names BENCH NAME...   exits 1 saying which name is not one
check_server_names() {
  local bench=$1 n
  shift
  for n in "$@"; do
    if ! [[ $n =~ ^[a-z0-9-]{1,64}$ ]]; then
      echo "$bench: $(printf '%q' "$n") is not a server name (lowercase letters, digits and '-', at most 64, as the catalogue allows)" >&2
      exit 1
    fi
  done
}
