#!/usr/bin/env bash
# The audit's cost before and after, side by side in one run (issue 49;
# docs/benchmarks.md, "The cost of a server, before and after"): the
# corpus audited by mcpvm as built at BEFORE (a commit) and by this
# checkout, each on a testbed host of its own, at the same time, so that
# both see the same machine and its load. Both sides are this checkout's
# benches/ecosystem.sh with one shard (the same scenario, testbed and
# phase split), each with its own build of mcpvm (MCPVM_ECOSYSTEM_BUILD).
#   benches/side-by-side.sh BEFORE [SERVERS]
# MCPVM_BENCH_OUT=DIR (default: a temporary directory) gets before/ and
#   after/ (each an ecosystem bench's output, its runs.tgz included) and
#   phases.md, the two phase tables and their ratios
#   (benches/lib/cell-time.py).
# MCPVM_SIDE_RESUME=DIR resumes both sides from an earlier run's DIR.
# MCPVM_SIDE_AFTER=COMMIT audits the after side with that commit's build
#   (in a worktree, as BEFORE is) instead of this checkout's: a pass
#   that spans sittings resumes with the build it began with.
# MCPVM_ECOSYSTEM_DEADLINE=SECONDS bounds each side's audit (the bench's
#   own default otherwise); a partial pass compares the servers both
#   sides recorded whole (cell-time.py --against).
# BEFORE (and MCPVM_SIDE_AFTER's commit) is checked out (detached) in a
# worktree under the cache, ${MCPVM_CACHE:-~/.cache/mcpvm}/before/COMMIT,
# and built there by its own scripts/build. The before side's layers go to a store of its own, made from this
# checkout's by hard links, so that a layer whose key did not change is
# not installed again, and a build of the old one never prunes the new's.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "side-by-side: usage: benches/side-by-side.sh BEFORE [SERVERS]" >&2; exit 1; }
before=$(git -C "$top" rev-parse --verify --quiet "$1^{commit}") \
  || { echo "side-by-side: $(printf '%q' "$1") is not a commit of this repository" >&2; exit 1; }
after=
if [ -n "${MCPVM_SIDE_AFTER:-}" ]; then
  after=$(git -C "$top" rev-parse --verify --quiet "$MCPVM_SIDE_AFTER^{commit}") \
    || { echo "side-by-side: MCPVM_SIDE_AFTER=$(printf '%q' "$MCPVM_SIDE_AFTER") is not a commit of this repository" >&2; exit 1; }
fi
servers=${2:-}
if [ -n "$servers" ]; then
  . "$top/benches/lib/names.sh"
  IFS=, read -r -a names <<< "$servers"
  check_server_names side-by-side "${names[@]}"
fi
cache=${MCPVM_CACHE:-$HOME/.cache/mcpvm}
# A commit's worktree under the cache, checked out once, built each time.
checkout() {
  local commit=$1 dir=$2 side=$3
  if [ ! -d "$dir/.git" ] && [ ! -f "$dir/.git" ]; then
    mkdir -p "$cache/before"
    git -C "$top" worktree add --detach "$dir" "$commit" >&2
  fi
  echo "side-by-side: building $commit ($side) in $dir" >&2
  "$dir/scripts/build" >&2
}
old=$cache/before/$before
checkout "$before" "$old" before
new=$top
if [ -n "$after" ]; then
  new=$cache/before/$after
  checkout "$after" "$new" after
else
  "$top/scripts/build" >&2
fi
store=${MCPVM_CORPUS_IMAGES:-$cache/corpus-images}
old_store=$cache/corpus-images-$before
if [ ! -d "$old_store" ] && [ -d "$store" ]; then
  cp -al "$store" "$old_store.tmp" && mv "$old_store.tmp" "$old_store"
fi
out=${MCPVM_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out/before" "$out/after"
resume=${MCPVM_SIDE_RESUME:-}
# Both sides' layers first, one after the other: a side still installing
# would load the machine the other measures on.
for side in before after; do
  case $side in before) dir=$old s=$old_store ;; after) dir=$new s=$store ;; esac
  echo "side-by-side: $side: layers into $s" >&2
  args=(--catalogue "$top/guest-image/corpus/popular.toml" --catalogue-only --images "$s")
  [ -n "$servers" ] && args+=(--servers "$servers")
  "$dir/target/mcpvm/bin/mcpvm" --json image build "${args[@]}" > "$out/$side.build.json" \
    || echo "side-by-side: $side: some layers did not build; their rows say why" >&2
done
# Two testbed hosts of the size two shards get.
export MCPVM_TESTBED_MEM=${MCPVM_TESTBED_MEM:-10556}
pids=()
for side in before after; do
  case $side in before) dir=$old s=$old_store ;; after) dir=$new s=$store ;; esac
  env=(MCPVM_ECOSYSTEM_SHARDS=1 MCPVM_BENCH_OUT="$out/$side" MCPVM_CORPUS_IMAGES="$s"
       MCPVM_ECOSYSTEM_BUILD="$dir/target/mcpvm")
  [ -n "$resume" ] && env+=(MCPVM_ECOSYSTEM_RESUME="$resume/$side")
  env "${env[@]}" "$top/benches/ecosystem.sh" ${servers:+"$servers"} \
    > "$out/$side.log" 2> >(sed -u "s/^/$side: /" >&2) &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || echo "side-by-side: a side failed; its log says why ($out/before.log, $out/after.log)" >&2
runs() { ls "$1"/shard-*/runs*.tgz "$1"/runs*.tgz 2>/dev/null || true; }
mapfile -t before_runs < <(runs "$out/before")
mapfile -t after_runs < <(runs "$out/after")
python3 "$top/benches/lib/cell-time.py" --results "$out/before/results.jsonl" "${before_runs[@]}" \
  --against "$out/after/results.jsonl" --against-runs "${after_runs[@]}" > "$out/phases.md"
echo "side-by-side: phases before and after in $out/phases.md" >&2
