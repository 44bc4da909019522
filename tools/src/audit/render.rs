//! A [`Document`] as Markdown and as one self-contained HTML page
//! (inline CSS and SVG, no external resource). HTML is written with maud,
//! whose templates escape every value by construction; Markdown has no
//! such engine, so every span goes through `text::md` (or `text::code`)
//! here, and nowhere else.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::document::{Block, Cell, Document, Item, Line, Span, Table};
use super::text::{code, md};

/// Lines of a program's output shown in Markdown.
const OUTPUT_LINES: usize = 3;

pub fn markdown(doc: &Document) -> String {
    let mut m = format!("# {}\n\n", md(&doc.title));
    for b in &doc.blocks {
        md_block(&mut m, b);
    }
    m
}

fn md_line(l: &Line) -> String {
    l.0.iter()
        .map(|s| match s {
            Span::Text(t) | Span::Shade(t, _) => md(t),
            Span::Strong(t) => format!("**{}**", md(t)),
            Span::Code(t) => format!("`{}`", code(t)),
            Span::Page(t, path) => format!("[{}](<{}.md>)", md(t), link(path)),
        })
        .collect()
}

/// A page path for a Markdown link target in `<…>`: only what cannot
/// end or break it is dropped (our paths are plain file names).
fn link(path: &str) -> String {
    path.chars()
        .filter(|c| !matches!(c, '<' | '>' | '\n' | '\r'))
        .collect()
}

fn md_items(m: &mut String, items: &[Item], depth: usize) {
    for i in items {
        m.push_str(&"  ".repeat(depth));
        m.push_str("- ");
        m.push_str(&md_line(&i.line));
        m.push('\n');
        md_items(m, &i.sub, depth + 1);
    }
}

fn md_cell(c: &Cell) -> String {
    c.lines.iter().map(|l| md(l)).collect::<Vec<_>>().join("; ")
}

fn md_table(m: &mut String, t: &Table) {
    let row = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    m.push_str(&row(t.head.iter().map(|h| md(h)).collect()));
    let rule = if t.grid { ":-:" } else { "---" };
    m.push_str("|---|");
    m.push_str(&format!("{rule}|").repeat(t.head.len().saturating_sub(1)));
    m.push('\n');
    for r in &t.rows {
        let mut cells = vec![md(&r.head)];
        cells.extend(r.cells.iter().map(md_cell));
        m.push_str(&row(cells));
    }
    m.push('\n');
}

fn md_block(m: &mut String, b: &Block) {
    match b {
        Block::Heading(level, t) => {
            // A list of details ends without a blank line: a heading after
            // it gets one.
            if !m.ends_with("\n\n") {
                m.push('\n');
            }
            m.push_str(&format!(
                "{} {}\n\n",
                "#".repeat(usize::from(*level)),
                md(t)
            ));
        }
        Block::Para(l) => {
            m.push_str(&md_line(l));
            m.push_str("\n\n");
        }
        Block::List { ordered, items } => {
            match ordered {
                true => {
                    for (n, i) in items.iter().enumerate() {
                        m.push_str(&format!("{}. {}\n", n + 1, md_line(&i.line)));
                        md_items(m, &i.sub, 1);
                    }
                }
                false => md_items(m, items, 0),
            }
            m.push('\n');
        }
        Block::Table(t) => md_table(m, t),
        Block::Legend(_) => {}
        Block::Histogram { title, values } => {
            let line = match summary(values) {
                None => format!("{title}: no data yet"),
                Some((min, median, max)) => format!(
                    "{title} ({} runs): median {median:.0} ms, {min:.0}–{max:.0} ms",
                    values.len()
                ),
            };
            m.push_str(&format!("- {}\n\n", md(&line)));
        }
        Block::Details {
            summary,
            body,
            output,
        } => {
            m.push_str(&format!("- {}\n", md_line(summary)));
            md_items(m, body, 1);
            if let Some((label, text)) = output {
                let last: Vec<&str> = text.trim_end().lines().rev().take(OUTPUT_LINES).collect();
                let last: Vec<&str> = last.into_iter().rev().collect();
                m.push_str(&format!("  - {label}: {}\n", md(&last.join(" ⏎ "))));
            }
        }
    }
}

