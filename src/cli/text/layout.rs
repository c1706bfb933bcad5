//! How human text is laid out: the width its lines must fit and the form its
//! digests take, decided once per command ([`Layout::decide`]) and handed to
//! the text writers of `list`, `log`, `show`, `find` and `audit`.
//!
//! Piped (stdout is no terminal), the text is what it has always been, byte
//! for byte: full digests, and lines as long as they come. On a terminal,
//! every line fits its width (the `TIOCGWINSZ` ioctl on stdout, else
//! `$COLUMNS`, else 80): a long line wraps, its later lines indented. On a
//! terminal narrower than [`NARROW`] columns, or with `--short` (piped too),
//! a digest is shortened to its shortest unique prefix of at least [`SHORT`]
//! hex digits, unique among the store's snapshots and the digests the text
//! names, as git shortens commits: every command takes it back as a prefix.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use crate::cli::output::Report;
use crate::digest::{ManifestDigest, ObjectId};

/// The fewest hex digits a short digest has.
pub const SHORT: usize = 12;

/// A terminal narrower than this many columns gets short digests.
pub const NARROW: usize = 120;

/// The fewest columns text is laid out for, however narrow the terminal.
pub const MIN_WIDTH: usize = 40;

/// The width a terminal that tells none is taken to have.
const DEFAULT_WIDTH: usize = 80;

/// How a report's text is laid out: the width lines fit (none when piped)
/// and how digests are written.
pub struct Layout {
    width: Option<usize>,
    names: Names,
}

/// How digests are written.
enum Names {
    /// All 64 hex digits.
    Full,
    /// The shortest prefix unique among `snapshots` (sorted), of at least
    /// [`SHORT`] digits; each object's prefix length, found in the catalogue.
    Short {
        snapshots: Vec<ManifestDigest>,
        objects: HashMap<ObjectId, usize>,
    },
}

/// What a report's text names: the digests and file contents a short
/// prefix must tell apart from the store's.
#[derive(Debug, Default)]
pub struct Named {
    /// Snapshot digests (an audit's unknown ones included).
    pub snapshots: Vec<ManifestDigest>,
    /// File contents.
    pub objects: Vec<ObjectId>,
}

/// A report whose text follows a [`Layout`]; its [`Report::human`] is that
/// text under [`Layout::plain`].
pub trait Fitted: Report {
    /// What the text names, for short digests to be unique among.
    fn named(&self) -> Named;

    /// Writes the text, laid out by `layout`.
    fn fitted(&self, layout: &Layout, w: &mut dyn Write) -> io::Result<()>;
}

impl Layout {
    /// The layout of piped text: full digests, lines unwrapped.
    pub fn plain() -> Layout {
        Layout {
            width: None,
            names: Names::Full,
        }
    }

    /// The one decision, from stdout and `--short`: on a terminal, its
    /// width; short digests on a narrow terminal or with `--short`, unique
    /// among the snapshots of the store at `root` and what `report` names.
    /// When the store cannot be read for them, digests stay full.
    pub fn decide<R: Fitted>(short: bool, root: &Path, report: &R) -> Layout {
        let stdout = io::stdout();
        let width = if rustix::termios::isatty(&stdout) {
            let ioctl = rustix::termios::tcgetwinsize(&stdout)
                .ok()
                .map(|w| w.ws_col);
            Some(terminal_width(
                ioctl,
                std::env::var("COLUMNS").ok().as_deref(),
            ))
        } else {
            None
        };
        let short = short || width.is_some_and(|w| w < NARROW);
        let names = if short {
            Names::load(root, report.named()).unwrap_or(Names::Full)
        } else {
            Names::Full
        };
        Layout { width, names }
    }

    /// A layout fitting `width` columns, digests shortened among
    /// `snapshots` when `short`; for tests.
    #[cfg(test)]
    fn fitting(width: Option<usize>, short: Option<Vec<ManifestDigest>>) -> Layout {
        let names = match short {
            None => Names::Full,
            Some(mut snapshots) => {
                snapshots.sort_unstable();
                Names::Short {
                    snapshots,
                    objects: HashMap::new(),
                }
            }
        };
        Layout { width, names }
    }

