#!/usr/bin/env python3
"""The registry sample's population figures and per-server table
(docs/registry.md), from the draw and the audit's journal.

    registry-table.py SAMPLE_JSON AUDIT_DIR [RUN_922_TSV] > table.md

SAMPLE_JSON is `mcpvm image from-registry --sample`'s sample.json (the
draw: every listing, the entry made from it or why none was);
AUDIT_DIR holds the audit's compat.json, results.jsonl and the layer
build's build.json (benches/ecosystem.sh's output). RUN_922_TSV
(package, status, raw_status, tool_count, elapsed_s; `#` lines are
comments) gives the 922-server run's status where a drawn package is in
it. Every share is of the drawn listings, with its 95 %
Wilson score interval; a second column gives it among the listings
whose package the registry reached from here serves (see
docs/registry.md for what that subset is). What servers print or name
is escaped (mdcell) and clipped.
"""
import collections
import csv
import json
import math
import re
import sys

import mdcell

Z95 = 1.959963984540054
CLIP = 90


def wilson(k, n, z=Z95):
    """The 95 % Wilson score interval of k of n, as fractions."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, mid - half), min(1.0, mid + half))


def share(k, n):
    if n == 0:
        return "–"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.1f} % ({100 * lo:.1f}–{100 * hi:.1f})"


def md(text, clip=CLIP):
    return mdcell.md(text, clip)


def install_kind(error):
    """Why a layer did not build, by the package client's own code or
    our build's own words: where the cause lies."""
    if error is None:
        return None
    if "E404" in error or "ETARGET" in error or "No matching version" in error \
            or re.search(r"Could not find a version that satisfies the requirement \S+==", error) \
            and "require a different python" not in error:
        return "not_served"
    if "require a different python version" in error:
        return "python_version"
    if "has no executable to run as a server" in error:
        return "not_a_server"
    if "has several executables" in error:
        return "several_executables"
    if "install scripts" in error:
        return "install_scripts"
    return "other"


KIND_SAID = {
    "refused": "listing not exact (a tag such as `latest`): no entry made",
    "not_served": "the package or its listed version is not served by the registry reached from here",
    "python_version": "needs a newer Python than the image's 3.11 (Requires-Python ≥ 3.12)",
    "not_a_server": "the package has no executable: a library, not a server",
    "several_executables": "several executables and none named like the package: a person must choose",
    "install_scripts": "its install scripts failed in the install microVM",
    "other": "another install failure (its row says which)",
}


def load(sample_path, audit):
    sample = json.load(open(sample_path))
    build = json.load(open(f"{audit}/build.json"))
    compat = {c["server"]: c for c in json.load(open(f"{audit}/compat.json"))}
    records = collections.defaultdict(list)
    for line in open(f"{audit}/results.jsonl"):
        line = line.strip()
        if line:
            r = json.loads(line)
            records[r["server"]].append(r)
    failed = {f["name"]: f["error"] for f in build.get("failed", [])}
    return sample, failed, compat, records


def row_of(listing, name, refused, failed, compat, records):
    """One drawn listing: what became of it at each stage."""
    recs = records.get(name, [])
    # The cell as installed today; the run as released is its own stage
    # (a journal's merge sorts "as-released" before "deny-net").
    base = next((r for r in recs if r.get("profile") not in ("security", "as-released")), None)
    released = next((r for r in recs if r.get("profile") == "as-released"), None)
    sec = next((r for r in recs if r.get("security") is not None), None)
    c = compat.get(name)
    kind = "refused" if refused else install_kind(failed.get(name))
    findings = (sec or {}).get("security", {}).get("findings", []) if sec else []
    installed = kind is None and name is not None
    return {
        "name": name or listing["package"],
        "listing": listing,
        "kind": kind,
        "installed": installed,
        "audited": base is not None,
        "handshake": bool(base and base.get("lifecycle")),
        "released_handshake": bool(released and released.get("lifecycle")),
        "listed": len(base.get("tools_listed") or []) if base else 0,
        "verdict": c["verdict"] if c else ("inconclusive" if kind else None),
        "reason": (c or {}).get("reason") or (kind if kind else None),
        "working": ((c or {}).get("working") or [0, 0])[0],
        "findings": findings,
        "evidence": (c or {}).get("evidence") or ([failed.get(name) or refused] if kind else []),
    }