/// Min, median and max.
fn summary(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = match n {
        0 => return None,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    };
    Some((v[0], median, v[n - 1]))
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:80em;color:#222}\
table.grid{border-collapse:collapse}table.grid td,table.grid th{border:1px solid #ccc;padding:.3em .6em;text-align:center}\
table.grid td.cell{color:#fff;font-weight:600}th.server{text-align:left}\
table.plain{border-collapse:collapse;max-width:100%}table.plain td,table.plain th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top;overflow-wrap:break-word}table.plain td:last-child{overflow-wrap:anywhere}\
.legend span{display:inline-block;padding:.1em .5em;margin-right:.4em;color:#fff;border-radius:3px}\
figure{display:inline-block;margin:1em 2em 1em 0}figcaption{font-weight:600}\
details{margin:.4em 0}pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap}";

pub fn html(doc: &Document) -> String {
    let page = html! {
        (DOCTYPE)
        html {
            head {
                meta charset="utf-8";
                title { (doc.title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (doc.title) }
                @for b in &doc.blocks { (html_block(b)) }
            }
        }
    };
    // maud escapes markup; what would drive a reader's terminal (a raw
    // ESC, when the file is shown with cat) or reorder a line (U+202E)
    // is shown escaped as everywhere else. Our own template has neither.
    mcpvm::logger::printable_lines(&page.into_string()).into_owned() + "\n"
}

fn html_line(l: &Line) -> Markup {
    html! {
        @for s in &l.0 {
            @match s {
                Span::Text(t) => (t),
                Span::Strong(t) => b { (t) },
                Span::Code(t) => code { (t) },
                Span::Shade(t, colour) => span style={ "color:" (colour) } { (t) },
                Span::Page(t, path) => a href={ (path) ".html" } { (t) },
            }
        }
    }
}

fn html_items(items: &[Item]) -> Markup {
    html! {
        @for i in items {
            li {
                (html_line(&i.line))
                @if !i.sub.is_empty() { ul { (html_items(&i.sub)) } }
            }
        }
    }
}

fn html_cell(c: &Cell, grid: bool) -> Markup {
    let lines = html! {
        @for (n, l) in c.lines.iter().enumerate() {
            @if n > 0 { br; }
            (l)
        }
    };
    match (c.shade, grid) {
        (Some(shade), _) => html! {
            td class="cell" style={ "background:" (shade) } title=[c.title.as_deref()] { (lines) }
        },
        _ => html! { td title=[c.title.as_deref()] { (lines) } },
    }
}

fn html_table(t: &Table) -> Markup {
    let class = if t.grid { "grid" } else { "plain" };
    html! {
        table class=(class) {
            tr { @for h in &t.head { th { (h) } } }
            @for r in &t.rows {
                tr {
                    th class="server" { (r.head) }
                    @for c in &r.cells { (html_cell(c, t.grid)) }
                }
            }
        }
    }
}

fn html_block(b: &Block) -> Markup {
    match b {
        Block::Heading(2, t) => html! { h2 { (t) } },
        Block::Heading(_, t) => html! { h3 { (t) } },
        Block::Para(l) => html! { p { (html_line(l)) } },
        Block::List {
            ordered: true,
            items,
        } => html! { ol { (html_items(items)) } },
        Block::List { items, .. } => html! { ul { (html_items(items)) } },
        Block::Table(t) => html_table(t),
        Block::Legend(keys) => html! {
            p class="legend" {
                @for (name, colour) in keys { span style={ "background:" (colour) } { (name) } }
            }
        },
        Block::Histogram { title, values } => histogram(title, values, 12),
        Block::Details {
            summary,
            body,
            output,
        } => html! {
            details {
                summary { (html_line(summary)) }
                @if !body.is_empty() { ul { (html_items(body)) } }
                @if let Some((_, text)) = output { pre { (text.trim_end()) } }
            }
        },
    }
}

/// An SVG histogram of `values` (ms) in `bins` equal bins, with its axes:
/// runs (the count over each bar, the y axis from 0 to the tallest)
/// against milliseconds (bin edges on the x axis).
fn histogram(title: &str, values: &[f64], bins: usize) -> Markup {
    let (w, h, left, bottom, top_pad) = (460.0, 180.0, 40.0, 34.0, 16.0);
    let caption = format!("{title} ({} runs)", values.len());
    if values.is_empty() {
        return html! {
            figure {
                figcaption { (caption) }
                svg width=(w) height=(h) role="img" font-size="11" {
                    text x="10" y="20" { "no data yet" }
                }
            }
        };
    }
    let max = values.iter().cloned().fold(f64::MIN, f64::max);
    let min = values.iter().cloned().fold(f64::MAX, f64::min);
    let span = (max - min).max(1.0);
    let mut counts = vec![0usize; bins];
    for v in values {
        let i = (((v - min) / span) * bins as f64).floor() as usize;
        counts[i.min(bins - 1)] += 1;
    }
    let tallest = *counts.iter().max().unwrap_or(&1) as f64;
    let (x0, y0) = (left, h - bottom);
    let plot_w = w - left - 10.0;
    let plot_h = y0 - top_pad;
    let bw = plot_w / bins as f64;
    let f1 = |v: f64| format!("{v:.1}");
    html! {
        figure {
            figcaption { (caption) }
            svg width=(w) height=(h) role="img" font-size="11" {
                line x1=(x0) y1=(y0) x2=(x0 + plot_w) y2=(y0) stroke="#444" {}
                line x1=(x0) y1=(y0) x2=(x0) y2=(top_pad) stroke="#444" {}
                text x=(x0 - 4.0) y=(y0) text-anchor="end" { "0" }
                text x=(x0 - 4.0) y=(top_pad + 4.0) text-anchor="end" { (tallest) }
                text x="4" y=(y0 / 2.0 + 10.0) transform={ "rotate(-90 10 " (y0 / 2.0) ")" } { "runs" }
                @for (i, c) in counts.iter().enumerate() {
                    @let bh = (*c as f64 / tallest) * plot_h;
                    @let x = x0 + i as f64 * bw;
                    rect x=(f1(x + 1.0)) y=(f1(y0 - bh)) width=(f1(bw - 2.0)) height=(f1(bh)) fill="#4a7bd0" {
                        title { (c) " runs" }
                    }
                    @if *c > 0 {
                        text x=(f1(x + bw / 2.0)) y=(f1(y0 - bh - 3.0)) text-anchor="middle" { (c) }
                    }
                }
                @for (frac, anchor) in [(0.0, "start"), (0.5, "middle"), (1.0, "end")] {
                    text x=(f1(x0 + frac * plot_w)) y=(y0 + 14.0) text-anchor=(anchor) {
                        (format!("{:.0} ms", min + frac * span))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::document::{list, Row};

    fn doc(blocks: Vec<Block>) -> Document {
        Document {
            title: "t".into(),
            blocks,
        }
    }

    /// A table whose every heading, cell and tooltip is `text` (a grid
    /// when shaded).
    fn table_of(text: &str, shade: Option<&'static str>) -> Block {
        Block::Table(Table {
            head: vec![text.into(), text.into()],
            rows: vec![Row {
                head: text.into(),
                cells: vec![Cell {
                    lines: vec![text.into()],
                    shade,
                    title: Some(text.into()),
                }],
            }],
            grid: shade.is_some(),
        })
    }

    /// What a server said is text in both formats, whatever it holds.
    #[test]
    fn every_span_is_escaped_for_its_format() {
        let evil = "<img src=x> | # *b* `c` [l](javascript:x)\n\u{1b}[2J";
        let d = doc(vec![
            Block::Para(Line::text(evil).strong(evil).code(evil)),
            table_of(evil, Some("#fff")),
            list([Line::text(evil)]),
        ]);
        let m = markdown(&d);
        for line in m.lines().filter(|l| l.contains("img")) {
            assert!(!line.contains('\u{1b}'), "{line}");
            // Outside code spans, what is left once escapes are taken out
            // holds no markup but our own bold markers and table bars.
            let (mut bare, mut in_code, mut chars) = (String::new(), false, line.chars());
            while let Some(c) = chars.next() {
                match c {
                    '\\' if !in_code => {
                        chars.next();
                    }
                    '`' => in_code = !in_code,
                    c if !in_code => bare.push(c),
                    _ => {}
                }
            }
            let bare = bare.replace("**", "");
            for c in ['<', '>', '[', ']', '#', '*', '`'] {
                assert!(!bare.contains(c), "{c} in {line}");
            }
        }
        let h = html(&d);
        assert!(
            !h.contains("<img") && h.contains("&lt;img src=x&gt;"),
            "{h}"
        );
        assert!(!h.contains("title=\"<img"), "{h}");
    }

    /// A raw ESC or a right-to-left override reaches neither format: both
    /// show it escaped, in text, tables and tooltips alike.
    #[test]
    fn terminal_escapes_and_bidi_overrides_are_shown_escaped_in_both_formats() {
        let evil = "evil\u{202e}gpj.exe \u{1b}]0;title\u{7} \u{2066}x";
        let d = doc(vec![
            Block::Para(Line::text(evil).strong(evil).code(evil)),
            table_of(evil, None),
            Block::Details {
                summary: Line::text(evil),
                body: Vec::new(),
                output: Some(("stderr".into(), format!("{evil}\nsecond line"))),
            },
        ]);
        for (format, text) in [("markdown", markdown(&d)), ("html", html(&d))] {
            let bad: Vec<char> = text
                .chars()
                .filter(|&c| c != '\n' && mcpvm_protocol::text::is_unsafe(c))
                .collect();
            assert!(bad.is_empty(), "{format}: {bad:?}");
            assert!(
                text.contains("u{202e}") && text.contains("u{1b}"),
                "{format}"
            );
        }
    }

    #[test]
    fn histograms_have_axes_and_counts_and_markdown_its_range() {
        let d = doc(vec![Block::Histogram {
            title: "Boot".into(),
            values: vec![100.0, 110.0, 120.0, 400.0],
        }]);
        let h = html(&d);
        assert!(h.contains("(4 runs)"), "{h}");
        assert_eq!(h.matches("<line").count(), 2, "two axes: {h}");
        assert!(h.contains("text-anchor=\"middle\">3</text>"), "{h}");
        assert!(
            h.contains(">runs</text>")
                && h.contains(">100 ms</text>")
                && h.contains(">400 ms</text>"),
            "{h}"
        );
        assert!(
            markdown(&d).contains("- Boot (4 runs): median 115 ms, 100–400 ms"),
            "{}",
            markdown(&d)
        );
    }
}