    /// The columns lines fit in; `None` when they are not fitted (piped).
    pub fn width(&self) -> Option<usize> {
        self.width
    }

    /// A snapshot's digest as the text writes it.
    pub fn digest(&self, d: &ManifestDigest) -> String {
        let hex = d.to_hex();
        match &self.names {
            Names::Full => hex,
            Names::Short { snapshots, .. } => {
                let len = unique_len(snapshots, d, ManifestDigest::as_bytes);
                hex[..len].to_string()
            }
        }
    }

    /// A file content's SHA-256 as the text writes it.
    pub fn object(&self, o: &ObjectId) -> String {
        let hex = o.to_hex();
        match &self.names {
            Names::Full => hex,
            Names::Short { objects, .. } => {
                let len = objects.get(o).copied().unwrap_or(hex.len());
                hex[..len].to_string()
            }
        }
    }

    /// Writes one line; fitted, it wraps to the width (see `wrap`), each
    /// further line indented by `indent` spaces.
    pub fn line(&self, w: &mut dyn Write, line: &str, indent: usize) -> io::Result<()> {
        match self.width {
            None => writeln!(w, "{line}"),
            Some(width) => wrap(line, width, indent)
                .iter()
                .try_for_each(|l| writeln!(w, "{l}")),
        }
    }

    /// Writes fields on one line, two spaces apart (leading empty fields
    /// indent it); fitted, it breaks between them first (a field's own runs
    /// of spaces, such as a padded size, are no place to break), each
    /// further line indented by `indent` spaces.
    pub fn fields(&self, w: &mut dyn Write, fields: &[String], indent: usize) -> io::Result<()> {
        let line = fields.join("  ");
        match self.width {
            Some(width) if columns(&line) > width => {
                let blank = fields.iter().take_while(|f| f.is_empty()).count();
                let fields = fields[blank..]
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (if i == 0 { "" } else { "  " }, f.as_str()));
                wrap_fields(&"  ".repeat(blank), fields, width, indent)
                    .iter()
                    .try_for_each(|l| writeln!(w, "{l}"))
            }
            _ => writeln!(w, "{line}"),
        }
    }
}

impl Names {
    /// Short names, unique among the store's snapshots and the snapshots
    /// named; each object named gets the shortest prefix only it has among
    /// the catalogue's contents.
    fn load(root: &Path, named: Named) -> crate::error::Result<Names> {
        let store = crate::cmd::open(root, crate::cmd::Need::Existing)?;
        let cat = store.catalogue();
        let mut snapshots: Vec<ManifestDigest> = cat
            .snapshots(None, None)?
            .into_iter()
            .map(|row| row.digest)
            .chain(named.snapshots)
            .collect();
        snapshots.sort_unstable();
        snapshots.dedup();
        let mut objects = HashMap::new();
        for id in named.objects {
            if objects.contains_key(&id) {
                continue;
            }
            let hex = id.to_hex();
            let mut len = SHORT;
            while len < hex.len() {
                let others = cat.objects_with_prefix(&hex[..len], 2)?;
                match others.iter().find(|o| **o != id) {
                    Some(other) => len = len.max(common_hex(other.as_bytes(), id.as_bytes()) + 1),
                    None => break,
                }
            }
            objects.insert(id, len.min(hex.len()));
        }
        Ok(Names::Short { snapshots, objects })
    }
}

