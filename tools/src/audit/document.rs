//! A report as data: headings, paragraphs, lists, tables and figures
//! made of text spans. Each section of an audit report is built once as
//! a [`Document`]'s blocks and rendered twice (`render::markdown`,
//! `render::html`). What a server, a guest or a catalogue said is held
//! here as it said it: only the renderers escape, each for its format,
//! so no section can forget to.

/// A piece of a line.
#[derive(Debug, Clone, PartialEq)]
pub enum Span {
    Text(String),
    Strong(String),
    /// Literal: a command, a flag, a file name.
    Code(String),
    /// Text in the colour of an outcome (plain in Markdown).
    Shade(String, &'static str),
    /// A link to another page of the same report: text, and the page's
    /// path relative to this one without its extension (each renderer
    /// adds its own: `.md`, `.html`).
    Page(String, String),
}

/// One line of spans.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Line(pub Vec<Span>);

impl Line {
    pub fn text(s: impl Into<String>) -> Line {
        Line(vec![Span::Text(s.into())])
    }

    pub fn and(mut self, s: impl Into<String>) -> Line {
        self.0.push(Span::Text(s.into()));
        self
    }

    pub fn strong(mut self, s: impl Into<String>) -> Line {
        self.0.push(Span::Strong(s.into()));
        self
    }

    pub fn code(mut self, s: impl Into<String>) -> Line {
        self.0.push(Span::Code(s.into()));
        self
    }

    pub fn page(mut self, s: impl Into<String>, path: impl Into<String>) -> Line {
        self.0.push(Span::Page(s.into(), path.into()));
        self
    }

    pub fn shade(mut self, s: impl Into<String>, colour: &'static str) -> Line {
        self.0.push(Span::Shade(s.into(), colour));
        self
    }
}

/// A list item and the items under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub line: Line,
    pub sub: Vec<Item>,
}

impl Item {
    pub fn of(line: Line) -> Item {
        Item {
            line,
            sub: Vec::new(),
        }
    }
}

/// A table cell: its lines (one per row of text in it), and in HTML a
/// background shade and a tooltip.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    pub lines: Vec<String>,
    pub shade: Option<&'static str>,
    pub title: Option<String>,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell {
            lines: vec![s.into()],
            ..Cell::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub head: String,
    pub cells: Vec<Cell>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Row>,
    /// A grid of symbols: centred, shaded in HTML.
    pub grid: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Level 2 or 3 (the title is the document's).
    Heading(u8, String),
    Para(Line),
    List {
        ordered: bool,
        items: Vec<Item>,
    },
    Table(Table),
    /// What each colour stands for (HTML; Markdown says it in words).
    Legend(Vec<(String, &'static str)>),
    /// A distribution of milliseconds (an SVG histogram in HTML, its
    /// range and median in Markdown).
    Histogram {
        title: String,
        values: Vec<f64>,
    },
    /// A line that opens onto more (HTML `details`; in Markdown a list
    /// item with the rest under it).
    Details {
        summary: Line,
        body: Vec<Item>,
        /// A program's output, shown whole in HTML and by its last lines
        /// in Markdown: (label, text).
        output: Option<(String, String)>,
    },
}

/// A whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub title: String,
    pub blocks: Vec<Block>,
}

/// A list of plain items.
pub fn list(items: impl IntoIterator<Item = Line>) -> Block {
    Block::List {
        ordered: false,
        items: items.into_iter().map(Item::of).collect(),
    }
}
