#!/usr/bin/env python3
"""Writes a synthetic N-server audit, as SHARDS shard directories, from a
real audit's records (default: the corpus pass in docs/ecosystem/):
server i is a copy of real server i mod R under its own name, with its
real cells (every profile, security findings, robustness, verdict
evidence), so that `mcpvm audit merge` and the report writers meet the
sizes and shapes a 10,000-server audit has. Used by
benches/report-scale.sh.

  scale-records.py --source DIR --servers N --shards K --out DIR
"""
import argparse
import json
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--servers", type=int, required=True)
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.source, "audit.json")))
    cells = {}
    for line in open(os.path.join(a.source, "results.jsonl")):
        r = json.loads(line)
        cells.setdefault(r["server"], []).append(r)
    # The servers with cells, and those whose install failed (rows with
    # no cell): both kinds, in the real proportion. Servers the real
    # audit did not reach are left out.
    real = sorted(s for s in cells if s in meta["servers"])
    real += sorted(s for s, m in meta["servers"].items() if s not in cells and m.get("install_error"))
    servers, origins = {}, {}
    names = []
    for i in range(a.servers):
        src = real[i % len(real)]
        name = f"{src}-{i:05d}"
        names.append((name, src))
        servers[name] = meta["servers"][src]
        origins[name] = {"file": "scale.toml", "line": i + 1}
    meta["servers"], meta["origins"] = servers, origins
    meta["catalogue"] = "scale.toml"
    profiles = meta["profiles"]
    writers = []
    for k in range(a.shards):
        d = os.path.join(a.out, f"shard-{k}")
        os.makedirs(d, exist_ok=True)
        m = dict(meta, shard={"index": k, "count": a.shards})
        with open(os.path.join(d, "audit.json"), "w") as f:
            json.dump(m, f)
        writers.append(open(os.path.join(d, "results.jsonl"), "w"))
    # Each record goes to the shard that runs its cell: the audit's
    # order (audit/matrix.rs) over the servers that installed, by name,
    # each server's profiles rotated one further than the previous one's.
    n = 0
    installed = sorted(name for name, src in names if not meta["servers"][name].get("install_error"))
    by_name = dict(names)
    for i, name in enumerate(installed):
        mine = {r["profile"]: r for r in cells.get(by_name[name], [])}
        for j in range(len(profiles)):
            cell = i * len(profiles) + j
            r = mine.get(profiles[(i + j) % len(profiles)])
            if r is None:
                continue
            r = dict(r, server=name)
            writers[cell % a.shards].write(json.dumps(r) + "\n")
            n += 1
    for w in writers:
        w.close()
    print(json.dumps({"servers": a.servers, "records": n, "shards": a.shards}))


if __name__ == "__main__":
    main()