/// The width of a terminal: what the ioctl gives, else `$COLUMNS`, else 80;
/// never under [`MIN_WIDTH`].
fn terminal_width(ioctl: Option<u16>, columns: Option<&str>) -> usize {
    ioctl
        .map(usize::from)
        .filter(|&c| c > 0)
        .or_else(|| {
            columns
                .and_then(|c| c.trim().parse::<usize>().ok())
                .filter(|&c| c > 0)
        })
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// How many leading hex digits `a` and `b` share.
fn common_hex(a: &[u8; 32], b: &[u8; 32]) -> usize {
    let mut n = 0;
    for (x, y) in a.iter().zip(b) {
        if x == y {
            n += 2;
        } else {
            if x >> 4 == y >> 4 {
                n += 1;
            }
            break;
        }
    }
    n
}

/// The length of `d`'s shortest prefix that no other digest of `sorted`
/// shares, and at least [`SHORT`] digits: one more than it shares with its
/// nearest neighbours in order.
fn unique_len<T: Ord>(sorted: &[T], d: &T, bytes: fn(&T) -> &[u8; 32]) -> usize {
    let at = sorted.partition_point(|x| x < d);
    let before = at.checked_sub(1).and_then(|i| sorted.get(i));
    let after = sorted[at..].iter().find(|x| *x != d);
    let shared = [before, after]
        .into_iter()
        .flatten()
        .map(|n| common_hex(bytes(n), bytes(d)))
        .max()
        .unwrap_or(0);
    (shared + 1).clamp(SHORT, 64)
}

/// The number of characters in `s`: the columns it takes, for the text
/// cestore writes.
pub fn columns(s: &str) -> usize {
    s.chars().count()
}

/// A line cut into lines of at most `width` characters. A line that fits is
/// left as it is. Otherwise it breaks between fields (runs of two spaces or
/// more) where it can, inside a field at single spaces when the field is
/// longer than a line, and inside a word only when the word is; every
/// line after the first starts with `indent` spaces.
pub fn wrap(line: &str, width: usize, indent: usize) -> Vec<String> {
    if columns(line) <= width {
        return vec![line.to_string()];
    }
    let body = line.trim_start_matches(' ');
    let lead = &line[..line.len() - body.len()];
    wrap_fields(lead, split_fields(body), width, indent)
}

/// Fields, each after its separator, laid on lines of at most `width`
/// characters as [`wrap`] lays them, the first line starting with `lead`.
fn wrap_fields<'a>(
    lead: &str,
    fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    width: usize,
    indent: usize,
) -> Vec<String> {
    let indent = indent.min(width.saturating_sub(1));
    let mut out = Lines {
        done: Vec::new(),
        current: lead.to_string(),
        empty: true,
        width,
        indent,
    };
    for (sep, field) in fields {
        if out.fits(sep, field) {
            out.push(sep, field);
            continue;
        }
        if indent + columns(field) <= width {
            out.break_line();
            if out.fits("", field) {
                out.push("", field);
                continue;
            }
        }
        for (i, word) in field.split(' ').enumerate() {
            let sep = if i == 0 { sep } else { " " };
            if !out.fits(sep, word) {
                out.break_line();
            }
            if out.fits(sep, word) {
                out.push(sep, word);
            } else {
                out.push_word(word);
            }
        }
    }
    out.finish()
}

/// `body`'s fields, each with the spaces before it (none for the first):
/// a field ends where two spaces or more follow.
fn split_fields(body: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = body;
    let mut sep = "";
    while !rest.is_empty() {
        let end = rest.find("  ").unwrap_or(rest.len());
        out.push((sep, &rest[..end]));
        let after = rest[end..].trim_start_matches(' ');
        sep = &rest[end..rest.len() - after.len()];
        rest = after;
    }
    out
}

/// Lines being filled by [`wrap`].
struct Lines {
    done: Vec<String>,
    current: String,
    /// Whether `current` holds only its indentation.
    empty: bool,
    width: usize,
    indent: usize,
}

impl Lines {
    /// Whether `text`, after `sep`, still fits the current line (always,
    /// on a line holding nothing yet, when it fits a line at all).
    fn fits(&self, sep: &str, text: &str) -> bool {
        let sep = if self.empty { 0 } else { columns(sep) };
        columns(&self.current) + sep + columns(text) <= self.width
    }

    fn push(&mut self, sep: &str, text: &str) {
        if !self.empty {
            self.current.push_str(sep);
        }
        self.current.push_str(text);
        self.empty = false;
    }

