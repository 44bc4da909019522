#!/usr/bin/env python3
"""What servers need, measured by taking it away: the withholding sweep's
table (docs/withholding.md, "What the popular servers need"), from an
audit's effects.json (each cell against its server's baseline cell,
`tools/src/audit/effects.rs`), its audit.json (what each profile
withholds) and, with --check-proposals, its proposals.json.

    needs-table.py --effects effects.json --audit audit.json \
        [--proposals proposals.json]

One row a profile: the servers judged (those with a tool shown working at
baseline: a server none of whose tools worked there cannot show what a
profile takes), how many kept every such tool, how many lost some, how
many the profile broke outright, and who lost what. A cell that did not
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
        lost = [e for e in judged if e.get("lost") and e.get("effect") != "newly_broken"]
        kept = [e for e in judged if not e.get("lost") and e.get("effect") != "newly_broken"]
        what = definitions.get(profile, {}).get("description", "") if isinstance(definitions.get(profile), dict) else ""
        who = [f"{e['server']} ({e.get('outcome', '')})" for e in broke] + [
            f"{e['server']}: {', '.join(map(str, e['lost'][:4]))}{' …' if len(e['lost']) > 4 else ''}" for e in lost
        ]
        out.append((profile, what, len(judged), len(kept), len(lost), len(broke), who))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--effects", required=True)
    ap.add_argument("--audit", required=True)
    ap.add_argument("--proposals")
    a = ap.parse_args()
    effects = load(a.effects)
    definitions = load(a.audit).get("profile_definitions", {})
    print("| profile | withholds | servers judged | kept every tool | lost a tool | broken | who lost what |")
    print("|---|---|---:|---:|---:|---:|---|")
    for profile, what, judged, kept, lost, broke, who in rows(effects, definitions):
        print(f"| {md(profile, 60)} | {md(what, 120)} | {judged} | {kept} | {lost} | {broke} | {md('; '.join(who), 600) or '—'} |")
    if a.proposals:
        checks = [c for c in load(a.proposals) if isinstance(c, dict)]
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
