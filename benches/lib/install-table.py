#!/usr/bin/env python3
"""What the install scripts of a store's layers did, from its index.json
(`install` of each layer record, docs/security-audit.md "What the install
scripts did"):

    install-table.py --index STORE/index.json

One row per layer whose install scripts ran and were recorded: calls
recorded (and past the recorder's bound), programs run from outside the
package, and each rule broken with its first calls. Then how many layers
had scripts, and how many went beyond installing. Paths and arguments
are the packages' words: clipped and escaped for Markdown.
"""
import argparse
import json

import mdcell


def what(effect):
    if effect.get("call") in ("execve", "execveat") and effect.get("argv"):
        return " ".join(effect["argv"])
    return effect.get("address") or (effect.get("paths") or [effect.get("call", "")])[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True)
    a = ap.parse_args()
    with open(a.index) as f:
        index = json.load(f)
    rows, beyond_count = [], 0
    for name, rec in sorted(index.get("servers", {}).items()):
        inst = rec.get("install")
        if inst is None:
            continue
        rules = {}
        for b in inst.get("beyond", []):
            rules.setdefault(b["rule"], []).append(what(b.get("effect", {})))
        if rules:
            beyond_count += 1
        parts = []
        for r, ws in rules.items():
            distinct = list(dict.fromkeys(ws))
            more = f" (+{len(distinct) - 3})" if len(distinct) > 3 else ""
            parts.append(f"{r}: " + ", ".join(distinct[:3]) + more)
        cell = "; ".join(parts)
        cut = f" ({inst['dropped']} not seen)" if inst.get("dropped") else ""
        rows.append(
            f"| {mdcell.md(name, 40)} | {mdcell.md(rec.get('package', ''), 50)} {mdcell.md(rec.get('version', ''), 20)} "
            f"| {inst.get('calls', 0)}{cut} | {len(inst.get('programs', []))} | {mdcell.md(cell, 300) if cell else 'nothing'} |"
        )
    print("| server | package | calls recorded | programs run (outside the package) | beyond installing |")
    print("|---|---|---:|---:|---|")
    print("\n".join(rows))
    print()
    print(f"{len(rows)} layers ran install scripts and were recorded; {beyond_count} went beyond installing.")


if __name__ == "__main__":
    main()
