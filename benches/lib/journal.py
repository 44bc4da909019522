"""An audit's journal (results.jsonl) as the bench scripts read it: one
record a line, each a cell; a line that does not read as a record (a
torn last line, a hostile one) is left out. The last record of a cell
wins, as in a resumed audit."""
import json


def records(path):
    """{(server, profile): record} of the journal at `path`."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict) and isinstance(r.get("server"), str) and isinstance(r.get("profile"), str):
                out[(r["server"], r["profile"])] = r
    return out
