#!/usr/bin/env python3
"""The roles each tool was seen to play in an audit, beside what its
annotations and its description alone would give it
(docs/security-audit.md, "The five most-installed servers").

    roles-table.py --results results.jsonl --labels LABELS.json [--profile security]

LABELS.json: {server: {tool: {"roles": [...], "annotations": {...}}}}, the
roles a reader gave each tool from its name, description and schema as a
description-based scanner would. One table a server: each tool the audit
listed, its observed roles (with the step and why of the first call that
showed each), the roles its annotations claim and no call showed, the
description's roles, and how they differ. Then the totals. Tools and
words come from the servers: escaped, bounded, never markup.
"""
import argparse
import collections
import json
import sys

import journal
import mdcell

ROLES = ["untrusted_content", "reads_private", "public_sink", "destructive"]
SHORT = {"untrusted_content": "U", "reads_private": "P", "public_sink": "S", "destructive": "D"}


def md(text, clip=90):
    return mdcell.md(text, clip)


def cells(path, profile):
    """The records of `profile`, by server (the last one of each wins)."""
    return {s: r for (s, p), r in journal.records(path).items() if p == profile}


def roles_of(record):
    """{tool: (observed {role: seen}, declared [role])} of a record."""
    out = {}
    for t in record.get("roles") or []:
        if not isinstance(t, dict) or not isinstance(t.get("tool"), str):
            continue
        observed = t.get("observed") if isinstance(t.get("observed"), dict) else {}
        declared = [r for r in t.get("declared") or [] if r in ROLES]
        out[t["tool"]] = ({k: v for k, v in observed.items() if k in ROLES}, declared)
    return out


def short(roles):
    return "".join(SHORT[r] for r in ROLES if r in roles) or "–"


def table(server, record, labels, totals, summary):
    listed = [t for t in record.get("tools_listed") or [] if isinstance(t, str)]
    seen = roles_of(record)
    outcomes = collections.defaultdict(set)
    for c in record.get("calls") or []:
        if isinstance(c, dict) and isinstance(c.get("tool"), str):
            outcomes[c["tool"]].add(str(c.get("outcome", "?")))
    labels = {t: v for t, v in labels.items() if not t.startswith("_") and isinstance(v, dict)}
    # The tools the server listed here (and any a call showed): a tool the
    # reader found in the code that the server did not list (a flag or a
    # client capability hides it, or the server never started) is named,
    # not counted.
    tools = list(dict.fromkeys(listed + sorted(seen)))
    unlisted = [t for t in sorted(labels) if t not in tools]
    unlabelled = [t for t in tools if t not in labels]
    row = {"outcome": record.get("outcome", "?"), "listed": len(tools), "labelled": len(tools) - len(unlabelled),
           "unlisted": len(unlisted), "seen": collections.Counter(), "said": collections.Counter()}
    summary[server] = row
    head = f"**{md(server)}** ({len(tools)} tools listed; {md(str(record.get('outcome', '?')))})"
    notes = []
    if unlisted:
        notes.append(f"described but not listed here, not counted: {md(', '.join(unlisted), 300)}")
    if unlabelled:
        notes.append(f"listed but not described by the reader: {md(', '.join(unlabelled), 300)}")
    if not tools:
        return head + (f": {notes[0]}" if notes else "") + "\n"
    lines = [
        head,
        "",
        *[f"- {n}" for n in notes],
        *([""] if notes else []),
        "| tool | called | observed | how the first call showed it | annotations claim | description | differs |",
        "|---|---|---|---|---|---|---|",
    ]
    for tool in tools:
        observed, declared = seen.get(tool, ({}, []))
        described = [r for r in (labels.get(tool) or {}).get("roles", []) if r in ROLES]
        how = "; ".join(
            f"{SHORT[r]}: {md(s.get('step', ''), 40)}, {md(s.get('why', ''), 70)}"
            for r, s in sorted(observed.items(), key=lambda x: ROLES.index(x[0]))
            if isinstance(s, dict)
        )
        only_seen = [r for r in ROLES if r in observed and r not in described]
        only_said = [r for r in ROLES if r in described and r not in observed]
        diff = []
        if only_seen:
            diff.append("seen, not described: " + short(only_seen))
        if only_said:
            diff.append("described, not seen: " + short(only_said))
        for r in ROLES:
            if tool in labels:
                totals[(r, r in observed, r in described)] += 1
            row["seen"][r] += r in observed
            row["said"][r] += r in described
        ran = outcomes.get(tool, set())
        called = "no" if not ran else ("skipped" if ran == {"skipped"} else "yes")
        lines.append(
            f"| {md(tool, 40)} | {called} | {short(observed)} | {how or '–'} | {short(declared)} | "
            f"{short(described)} | {'; '.join(diff) or 'same'} |"
        )
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", required=True)
    p.add_argument("--labels", required=True)
    p.add_argument("--profile", default="security")
    a = p.parse_args()
    records = cells(a.results, a.profile)
    with open(a.labels, encoding="utf-8") as f:
        labels = json.load(f)
    if not isinstance(labels, dict):
        sys.exit("roles-table: the labels file is not an object of servers")
    totals = collections.Counter()
    summary = {}
    out = ["Roles: U untrusted content, P reads private data, S public sink, D destructive.", ""]
    absent = []
    for server in sorted(labels):
        rec = records.get(server)
        if rec is None:
            absent.append(server)
            continue
        server_labels = labels.get(server) if isinstance(labels.get(server), dict) else {}
        out.append(table(server, rec, server_labels, totals, summary))
    if absent:
        out.append(f"Described, with no `{md(a.profile)}` cell in these results ({len(absent)}): {md(', '.join(absent), 2000)}.\n")
    out.append("By server: tools listed in the cell (of them, described by the reader), and for each role how many tools were seen playing it / described as playing it.")
    out.append("")
    out.append("| server | outcome | tools | described | U seen/said | P seen/said | S seen/said | D seen/said |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for server, row in summary.items():
        roles = " | ".join(f"{row['seen'][r]}/{row['said'][r]}" for r in ROLES)
        out.append(f"| {md(server)} | {md(str(row['outcome']))} | {row['listed']} | {row['labelled']} | {roles} |")
    out.append("")
    out.append("Over the tools both listed and described:")
    out.append("")
    out.append("| role | seen and described | seen only | described only |")
    out.append("|---|---:|---:|---:|")
    for r in ROLES:
        out.append(
            f"| {r} | {totals[(r, True, True)]} | {totals[(r, True, False)]} | {totals[(r, False, True)]} |"
        )
    print("\n".join(out))


if __name__ == "__main__":
    main()
