"""Reads what benches/lib/probe-pair.sh left: each side's probe results
and their first responses (spawn → handshake answer, ms)."""
import json
import os
import statistics
import sys


def load(out, side, runs, bench):
    rs = []
    for r in range(1, runs + 1):
        p = os.path.join(out, f"{side}-{r}.json")
        try:
            rs.append(json.load(open(p)))
        except (OSError, ValueError) as e:
            sys.exit(f"{bench}: run {r} of {side} left no result ({e}); see {p[:-5]}.err")
    return rs


def first(rs, label, bench):
    ts = [r["timings"]["handshake_ms"] for r in rs]
    if any(t is None for t in ts):
        sys.exit(f"{bench}: a {label} run never answered the handshake")
    return ts


def table(title, rows):
    """rows: (label, first responses); the ratio is last over first."""
    print(f"| {title} | min | median | max |")
    print("|---|---:|---:|---:|")
    for label, ts in rows:
        print(f"| {label} | {min(ts):.0f} | {statistics.median(ts):.0f} | {max(ts):.0f} |")
    (la, a), (lb, b) = rows[0], rows[-1]
    ratio = statistics.median(b) / statistics.median(a)
    print(f"\n{lb} / {la} (medians): **{ratio:.2f}×**")
