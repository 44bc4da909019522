#!/usr/bin/env bash
# Reports at corpus scale: a synthetic audit of N servers (default
# 10,000) made from the corpus pass's real records (docs/ecosystem/, by
# benches/lib/scale-records.py: every profile, security findings,
# robustness, verdicts), written as 10 shards and merged by
# `mcpvm audit merge` under /usr/bin/time. Checks that the merge kept
# every record and server, that report.html is a summary with a page per
# 250 servers, and prints the sizes; its last line is a JSON object with
# servers, records, seconds and max_rss_mib (targets: under 60 s and
# 1024 MiB here).
#   benches/report-scale.sh [SERVERS]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
servers=${1:-10000}
cargo build --quiet --release --manifest-path "$top/Cargo.toml" -p mcpvm -p mcpvm-tools
mcpvm=$top/target/release/mcpvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
made=$(python3 "$top/benches/lib/scale-records.py" --source "$top/docs/ecosystem" \
  --servers "$servers" --shards 10 --out "$work/in")
records=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["records"])' "$made")
echo "report-scale: $servers servers, $records records in 10 shards ($(du -sh "$work/in" | cut -f1))" >&2
/usr/bin/time -f '%e %M' -o "$work/time" "$mcpvm" audit merge --out "$work/out" "$work"/in/shard-* >&2
read -r seconds rss_kib < "$work/time"
python3 - "$work/out" "$servers" "$records" "$seconds" "$rss_kib" <<'PY'
import json, os, sys
out, servers, records, seconds, rss_kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
n = sum(1 for _ in open(os.path.join(out, "results.jsonl")))
assert n == records, f"results.jsonl has {n} records, the shards {records}"
meta = json.load(open(os.path.join(out, "audit.json")))
assert len(meta["servers"]) == servers, len(meta["servers"])
verdicts = json.load(open(os.path.join(out, "compat.json")))
sarif = json.load(open(os.path.join(out, "findings.sarif")))
pages = sorted(f for f in os.listdir(os.path.join(out, "pages")) if f.endswith(".html"))
want_pages = -(-servers // 250)
assert len(pages) == want_pages, f"{len(pages)} pages, want {want_pages}"
size = lambda f: os.path.getsize(os.path.join(out, f))
largest = max(size(os.path.join("pages", p)) for p in pages)
mib = lambda b: f"{b / 2**20:.1f} MiB"
print(f"| what | size |\n|---|---:|")
for f in ["results.jsonl", "compat.json", "findings.sarif", "report.html", "report.md"]:
    print(f"| {f} | {mib(size(f))} |")
print(f"| pages/ ({len(pages)} HTML, largest) | {mib(largest)} |")
print(f"\n{len(verdicts)} verdicts, {len(sarif['runs'])} SARIF runs, {seconds:.1f} s, peak RSS {rss_kib / 1024:.0f} MiB")
print(json.dumps({"servers": servers, "records": records, "seconds": seconds,
                  "max_rss_mib": round(rss_kib / 1024), "summary_html_bytes": size("report.html"),
                  "largest_page_bytes": largest, "pages": len(pages)}))
PY
