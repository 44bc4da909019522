#!/usr/bin/env python3
"""Where an audit's cells spent their time, from each cell's whole probe
result (docs/benchmarks.md, "The cost of a server").

    cell-time.py --results results.jsonl RUNS_DIR_OR_TGZ...
    cell-time.py --results BEFORE.jsonl RUNS... --against AFTER.jsonl --against-runs RUNS...

RUNS: an audit's `runs/` directory, or the `runs.tgz` the ecosystem bench
brings back from each shard. A cell's wall time (its record's, from the
probe's start to its end) is split into phases read from its steps:

- start: spawn to the handshake's answer (in a microVM, the boot too),
  less the time an unanswered `server/discover` waited;
- discover wait: a `server/discover` that got no answer in time (or the
  server closed on it), after which the server starts again for
  `initialize`;
- listings: tools/list and the other lists;
- calls: `tools/call:*` steps (first and varied calls);
- attacks: `attack:*` steps (the security column);
- robustness: the hostile-input probes;
- the rest: the server's exit, the VM's power-off, reading results.

Numbers only: names and outcomes come from the records, escaped.
"""
import argparse
import collections
import json
import os
import sys
import tarfile

import mdcell
from journal import records

PHASES = ["start", "discover wait", "listings", "calls", "attacks", "robustness", "the rest"]
LISTS = {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}
# A probe result of a browser server with its screenshots is tens of MB;
# past this a result is not read (its cell counts under "the rest").
MAX_RESULT = 256 << 20


def results(sources):
    """{(server, profile): probe result} of every first run found."""
    out = {}

    def take(name, read):
        parts = name.replace("\\", "/").split("/")
        if len(parts) < 2 or not parts[-1].endswith(".json") or parts[-1].endswith(".request.json"):
            return
        profile = parts[-1][: -len(".json")]
        if ".run" in profile:
            return
        try:
            out[(parts[-2], profile)] = json.loads(read())
        except ValueError:
            pass

    for src in sources:
        if os.path.isdir(src):
            for root, _, files in os.walk(src):
                for f in files:
                    p = os.path.join(root, f)
                    if os.path.getsize(p) <= MAX_RESULT:
                        take(p, lambda p=p: open(p, "rb").read())
        else:
            with tarfile.open(src) as t:
                for m in t:
                    if m.isfile() and m.size <= MAX_RESULT:
                        take(m.name, lambda m=m: t.extractfile(m).read())
    return out


def ms(v):
    return float(v) if isinstance(v, (int, float)) else 0.0


def phases(record, result):
    """{phase: ms} of one cell; the rest is what the steps do not cover."""
    wall = ms((record.get("timings") or {}).get("wall_ms"))
    got = collections.Counter()
    steps = result.get("steps") if isinstance(result, dict) else None
    if not isinstance(steps, list):
        got["the rest"] = wall
        return got
    handshake_at = None
    for s in steps:
        if not isinstance(s, dict):
            continue
        name, took = str(s.get("step", "")), ms(s.get("took_ms"))
        if name in ("initialize", "server/discover") and s.get("outcome") == "ok" and handshake_at is None:
            handshake_at = ms(s.get("at_ms"))
        if name == "server/discover" and s.get("outcome") in ("timeout", "closed"):
            # The server started again for initialize: this wait is lost.
            # (An error answer is followed by initialize on the same
            # start, which the handshake's at_ms already counts.)
            got["discover wait"] += took
        elif name in LISTS:
            got["listings"] += took
        elif name.startswith("tools/call:"):
            got["calls"] += took
        elif name.startswith("attack:"):
            got["attacks"] += took
    rob = result.get("robustness")
    if isinstance(rob, list):
        got["robustness"] += sum(ms(p.get("took_ms")) for p in rob if isinstance(p, dict))
    if handshake_at is not None:
        # at_ms counts from the last spawn: after a discover that waited,
        # that is the second start's.
        got["start"] += handshake_at
    covered = sum(got.values())
    got["the rest"] += max(0.0, wall - covered)
    return got


