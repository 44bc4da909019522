"""One Markdown table cell of untrusted text (a server's words, names,
messages): one line, bounded, no markup. Shared by the benches' tables."""
import re


def md(text, clip=140):
    """`text` as a cell: control and invisible characters blanked, one
    line, at most `clip` characters, Markdown's special characters
    escaped."""
    text = re.sub(r"[\x00-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]", " ", str(text))
    text = " ".join(text.split())
    if len(text) > clip:
        text = text[: clip - 1] + "…"
    for ch in "\\`*_[]<>|#":
        text = text.replace(ch, "\\" + ch)
    return text
