#!/usr/bin/env python3
"""How many calls reached their tools, from an audit's results.jsonl: the
audit's coverage figure (docs/benchmarks.md, "Calls that reach the tools").

    reach-table.py --results results.jsonl --catalogue CATALOGUE.toml \
        [--profile deny-net]

One row a server (its first-profile cell): safe tools called, reached
after the retries a refusal asked for, reached on the first try, and the
first tools not reached with what they said. Then the totals, overall and
over the servers that need no credentials (the catalogue's `credentials`
and its `mcpvm-dummy-` values say which). A server's words are clipped and
escaped for Markdown: data here, never markup.
"""
import argparse
import json
import sys
import tomllib

import mdcell

CLIP = 110


def md(text, clip=CLIP):
    return mdcell.md(text, clip)


def needs_credentials(entry):
    if entry.get("credentials"):
        return True
    return any("mcpvm-dummy" in str(v) for v in (entry.get("env") or {}).values())


def pct(a, b):
    return f"{100 * a / b:.0f} %" if b else "—"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--catalogue", required=True)
    ap.add_argument("--profile", default="deny-net")
    a = ap.parse_args()
    with open(a.catalogue, "rb") as f:
        servers = tomllib.load(f).get("servers", {})
    cells = {}
    with open(a.results) as f:
        for line in f:
            r = json.loads(line)
            if r.get("profile") == a.profile:
                cells[r["server"]] = r
    rows, totals = [], {True: [0, 0, 0], False: [0, 0, 0]}
    unmeasured = []
    for name in sorted(cells):
        r = cells[name]
        reach = r.get("reach")
        if not reach:
            if r.get("lifecycle"):
                unmeasured.append(name)
            continue
        creds = needs_credentials(servers.get(name, {}))
        t = totals[creds]
        t[0] += reach["called"]
        t[1] += reach["reached"]
        t[2] += reach.get("first_reached", 0)
        missed = "; ".join(md(x, 90) for x in reach.get("not_reached", [])[:2])
        more = len(reach.get("not_reached", [])) - 2
        if more > 0:
            missed += f"; and {more} more"
        rows.append(
            f"| {md(name, 40)} | {'yes' if creds else ''} | {reach['reached']} of {reach['called']} ({pct(reach['reached'], reach['called'])}) "
            f"| {reach.get('first_reached', 0)} ({pct(reach.get('first_reached', 0), reach['called'])}) | {reach['retried']} | {missed} |"
        )
    print("| server | needs a key | reached | first try reached | tried again | not reached (first two) |")
    print("|---|:-:|---:|---:|---:|---|")
    print("\n".join(rows))
    print()
    for label, keys in (("servers that need no key", [False]), ("servers that need a key (dummy here)", [True]), ("all", [False, True])):
        called = sum(totals[k][0] for k in keys)
        reached = sum(totals[k][1] for k in keys)
        first = sum(totals[k][2] for k in keys)
        print(f"- {label}: {reached} of {called} calls reached their tool ({pct(reached, called)}); "
              f"{first} on the first try ({pct(first, called)})")
    if unmeasured:
        print(f"- not measured (records from before the figure): {', '.join(unmeasured)}")


if __name__ == "__main__":
    sys.exit(main())
