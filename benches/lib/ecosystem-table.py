#!/usr/bin/env python3
"""The ecosystem audit's table for docs/ecosystem.md, from what the run wrote.

    ecosystem-table.py --compat compat.json --results results.jsonl \
        --index STORE/index.json [--build build.json] [--csv popular-servers.csv] \
        [--downloads guest-image/corpus/downloads-2026-12.tsv]

One row a server: version, install (layer size, build time), cold first
response, tools shown working of those called (compat.json's `working`;
for older records, calls answered without an error flag), verdict with
reason and its first evidence,
robustness, security findings by rule with the share of attacks that
reached their tool's code, network tries, and the 922-server
run's status for the same package. Then the summary counts, and with
--downloads the same verdicts weighted by npm's monthly downloads. Every value a
server chose (names, messages, stderr) is clipped and escaped for Markdown:
a server's text is data here, never markup.
"""
import argparse
import collections
import csv
import json
import sys

import mdcell

BASELINE = "deny-net"
CLIP = 140


def md(text, clip=CLIP):
    return mdcell.md(text, clip)


def records(path):
    by = collections.defaultdict(dict)
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            by[r["server"]][r["profile"]] = r
    return by


def install_cell(name, index, build):
    b = build.get(name)
    if b is not None:
        mb = b["bytes"] / 1e6
        if b.get("cached"):
            return f"{mb:.1f} MB, cached"
        return f"{mb:.1f} MB, {b['seconds']:.1f} s"
    e = index.get("servers", {}).get(name)
    if e is not None:
        return f"{e['bytes'] / 1e6:.1f} MB"
    return "–"


def robustness_cell(r):
    rb = (r or {}).get("robustness")
    if not rb:
        return "–"
    broke = rb.get("valid_breakage", []) + rb.get("malformed_breakage", [])
    cell = f"{rb['handled']}/{rb['sent']}"
    if broke:
        cell += " (broke: " + ", ".join(md(b, 40) for b in broke) + ")"
    return cell


def security_cell(r):
    s = (r or {}).get("security")
    if not s:
        return "–"
    if s.get("not_judged"):
        return "not judged: " + md(s["not_judged"], 60)
    rules = collections.Counter(f"{f['class']}/{f['rule']}" for f in s.get("findings", []))
    # Attacks refused for an argument their payload was not in never
    # reached the code they aim at: the share that did is beside the
    # findings.
    missed = ((r or {}).get("reach") or {}).get("attacks_not_reached", 0)
    attacks = s.get("attacks", 0)
    reached = f"{attacks - missed} of {attacks} attacks reached"
    if not rules:
        return f"none ({reached})"
    return ", ".join(f"**{md(k, 50)}** ×{n}" for k, n in sorted(rules.items())) + f" ({reached})"


def network_cell(cells):
    tries = []
    for r in cells.values():
        for t in r.get("network", []):
            name = t.split(" ")[1] if " " in t else t
            if name not in tries:
                tries.append(name)
    if not tries:
        return "none"
    shown = ", ".join(md(t, 40) for t in tries[:3])
    return shown + (f" (+{len(tries) - 3})" if len(tries) > 3 else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compat", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--audit", help="the audit's audit.json: every server, also those not judged yet")
    ap.add_argument("--build", help="`mcpvm --json image build` output: install times")
    ap.add_argument("--csv", help="the corpus CSV: the 922-server run's status")
    ap.add_argument("--downloads", help="corpus-downloads.py's table: verdicts weighted by use")
    a = ap.parse_args()

    compat = json.load(open(a.compat))
    if a.audit:
        # A server the audit did not reach has no verdict in compat.json:
        # its row says so.
        judged = {v["server"] for v in compat}
        for name, m in json.load(open(a.audit)).get("servers", {}).items():
            if name not in judged:
                compat.append({"server": name, "package": m.get("package"), "version": m.get("version"),
                               "verdict": "not audited yet", "reason": None,
                               "evidence": ["the run's deadline came first; a resumed run audits it"]})
    recs = records(a.results)
    index = json.load(open(a.index))
    build = {}
    if a.build:
        for s in json.load(open(a.build)).get("servers", []):
            if "bytes" in s and "seconds" in s:
                build[s["name"]] = s
    prior = {}
    if a.csv:
        for row in csv.DictReader(open(a.csv)):
            # By package: the corpus's names and the catalogue's differ
            # ("github (legacy npm)" is github-legacy).
            prior[row["package"]] = row.get("automatelab_2026_05_status") or ""

    out = sys.stdout
    out.write("| server | version | install | first response | tools working | verdict | evidence | robustness | security | network tries | 922-server run |\n")
    out.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
    counts = collections.Counter()
    for v in sorted(compat, key=lambda v: v["server"]):
        name = v["server"]
        cells = recs.get(name, {})
        base = cells.get(BASELINE) or next(iter(cells.values()), None)
        verdict = v["verdict"] + (f": {v['reason']}" if v.get("reason") else "")
        counts[verdict] += 1
        first = "–"
        tools = "–"
        if base:
            hs = base.get("timings", {}).get("handshake_ms")
            first = f"{hs / 1000:.1f} s" if hs is not None else "none"
            if v.get("working"):
                k, n = v["working"]
                tools = f"{k}/{n}"
            else:
                ok, failed = len(base.get("tools_ok", [])), len(base.get("tools_failed", []))
                tools = f"{ok}/{ok + failed} answered"
        evidence = "; ".join(v.get("evidence", [])[:2])
        sec = security_cell(cells.get("security"))
        out.write(
            f"| {md(name, 40)} | {md(v.get('version') or '–', 30)} | {install_cell(name, index, build)} | {first} | {tools} "
            f"| **{md(verdict, 40)}** | {md(evidence)} | {robustness_cell(base)} | {sec} | {network_cell(cells)} "
            f"| {md(prior.get(v.get('package')) or '–', 40)} |\n"
        )
    pending = counts.pop("not audited yet", 0)
    total = sum(counts.values())
    fit = counts.get("fit", 0)
    not_fit = counts.get("not_fit", 0)
    inconclusive = sorted((k.split(": ", 1)[1], n) for k, n in counts.items() if k.startswith("inconclusive"))
    if pending:
        out.write(f"\n{pending} servers not audited yet (the run stopped at its deadline).\n")
    out.write(
        f"\n**{fit} of {total} fit, {not_fit} not fit, {total - fit - not_fit} inconclusive**"
        + (" (" + ", ".join(f"{k} {n}" for k, n in inconclusive) + ")" if inconclusive else "")
        + ".\n"
    )
    if a.downloads:
        weighted(compat, a.downloads, out)
    costs(recs, out)


