# shellcheck shell=bash
# Sourced by the benches that measure Firecracker beside us (a peer for
# benchmarks only, ../shared/peers/firecracker; never shipped).
#   firecracker_peer BENCH DEST WITHOUT
# Sets `peer` to the testbed/run arguments that ship the binary as DEST
# in the payload, or to nothing, saying on stderr that BENCH measures
# WITHOUT it. MCPVM_FIRECRACKER=PATH names another binary.
# shellcheck disable=SC2034 # peer is read by the bench that sources this
firecracker_peer() {
  local fc=${MCPVM_FIRECRACKER:-$top/../shared/peers/firecracker/firecracker}
  peer=()
  if [ -x "$fc" ]; then
    peer=(--file "$fc:$2")
  else
    echo "$1: no Firecracker at $fc: measuring $3 only" >&2
  fi
}