    /// Puts a word on the line, cut across further lines when it is longer
    /// than one.
    fn push_word(&mut self, word: &str) {
        let mut rest = word;
        while !rest.is_empty() {
            let room = self.width.saturating_sub(columns(&self.current));
            if room == 0 {
                // Only a first line's own indentation can fill it.
                self.empty = false;
                self.break_line();
                continue;
            }
            let cut = rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i);
            self.push("", &rest[..cut]);
            rest = &rest[cut..];
            if !rest.is_empty() {
                self.break_line();
            }
        }
    }

    /// Ends the current line, unless it holds nothing yet.
    fn break_line(&mut self) {
        if self.empty {
            return;
        }
        let next = " ".repeat(self.indent);
        self.done.push(std::mem::replace(&mut self.current, next));
        self.empty = true;
    }

    fn finish(mut self) -> Vec<String> {
        if !self.empty {
            self.done.push(self.current);
        }
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(hex: &str) -> ManifestDigest {
        format!("{hex:0<64}").parse().unwrap()
    }

    #[test]
    fn a_line_that_fits_is_left_alone() {
        let line = "abc  def   ghi  ";
        assert_eq!(wrap(line, 16, 2), vec![line.to_string()]);
    }

    #[test]
    fn lines_break_between_fields_first() {
        let line = "0123456789ab  compound-engineering 1.0.0  4 files  108 bytes";
        assert_eq!(
            wrap(line, 40, 2),
            vec![
                "0123456789ab  compound-engineering 1.0.0",
                "  4 files  108 bytes"
            ]
        );
    }

    #[test]
    fn a_field_longer_than_a_line_breaks_at_its_spaces_and_a_word_inside_itself() {
        let line =
            "at  source git 0123456789ab at plugins/x of /a/very/long/repository/path/here, clean";
        let lines = wrap(line, 24, 4);
        assert!(lines.iter().all(|l| columns(l) <= 24), "{lines:#?}");
        assert_eq!(lines[0], "at  source git");
        assert!(
            lines[1..].iter().all(|l| l.starts_with("    ")),
            "{lines:#?}"
        );
        // Nothing is lost: the words come back in order.
        let words: String = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
        assert!(
            words.replace(' ', "").contains(&line.replace(' ', "")[4..]),
            "{words}"
        );
    }

    #[test]
    fn leading_spaces_stay_on_the_first_line() {
        let lines = wrap("  key 0123456789 at 2026-01-01T00:00:00.000Z", 30, 4);
        assert_eq!(lines[0], "  key 0123456789 at");
        assert_eq!(lines[1], "    2026-01-01T00:00:00.000Z");
    }

    #[test]
    fn no_line_is_longer_than_the_width() {
        let words = [
            "a",
            "bb",
            "ccccccccccccccccccccccccccccccccccccccccccc",
            "é",
            "  ",
        ];
        for width in 10..50 {
            for n in 0..40 {
                let line: String = (0..n)
                    .map(|i| words[(i * 7 + n) % words.len()])
                    .collect::<Vec<_>>()
                    .join(" ");
                for l in wrap(&line, width, 4) {
                    assert!(columns(&l) <= width, "{width}: {l:?} of {line:?}");
                }
            }
        }
    }

    #[test]
    fn short_digests_are_unique_prefixes_of_at_least_twelve_digits() {
        let a = digest("0123456789abcdef");
        let b = digest("0123456789abcdff");
        let c = digest("0123456789ab1");
        let far = digest("f");
        let layout = Layout::fitting(None, Some(vec![a, b, c, far]));
        assert_eq!(layout.digest(&a), "0123456789abcde");
        assert_eq!(layout.digest(&b), "0123456789abcdf");
        assert_eq!(layout.digest(&c), "0123456789ab1");
        assert_eq!(layout.digest(&far), "f00000000000");
        // A digest not among them is told apart from its neighbours too.
        assert_eq!(layout.digest(&digest("0123456789abce")), "0123456789abce");
        assert_eq!(Layout::plain().digest(&a), a.to_hex());
        assert_eq!(
            unique_len(&[a, a], &a, ManifestDigest::as_bytes),
            SHORT,
            "a digest is not told apart from itself"
        );
    }

    #[test]
    fn the_width_is_the_terminals_else_columns_else_eighty() {
        assert_eq!(terminal_width(Some(100), Some("60")), 100);
        assert_eq!(terminal_width(Some(0), Some("60")), 60);
        assert_eq!(terminal_width(None, Some(" 70 ")), 70);
        assert_eq!(terminal_width(None, Some("wide")), 80);
        assert_eq!(terminal_width(None, None), 80);
        assert_eq!(terminal_width(Some(12), None), MIN_WIDTH);
    }
}