# Verdicts whose cause may be the harness rather than the server: a
# machine or an install the harness did not give it. An upper bound: a
# row's evidence says whether a developer's machine would have had it.
HARNESS = ("inconclusive: needs_environment", "inconclusive: install_failed",
           "inconclusive: install_timeout")


def weighted(compat, path, out):
    """Each verdict's share of the servers and of npm's monthly downloads
    (PyPI's list ranks packages without counts: those servers are
    counted, not weighted)."""
    with open(path, newline="") as f:
        rows = {r["server"]: r for r in csv.DictReader(f, delimiter="\t")}
    month = next((r["month"] for r in rows.values()), "?")
    by = collections.defaultdict(lambda: [0, 0, 0])
    total_dl = 0
    for v in compat:
        if v["verdict"] == "not audited yet":
            continue
        verdict = v["verdict"] + (f": {v['reason']}" if v.get("reason") else "")
        row = rows.get(v["server"], {})
        dl = int(row["npm_downloads_a_month"]) if row.get("npm_downloads_a_month") else 0
        b = by[verdict]
        b[0] += 1
        if row.get("registry") == "npm":
            b[1] += 1
        b[2] += dl
        total_dl += dl
    servers = sum(b[0] for b in by.values())
    if not servers or not total_dl:
        return
    out.write(f"\n| verdict, weighted by use (npm downloads a month, list of {md(month, 10)}) | servers | share | npm servers | npm downloads a month | share of downloads |\n")
    out.write("|---|---:|---:|---:|---:|---:|\n")
    for verdict, (n, npm, dl) in sorted(by.items(), key=lambda kv: (-kv[1][2], kv[0])):
        out.write(f"| {md(verdict, 60)} | {n} | {100 * n / servers:.0f} % | {npm} | {dl:,} | {100 * dl / total_dl:.1f} % |\n")
    harness = sum(by[h][2] for h in HARNESS if h in by)
    out.write(f"| all | {servers} | | {sum(b[1] for b in by.values())} | {total_dl:,} | |\n")
    out.write(f"\nAt most {100 * harness / total_dl:.1f} % of the corpus's npm downloads have a verdict "
              "the harness may have caused (needs\\_environment, install\\_failed, install\\_timeout); "
              "PyPI servers are counted, not weighted (their list gives ranks, not downloads).\n")


def costs(recs, out):
    """Where the audit's time went, summed over every cell: the VM's boot
    (to the guest agent), the server's own start (to its handshake
    answer), its listings, the calls and hostile input of the baseline
    cell, and the security cell's attacks (its whole cell)."""
    parts = collections.Counter()
    cells = 0
    for cells_of in recs.values():
        for profile, r in cells_of.items():
            t = r.get("timings", {})
            wall = t.get("wall_ms") or 0
            cells += 1
            if profile == "security":
                parts["security cell (start, listings, attacks)"] += wall
                continue
            boot = t.get("boot_ms") or 0
            hs = t.get("handshake_ms")
            tl = t.get("tools_list_ms")
            if hs is None:
                parts["baseline cell that never answered (boot, start, waiting)"] += wall
                continue
            parts["boot (to the guest agent)"] += boot
            parts["server start (to its handshake answer)"] += max(hs - boot, 0)
            parts["listings (tools/list and the rest)"] += max((tl or hs) - hs, 0)
            parts["calls and hostile input"] += max(wall - (tl or hs), 0)
    total = sum(parts.values())
    out.write(f"\n| where the time went ({cells} cells) | seconds | share |\n|---|---:|---:|\n")
    for k, v in parts.most_common():
        out.write(f"| {k} | {v / 1000:.0f} | {100 * v / total:.0f} % |\n")
    out.write(f"| all cells | {total / 1000:.0f} | |\n")
    # The servers that cost the most, both cells together: where a
    # per-server rule pays off.
    per = sorted(((sum((r.get("timings", {}).get("wall_ms") or 0) for r in c.values()), s)
                  for s, c in recs.items()), reverse=True)
    out.write("\n| slowest servers (both cells) | seconds | share |\n|---|---:|---:|\n")
    for ms, s in per[:5]:
        out.write(f"| {md(s, 40)} | {ms / 1000:.0f} | {100 * ms / total:.0f} % |\n")


if __name__ == "__main__":
    main()
