#!/usr/bin/env python3
"""Drops from an audit journal (results.jsonl) the runs as released whose
layer could not be built where the audit ran (the build could not run
there at all: no registry, no package tools); exits 0 when it dropped
any (the caller builds those layers and resumes), 1 when there were none.
A build that ran and failed (the store's record of why) is kept: it is
the row's reason.

    unbuilt-released.py results.jsonl

The journal is rewritten whole (a temporary file renamed over it).
"""
import json
import os
import sys

SIGNS = (
    "as released: its layer did not build: mcpvm image build gave no report",
    "as released: its layer did not build: cannot run ",
)


def unbuilt(record):
    return record.get("profile") == "as-released" and any(
        e.startswith(SIGNS) for e in record.get("evidence", {}).get("errors", []))


def main():
    path = sys.argv[1]
    kept, dropped = [], 0
    with open(path) as f:
        for line in f:
            if line.strip() and unbuilt(json.loads(line)):
                dropped += 1
            else:
                kept.append(line)
    if not dropped:
        return 1
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(kept)
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
