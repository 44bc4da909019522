#!/usr/bin/env python3
"""The corpus's servers with how much they are used, as data for the
download-weighted verdict shares (ecosystem-table.py --downloads).

    corpus-downloads.py CATALOGUE NPM_TSV PYPI_TSV MONTH > downloads.tsv

NPM_TSV and PYPI_TSV are the package lists of the machines' `env` entry
(npm: monthly downloads; PyPI: rank among the 15,000 most downloaded,
no counts). One row a corpus server: its name, registry, package, the
npm list's monthly downloads (empty for PyPI) and PyPI rank (empty for
npm, and for a package outside the ranked 15,000), and MONTH, the
lists' date. Only the corpus's packages are looked up: the lists are
read line by line, never sent anywhere.
"""
import csv
import re
import sys
import tomllib


def key(registry, name):
    """A package's name as its registry compares names: PyPI's
    normalized (PEP 503: `awslabs.aws-documentation-mcp-server` is
    `awslabs-aws-documentation-mcp-server`), npm's lowercase."""
    name = name.lower()
    return re.sub(r"[-_.]+", "-", name) if registry == "pypi" else name


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("\n\n")[1].strip())
    catalogue, npm_tsv, pypi_tsv, month = sys.argv[1:]
    servers = tomllib.load(open(catalogue, "rb"))["servers"]
    want = {}
    for name, e in servers.items():
        registry = "pypi" if e["runtime"] == "python" else "npm"
        want.setdefault((registry, key(registry, e["package"])), []).append(name)
    found = {}
    for registry, path, col in (("npm", npm_tsv, "downloads_a_month"),
                                ("pypi", pypi_tsv, "rank_among_15000_most_downloaded")):
        with open(path, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                k = (registry, key(registry, row["name"]))
                if k in want:
                    found[k] = row.get(col) or ""
    out = csv.writer(sys.stdout, delimiter="\t", lineterminator="\n")
    out.writerow(["server", "registry", "package", "npm_downloads_a_month", "pypi_rank", "month"])
    for (registry, package), names in sorted(want.items(), key=lambda kv: kv[1][0]):
        value = found.get((registry, package), "")
        for name in names:
            out.writerow([name, registry, servers[name]["package"],
                          value if registry == "npm" else "",
                          value if registry == "pypi" else "", month])


if __name__ == "__main__":
    main()
