#!/usr/bin/env python3
"""What servers need, measured by taking it away: the withholding sweep's
table (docs/withholding.md, "What the popular servers need"), from an
audit's effects.json (each cell against its server's baseline cell,
`tools/src/audit/effects.rs`), its audit.json (what each profile
withholds) and, with --check-proposals, its proposals.json.

    needs-table.py --effects effects.json --audit audit.json \
        [--proposals proposals.json]

A sweep that took several sittings (each its own audit) is given as
several --effects/--audit pairs (and --proposals, one a sitting or
none), oldest first: a server's cell in a later sitting replaces its
earlier one, and an earlier sitting's cells of a profile whose
definition has changed since are dropped, with a line saying how many
(a row counts only what one definition took away).

One row a profile: the servers judged (those with a tool shown working at
baseline: a server none of whose tools worked there cannot show what a
profile takes), how many kept every such tool, how many lost some, how
many the profile broke outright, how many servers with no tool working at
baseline it broke (stopped from starting or answering: a need too), and
who lost what. A cell that did not
run (effect `unjudged`) kept and lost nothing and is not counted. Then
the proposed allow-lists' check. Names and words from the journal are data: clipped
and escaped for Markdown, never markup.
"""
import argparse
import json

import mdcell


def md(text, clip=200):
    return mdcell.md(text, clip)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def rows(effects, definitions):
    by_profile = {}
    for e in effects:
        if not isinstance(e, dict):
            continue
        by_profile.setdefault(str(e.get("profile", "")), []).append(e)
    out = []
    for profile, cells in by_profile.items():
        judged = [e for e in cells if int(e.get("kept", 0)) + len(e.get("lost") or []) > 0]
        broke = [e for e in judged if e.get("effect") == "newly_broken"]
        # A server with no tool working at baseline has none to lose, but a
        # profile that stops it from starting or answering shows a need too.
        stopped = [e for e in cells if e not in judged and e.get("effect") == "newly_broken"]
        lost = [e for e in judged if e.get("lost") and e.get("effect") != "newly_broken"]
        kept = [e for e in judged if not e.get("lost") and e.get("effect") != "newly_broken"]
        what = definitions.get(profile, {}).get("description", "") if isinstance(definitions.get(profile), dict) else ""
        who = [f"{e['server']} ({e.get('outcome', '')})" for e in broke] + [
            f"{e['server']}: {', '.join(map(str, e['lost'][:4]))}{' …' if len(e['lost']) > 4 else ''}" for e in lost
        ] + [f"{e['server']} ({e.get('outcome', '')}, no tool working at baseline)" for e in stopped]
        out.append((profile, what, len(judged), len(kept), len(lost), len(broke), len(stopped), who))
    return out


def combine(sittings):
    """The cells, definitions and proposal checks of several sittings
    (effects, audit, proposals; oldest first) as one sweep, and a note for
    each profile whose earlier cells were dropped for a changed definition."""
    definitions = {}
    for _, audit, _ in sittings:
        defs = audit.get("profile_definitions", {}) if isinstance(audit, dict) else {}
        definitions.update({k: v for k, v in defs.items() if isinstance(v, dict)})
    cells, checks, dropped = {}, {}, {}
    for effects, audit, proposals in sittings:
        defs = audit.get("profile_definitions", {}) if isinstance(audit, dict) else {}
        for e in effects if isinstance(effects, list) else []:
            if not isinstance(e, dict):
                continue
            profile = str(e.get("profile", ""))
            if defs.get(profile) != definitions.get(profile):
                dropped[profile] = dropped.get(profile, 0) + 1
                continue
            cells[(str(e.get("server", "")), profile)] = e
        for c in proposals if isinstance(proposals, list) else []:
            if isinstance(c, dict):
                checks[str(c.get("server", ""))] = c  # one check a server: a later sitting's replaces it
    notes = [f"{md(p, 60)}: {n} cells of an earlier sitting dropped, measured under an earlier definition"
             for p, n in sorted(dropped.items())]
    return list(cells.values()), definitions, list(checks.values()), notes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--effects", required=True, action="append")
    ap.add_argument("--audit", required=True, action="append")
    ap.add_argument("--proposals", action="append")
    a = ap.parse_args()
    if len(a.effects) != len(a.audit) or (a.proposals and len(a.proposals) != len(a.effects)):
        ap.error("give one --audit (and one --proposals, or none) for each --effects, in the same order")
    proposals = a.proposals or [None] * len(a.effects)
    sittings = [(load(e), load(au), load(p) if p else None) for e, au, p in zip(a.effects, a.audit, proposals)]
    effects, definitions, checks, notes = combine(sittings)
    print("| profile | withholds | servers judged | kept every tool | lost a tool | broken | broken, no tool working at baseline | who lost what |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for profile, what, judged, kept, lost, broke, stopped, who in rows(effects, definitions):
        print(f"| {md(profile, 60)} | {md(what, 120)} | {judged} | {kept} | {lost} | {broke} | {stopped} | {md('; '.join(who), 600) or '—'} |")
    for note in notes:
        print()
        print(f"_{note}._")
    if a.proposals:
        count = {}
        for c in checks:
            count[c.get("verdict")] = count.get(c.get("verdict"), 0) + 1
        print()
        # A list that holds where no tool worked at baseline held the
        # start and the listing only: said apart.
        empty = sum(1 for c in checks if c.get("verdict") == "holds" and not int(c.get("tools") or 0))
        print(f"Proposed allow-lists checked: {len(checks)}; hold {count.get('holds', 0)} "
              f"({empty} of them for a server with no tool working at baseline: its start and listing held), "
              f"break a tool {count.get('breaks', 0)}, vary without a denial {count.get('varies', 0)}, "
              f"not checked {count.get('not_checked', 0)}.")
        named = [c for c in checks if c.get("verdict") in ("breaks", "not_checked")]
        if named:
            print()
            for c in named:
                if c.get("verdict") == "breaks":
                    print(f"- {md(c.get('server', ''), 60)}: lost {md(', '.join(map(str, c.get('lost') or [])), 200) or 'the server'}; "
                          f"denied {md(', '.join(map(str, c.get('denied') or [])), 200)}")
                else:
                    print(f"- {md(c.get('server', ''), 60)}: not checked: {md(str(c.get('why', '')), 200)}")


if __name__ == "__main__":
    main()