def figures(rows, out):
    served = [r for r in rows if r["kind"] != "not_served"]
    audited = [r for r in rows if r["audited"]]
    out.write("| stage | of the drawn | of those served here |\n|---|---|---|\n")
    stages = [
        ("installs", lambda r: r["installed"]),
        ("answers a handshake", lambda r: r["handshake"]),
        ("lists at least one tool", lambda r: r["listed"] > 0),
        ("shows at least one tool working", lambda r: r["working"] > 0),
        ("fit", lambda r: r["verdict"] == "fit"),
        ("not fit", lambda r: r["verdict"] == "not_fit"),
        ("inconclusive", lambda r: r["verdict"] == "inconclusive"),
        ("has a security finding", lambda r: bool(r["findings"])),
        ("dead on today's dependencies, answers as released", lambda r: r["released_handshake"]),
    ]
    for label, test in stages:
        k_all = sum(1 for r in rows if test(r))
        k_srv = sum(1 for r in served if test(r))
        out.write(f"| {label} | {share(k_all, len(rows))} | {share(k_srv, len(served))} |\n")
    out.write("\nInconclusive by reason:\n\n| reason | of the drawn | of those served here |\n|---|---|---|\n")
    reasons = collections.Counter(r["reason"] for r in rows if r["verdict"] == "inconclusive")
    for reason, _ in reasons.most_common():
        k_all = sum(1 for r in rows if r["verdict"] == "inconclusive" and r["reason"] == reason)
        k_srv = sum(1 for r in served if r["verdict"] == "inconclusive" and r["reason"] == reason)
        out.write(f"| `{reason}` | {share(k_all, len(rows))} | {share(k_srv, len(served))} |\n")
    out.write("\nWhy a drawn listing did not install:\n\n| kind | listings | |\n|---|---|---|\n")
    kinds = collections.Counter(r["kind"] for r in rows if r["kind"])
    for kind, k in kinds.most_common():
        out.write(f"| `{kind}` | {share(k, len(rows))} | {KIND_SAID[kind]} |\n")
    rules = collections.Counter()
    for r in audited:
        for f in {(f.get("rule"), f.get("severity")) for f in r["findings"]}:
            rules[f] += 1
    if rules:
        out.write("\nFindings by rule (servers with one, of those audited):\n\n"
                  "| rule | severity | servers |\n|---|---|---|\n")
        for (rule, sev), k in sorted(rules.items(), key=lambda x: (-x[1], x[0])):
            out.write(f"| `{md(rule)}` | {md(sev)} | {share(k, len(audited))} |\n")


def toolsdk_said(listing):
    if listing.get("toolsdk_validated"):
        return f"listed {listing.get('toolsdk_tools', '?')}"
    return "–" if "toolsdk-package.json" not in listing.get("sources", []) else "failed"


def disagreement(r):
    """How ours and ToolSDK's check differ, by kind (None: they agree)."""
    theirs = r["listing"].get("toolsdk_validated")
    ours = r["listed"] > 0
    if "toolsdk-package.json" not in r["listing"].get("sources", []):
        return None
    if theirs and not ours:
        if r["kind"] in ("not_served", "python_version"):
            return "theirs listed; not installable from here (" + r["kind"] + ")"
        if r["kind"]:
            return "theirs listed; did not install (" + r["kind"] + ")"
        return "theirs listed; ours did not (" + (r["reason"] or r["verdict"] or "?") + ")"
    if ours and not theirs:
        return "ours listed; theirs did not"
    if ours and theirs and r["listing"].get("toolsdk_tools") not in (None, r["listed"]):
        return "both listed, different counts"
    return None


def table(rows, corpus, out):
    out.write("\n| server | registry | ToolSDK | 922-run | install | handshake | tools | verdict | working | findings | evidence |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in sorted(rows, key=lambda r: r["name"]):
        l = r["listing"]
        verdict = (r["verdict"] or "–") + (f" ({r['reason']})" if r["verdict"] == "inconclusive" else "")
        ev = r["evidence"][0] if r["evidence"] else ""
        out.write("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n".format(
            md(r["name"], 60), l["registry"], toolsdk_said(l),
            md(corpus.get((l["registry"], l["package"].lower()), "–")),
            "yes" if r["installed"] else f"`{r['kind']}`",
            "yes" if r["handshake"] else "no",
            r["listed"], md(verdict), r["working"],
            len(r["findings"]), md(ev)))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.split("\n\n")[1].strip())
    sample, failed, compat, records = load(sys.argv[1], sys.argv[2])
    corpus = {}
    if len(sys.argv) == 4:
        lines = [l for l in open(sys.argv[3]) if not l.startswith("#")]
        for row in csv.DictReader(lines, delimiter="\t"):
            said = row["status"] + (f" ({row['tool_count']} tools)" if row.get("tool_count") else "")
            corpus[("npm", row["package"].lower())] = said
    rows = [row_of(x["listing"], x.get("name"), x.get("refused"), failed, compat, records)
            for x in sample["rows"]]
    out = sys.stdout
    figures(rows, out)
    kinds = collections.Counter(d for d in map(disagreement, rows) if d)
    if kinds:
        out.write("\nWhere ToolSDK's own check and ours differ (listings from its set):\n\n"
                  "| kind | listings |\n|---|---|\n")
        for d, k in kinds.most_common():
            out.write(f"| {md(d)} | {k} |\n")
    run922 = collections.Counter()
    for r in rows:
        theirs = corpus.get((r["listing"]["registry"], r["listing"]["package"].lower()))
        if theirs is None:
            continue
        ok, ours = theirs.startswith("ok"), r["listed"] > 0
        if ok and ours:
            run922["both listed tools"] += 1
        elif ok:
            run922["theirs listed; ours did not (" + (r["kind"] or r["reason"] or r["verdict"] or "?") + ")"] += 1
        elif ours:
            run922["ours listed; theirs " + theirs.split(" ")[0]] += 1
        else:
            run922["neither listed (theirs " + theirs.split(" ")[0] + "; ours " + (r["kind"] or r["reason"] or r["verdict"] or "?") + ")"] += 1
    if run922:
        out.write("\nThe 922-server run (its statuses for the drawn npm packages it ran, at their May 2026 releases) beside ours:\n\n"
                  "| kind | listings |\n|---|---|\n")
        for d, k in sorted(run922.items(), key=lambda x: (-x[1], x[0])):
            out.write(f"| {md(d)} | {k} |\n")
    table(rows, corpus, out)


if __name__ == "__main__":
    main()