def tally(recs, res, keys):
    """Phase totals, by profile and by server, over the cells `keys`."""
    total = collections.Counter()
    by_profile = collections.defaultdict(collections.Counter)
    by_server = collections.Counter()
    missing = 0
    for key in keys:
        r = recs[key]
        if key not in res:
            missing += 1
        got = phases(r, res.get(key))
        total.update(got)
        by_profile[key[1]].update(got)
        by_server[key[0]] += sum(got.values())
    return total, by_profile, by_server, missing


def table(recs, res, keys):
    total, by_profile, by_server, missing = tally(recs, res, keys)
    servers = len({s for s, _ in keys})
    whole = sum(total.values()) or 1.0
    out = [
        f"{len(keys)} cells of {servers} servers; {missing} without a probe result (counted under the rest).",
        "",
        "| phase | seconds | share | a server |",
        "|---|---:|---:|---:|",
    ]
    for ph in PHASES:
        out.append(f"| {ph} | {total[ph] / 1000:.0f} | {100 * total[ph] / whole:.0f} % | {total[ph] / 1000 / max(servers, 1):.1f} s |")
    out.append(f"| all | {whole / 1000:.0f} | | {whole / 1000 / max(servers, 1):.1f} s |")
    out += ["", "| profile | cells | " + " | ".join(PHASES) + " |", "|---|---:|" + "---:|" * len(PHASES)]
    for prof, c in sorted(by_profile.items()):
        n = sum(1 for s, q in keys if q == prof)
        out.append(f"| {mdcell.md(prof, 30)} | {n} | " + " | ".join(f"{c[ph] / 1000:.0f}" for ph in PHASES) + " |")
    out += ["", "| slowest servers | seconds | share |", "|---|---:|---:|"]
    for s, t in by_server.most_common(8):
        out.append(f"| {mdcell.md(s, 40)} | {t / 1000:.0f} | {100 * t / whole:.0f} % |")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", required=True)
    p.add_argument("runs", nargs="*")
    # Side by side (benches/side-by-side.sh): the same servers audited by
    # another build in the same run, compared over the servers whose every
    # cell both sides recorded.
    p.add_argument("--against", help="the other side's results.jsonl")
    p.add_argument("--against-runs", nargs="*", default=[])
    a = p.parse_args()
    recs = records(a.results)
    res = results(a.runs)
    if not a.against:
        print("\n".join(table(recs, res, sorted(recs))))
        return 0
    other = records(a.against)
    other_res = results(a.against_runs)

    def cells_by_server(rs):
        by = collections.defaultdict(set)
        for s, q in rs:
            by[s].add(q)
        return by

    mine, theirs = cells_by_server(recs), cells_by_server(other)
    # A server both finished: every cell one side has, the other has too.
    common = sorted(s for s in mine if s in theirs and mine[s] == theirs[s])
    left = [k for k in sorted(recs) if k[0] in common]
    right = [k for k in sorted(other) if k[0] in common]
    before, _, _, _ = tally(recs, res, left)
    after, _, _, _ = tally(other, other_res, right)
    n = max(len(common), 1)
    out = [
        f"{len(common)} servers both sides recorded whole ({len(left)} cells); "
        f"{len(set(mine) - set(common))} before and {len(set(theirs) - set(common))} after left out.",
        "",
        "| phase | before, a server | after, a server | after / before |",
        "|---|---:|---:|---:|",
    ]
    for ph in PHASES + ["all"]:
        b = sum(before.values()) if ph == "all" else before[ph]
        f = sum(after.values()) if ph == "all" else after[ph]
        ratio = f"{f / b:.2f}" if b else "—"
        out.append(f"| {ph} | {b / 1000 / n:.1f} s | {f / 1000 / n:.1f} s | {ratio} |")
    out += ["", "Before:", ""] + table(recs, res, left) + ["", "After:", ""] + table(other, other_res, right)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
