#!/usr/bin/env python3
"""What not attacking a tool whose calls never reached past the network
would save, and what it would lose, on an audit already run (issue 49:
"a server that needs its upstream for every call need not be attacked
call by call once its calls are shown not to reach").

    attack-skip.py --results results.jsonl [--base deny-net] RUNS_DIR_OR_TGZ...

A tool is *upstream-bound* when every call of it in the base cell failed
with a lookup or connection refused during it (the record's `net`), and
it answered nothing that worked. For each server, and for the servers
all of whose called tools are upstream-bound (the issue's rule), this
prints the attack time the security cell spent on those tools and the
findings those attacks made: a rule that would drop a finding is not one
to take.
"""
import argparse
import collections
import json
import sys

import journal
import mdcell

sys.path.insert(0, __file__.rsplit("/", 1)[0])
cell_time = __import__("cell-time")


def refused(net):
    return any(isinstance(n, str) and (" denied" in n or " failed" in n or " refused" in n) for n in net or [])


def upstream_bound(record):
    """The called tools of a cell, and which of them never got past the
    network."""
    calls = collections.defaultdict(list)
    for c in record.get("calls") or []:
        if isinstance(c, dict) and isinstance(c.get("tool"), str) and c.get("outcome") != "skipped":
            calls[c["tool"]].append(c)
    bound = {t for t, cs in calls.items() if all(refused(c.get("net")) for c in cs)}
    return set(calls), bound


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", required=True)
    p.add_argument("--base", default="deny-net")
    p.add_argument("runs", nargs="+")
    a = p.parse_args()
    recs = journal.records(a.results)
    res = cell_time.results(a.runs)
    rows = []
    for (server, profile), sec in sorted(recs.items()):
        if profile != "security" or (server, a.base) not in recs:
            continue
        called, bound = upstream_bound(recs[(server, a.base)])
        result = res.get((server, "security")) or {}
        spent = collections.Counter()
        for s in result.get("steps") or []:
            if isinstance(s, dict) and str(s.get("step", "")).startswith("attack:"):
                spent[s["step"][len("attack:"):]] += cell_time.ms(s.get("took_ms"))
        findings = [f for f in (sec.get("security") or {}).get("findings") or [] if isinstance(f, dict)]
        lost = [f for f in findings if str(f.get("step", "")).split(":", 1)[-1] in bound]
        rows.append((server, len(called), len(bound), bound == called and bool(called),
                     sum(spent.values()), sum(spent[t] for t in bound), lost, result != {}))
    out = ["| server | tools called | upstream-bound | all bound | attack s | on bound tools s | findings there |",
           "|---|---:|---:|:-:|---:|---:|---|"]
    tot = collections.Counter()
    for server, n, b, all_bound, spent, on_bound, lost, have in rows:
        out.append(f"| {mdcell.md(server, 40)} | {n} | {b} | {'yes' if all_bound else ''} | "
                   f"{spent / 1000:.0f}{'' if have else ' (no result)'} | {on_bound / 1000:.0f} | "
                   f"{mdcell.md('; '.join(f.get('class', '?') + ' ' + str(f.get('step', '')) for f in lost), 120) or '–'} |")
        tot["attack"] += spent
        tot["bound"] += on_bound
        tot["lost"] += len(lost)
        if all_bound:
            tot["server rule"] += on_bound
            tot["server rule lost"] += len(lost)
    out += ["", f"Attacks: {tot['attack'] / 1000:.0f} s; on upstream-bound tools: {tot['bound'] / 1000:.0f} s "
                f"({tot['lost']} findings there); on servers all of whose tools are: {tot['server rule'] / 1000:.0f} s "
                f"({tot['server rule lost']} findings there)."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
