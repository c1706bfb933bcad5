//! Reading results files: each input opened (plain, gzip or zstd, within
//! bounded memory), cut into lines, and each line parsed in place for only
//! the three fields asked for.
//!
//! A line is a row exactly when Python's `json.loads` of it (decoded as
//! strict UTF-8) gives a dict, as the harness reads it back. serde_json reads
//! a line first, in place and fast; it accepts a subset of what Python does
//! (no `NaN`, `Infinity`, `-Infinity`, numbers beyond a double's range, lone
//! surrogates in the strings it keeps, nesting deeper than 128 in what it
//! keeps), and gives the same fields for what it accepts, but it skips the
//! values it does not keep unchecked for depth and integer length. A line it
//! refuses, or one that may nest deeper than Python reads or hold an integer
//! literal Python refuses ([`python_must_decide`]), is read again by
//! [`pyjson::walk`], Python's own grammar, which decides: a row, or a
//! malformed line with Python's reason.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::{Error, IoContext, Misuse, Result, RowField};
use crate::pyjson::{self, Event, PyString};

use super::*;

/// The three fields a row is read for, each a dotted path into nested objects.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Fields {
    /// The manifest digest's field.
    pub digest: String,
    /// The claimed version's field.
    pub version: String,
    /// The arm's field.
    pub arm: String,
}

impl Default for Fields {
    fn default() -> Self {
        Fields {
            digest: DEFAULT_DIGEST_FIELD.into(),
            version: DEFAULT_VERSION_FIELD.into(),
            arm: DEFAULT_ARM_FIELD.into(),
        }
    }
}

/// The slots of a row: the three fields of [`Fields`], then the digest
/// fields of the field table ([`FieldTable`]), in order; slots past the
/// table's are never filled. A fixed array, so that a row's values are
/// held in place, borrowed from the line, without allocating.
pub(super) const SLOTS: usize = 3 + MAX_TABLE_FIELDS;

/// The fields as one tree of object keys, each leaf a slot of a row.
#[derive(Debug, Default)]
pub(super) struct Node {
    children: Vec<(String, Node)>,
    slot: Option<usize>,
}

impl Node {
    /// The tree of the three field paths and the default field table.
    #[cfg(test)]
    pub(super) fn of(fields: &Fields) -> Result<Node> {
        Node::with_table(fields, &FieldTable::default())
    }

    /// The tree of the three field paths; overlapping paths are refused.
    /// Each field of `table` is read into its slot too, unless it overlaps
    /// one of the three paths or a field before it: then a default field
    /// is not read (the row's value there is the other field's, as
    /// before), and a field given is a misuse.
    pub(super) fn with_table(fields: &Fields, table: &FieldTable) -> Result<Node> {
        let mut root = Node::default();
        let named = [
            (RowField::Digest, &fields.digest),
            (RowField::Version, &fields.version),
            (RowField::Arm, &fields.arm),
        ];
        for (slot, &(field, path)) in named.iter().enumerate() {
            let parts: Vec<&str> = path.split('.').collect();
            if parts.iter().any(|p| p.is_empty()) {
                return Err(Misuse::FieldWithEmptyKey {
                    field,
                    path: path.clone(),
                }
                .into());
            }
            let mut node = &mut root;
            for part in parts {
                if node.slot.is_some() {
                    return Err(overlap(&named, field, path));
                }
                node = node.child_or_new(part);
            }
            if node.slot.is_some() || !node.children.is_empty() {
                return Err(overlap(&named, field, path));
            }
            node.slot = Some(slot);
        }
        for (i, field) in table.fields.iter().enumerate() {
            let parts: Vec<&str> = field.name.split('.').collect();
            if root.fits(&parts) {
                root.insert(&parts, 3 + i);
            } else if table.given.get(i).copied().unwrap_or(false) {
                return Err(Misuse::FieldSpec {
                    spec: format!("{}={}", field.name, field.kind.as_str()),
                    why: "it is, holds or lies inside another field the audit reads".into(),
                }
                .into());
            }
        }
        Ok(root)
    }

    /// Whether a leaf at `parts` overlaps no slot already placed.
    fn fits(&self, parts: &[&str]) -> bool {
        let mut node = self;
        for part in parts {
            if node.slot.is_some() {
                return false;
            }
            match node.child(part) {
                Some(n) => node = n,
                None => return true,
            }
        }
        node.slot.is_none() && node.children.is_empty()
    }

    /// Places slot `slot` at `parts` (which [`Node::fits`]).
    fn insert(&mut self, parts: &[&str], slot: usize) {
        let mut node = self;
        for part in parts {
            node = node.child_or_new(part);
        }
        node.slot = Some(slot);
    }

    /// The child named `part`, made when there is none.
    fn child_or_new(&mut self, part: &str) -> &mut Node {
        let at = match self.children.iter().position(|(k, _)| k == part) {
            Some(at) => at,
            None => {
                self.children.push((part.to_string(), Node::default()));
                self.children.len() - 1
            }
        };
        &mut self.children[at].1
    }

    fn child(&self, key: &str) -> Option<&Node> {
        self.children
            .iter()
            .find_map(|(k, n)| (k == key).then_some(n))
    }

    /// Empties the slots under this node: a key met again replaces its
    /// value whole, as in a Python dict (the last of a repeated key wins).
    /// Only a node on a field's path needs it: a field's own slot is
    /// overwritten by its next value.
    fn clear(&self, vals: &mut [Val<'_>; SLOTS]) {
        if let Some(slot) = self.slot {
            vals[slot] = Val::Absent;
        }
        for (_, child) in &self.children {
            child.clear(vals);
        }
    }
}

fn overlap(named: &[(RowField, &String); 3], field: RowField, path: &str) -> Error {
    let others = named
        .iter()
        .filter(|(f, _)| *f != field)
        .map(|(f, p)| (*f, p.to_string()))
        .collect();
    Misuse::FieldsOverlap {
        field,
        path: path.to_string(),
        others,
    }
    .into()
}

/// One field's value in a row.
#[derive(Debug, Default)]
pub(super) enum Val<'a> {
    /// The field is not there.
    #[default]
    Absent,
    /// `null`.
    Null,
    /// A string.
    Str(Cow<'a, str>),
    /// A string that holds a lone surrogate (`"\ud800"` decodes to one in
    /// Python): no Rust string, and never a digest, a snapshot's version or
    /// a `ce_*` arm.
    Lone(PyString),
    /// Anything else: what it is.
    Other(&'static str),
}

impl Val<'_> {
    pub(super) fn present(&self) -> bool {
        !matches!(self, Val::Absent | Val::Null)
    }

    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Reads one object, filling the slots its tree names.
struct ObjectSeed<'n, 'v, 'a> {
    pub(super) node: &'n Node,
    pub(super) vals: &'v mut [Val<'a>; SLOTS],
    /// Whether anything but an object is an error (the row itself) or
    /// ignored (a nested value on a field's path).
    top: bool,
}

impl<'de, 'n, 'v> DeserializeSeed<'de> for ObjectSeed<'n, 'v, 'de> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.top {
            d.deserialize_map(self)
        } else {
            d.deserialize_any(self)
        }
    }
}

/// A key, matched against a node's children without allocating.
struct KeySeed<'n>(pub(super) &'n Node);

impl<'de, 'n> DeserializeSeed<'de> for KeySeed<'n> {
    type Value = Option<&'n Node>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'n> Visitor<'_> for KeySeed<'n> {
    type Value = Option<&'n Node>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.child(key))
    }
}

/// A field's value.
struct ValSeed;

impl<'de> DeserializeSeed<'de> for ValSeed {
    type Value = Val<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Val<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValSeed {
    type Value = Val<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Val<'de>, E> {
        Ok(Val::Null)
    }
    fn visit_none<E>(self) -> Result<Val<'de>, E> {
        Ok(Val::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Val<'de>, E> {
        Ok(Val::Other("a boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Val<'de>, E> {
        Ok(Val::Other("a number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Val<'de>, E> {
        Ok(Val::Other("a number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Val<'de>, E> {
        Ok(Val::Other("a number"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Val<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Val::Other("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Val<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Val::Other("an object"))
    }
}

impl<'de> Visitor<'de> for ObjectSeed<'_, '_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(child) = map.next_key_seed(KeySeed(self.node))? {
            match child {
                Some(n) if n.slot.is_some() => {
                    let v = map.next_value_seed(ValSeed)?;
                    if let Some(slot) = n.slot {
                        self.vals[slot] = v;
                    }
                }
                Some(n) => {
                    n.clear(self.vals);
                    map.next_value_seed(ObjectSeed {
                        node: n,
                        vals: &mut *self.vals,
                        top: false,
                    })?
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    // A nested value that is not an object holds none of the fields.
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

/// Parses one line into the three slots, or says why it is not a row.
///
/// JSON is UTF-8: a line that is not is no row, whatever it holds, and the
/// reason names the first byte that breaks it (serde_json skips the strings
/// it does not keep without checking them, so the line is checked first).
/// serde_json reads the line in place; what it refuses (or skips unread and
/// Python might refuse) is read by Python's grammar, which decides.
#[cfg(test)]
pub(super) fn parse_row<'a>(line: &'a [u8], node: &Node) -> Result<[Val<'a>; SLOTS], String> {
    let mut vals: [Val<'a>; SLOTS] = Default::default();
    parse_row_into(line, node, &mut vals)?;
    Ok(vals)
}

/// [`parse_row`] into slots the caller holds (all absent), so that the
/// row is not moved.
pub(super) fn parse_row_into<'a>(
    line: &'a [u8],
    node: &Node,
    vals: &mut [Val<'a>; SLOTS],
) -> Result<(), String> {
    let text = std::str::from_utf8(line).map_err(|e| not_utf8(&e))?;
    let mut de = serde_json::Deserializer::from_str(text);
    let fast = ObjectSeed {
        node,
        vals: &mut *vals,
        top: true,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    if fast.is_ok() && !python_must_decide(line) {
        return Ok(());
    }
    *vals = python_row(line, node)?;
    Ok(())
}

/// Whether a line serde_json accepted may yet be one Python refuses.
/// serde_json skips the values no field reads without limiting their
/// nesting or converting their integers, and Python refuses nesting deeper
/// than [`ROW_MAX_DEPTH`] and integer literals of more than
/// [`pyjson::MAX_INT_DIGITS`] digits. A line with more than
/// [`ROW_MAX_DEPTH`] brackets (`[` or `{`, in strings too), or with a run
/// of more digits than that, is read by Python's grammar; a shorter line
/// holds neither and is not looked at.
fn python_must_decide(line: &[u8]) -> bool {
    if line.len() <= ROW_MAX_DEPTH {
        return false;
    }
    if memchr::memchr2_iter(b'[', b'{', line)
        .nth(ROW_MAX_DEPTH)
        .is_some()
    {
        return true;
    }
    // A run of more than MAX_INT_DIGITS digits covers a multiple of
    // MAX_INT_DIGITS + 1: only the digits there are measured.
    let long = pyjson::MAX_INT_DIGITS + 1;
    (long - 1..line.len()).step_by(long).any(|at| {
        let digit = |i: &usize| line[*i].is_ascii_digit();
        digit(&at) && {
            let before = (0..at).rev().take_while(digit).count();
            let after = (at..line.len()).take_while(digit).count();
            before + after >= long
        }
    })
}

/// A line read as Python's `json.loads` reads it ([`pyjson::walk`], at
/// [`ROW_MAX_DEPTH`]), taking the three fields as they pass.
fn python_row(line: &[u8], node: &Node) -> Result<[Val<'static>; SLOTS], String> {
    let mut row = RowEvents {
        root: node,
        kind: None,
        path: Vec::new(),
        skip: 0,
        next: None,
        vals: Default::default(),
    };
    pyjson::walk(line, ROW_MAX_DEPTH, |event| row.event(event))
        .map_err(|e| format!("not JSON: {e}"))?;
    match row.kind {
        Some(kind) => Err(format!("{kind}, not an object")),
        None => Ok(row.vals),
    }
}

/// The three fields taken from a line's [`Event`]s as they pass.
struct RowEvents<'n> {
    /// The fields' tree.
    root: &'n Node,
    /// What the line is when it is no object, once its first event came.
    kind: Option<&'static str>,
    /// The objects open on a field's path, the row itself first.
    path: Vec<&'n Node>,
    /// How many containers are open inside a value no field path enters.
    skip: usize,
    /// The node of the member whose value comes next, when its key is on a
    /// field's path.
    next: Option<&'n Node>,
    vals: [Val<'static>; SLOTS],
}

impl RowEvents<'_> {
    fn event(&mut self, event: Event) {
        if self.skip > 0 {
            match event {
                Event::ObjectStart | Event::ArrayStart => self.skip += 1,
                Event::End => self.skip -= 1,
                Event::Key(_) | Event::Scalar(_) => {}
            }
            return;
        }
        let Some(&node) = self.path.last() else {
            // The line's first event: a row is an object.
            match event {
                Event::ObjectStart => self.path.push(self.root),
                Event::ArrayStart => {
                    self.kind = Some("a JSON array");
                    self.skip = 1;
                }
                Event::Scalar(v) => self.kind = Some(json_kind(&v)),
                Event::Key(_) | Event::End => {}
            }
            return;
        };
        match event {
            Event::Key(key) => {
                self.next = key.as_str().and_then(|k| node.child(k));
                if let Some(n) = self.next.filter(|n| n.slot.is_none()) {
                    n.clear(&mut self.vals);
                }
            }
            Event::End => {
                self.path.pop();
            }
            Event::ObjectStart | Event::ArrayStart | Event::Scalar(_) => {
                let container = !matches!(event, Event::Scalar(_));
                match self.next.take() {
                    Some(n) => match n.slot {
                        Some(slot) => {
                            self.vals[slot] = val_of(event);
                            self.skip = usize::from(container);
                        }
                        None if matches!(event, Event::ObjectStart) => self.path.push(n),
                        None => self.skip = usize::from(container),
                    },
                    None => self.skip = usize::from(container),
                }
            }
        }
    }
}

/// A field's value from the event that starts it.
fn val_of(event: Event) -> Val<'static> {
    match event {
        Event::ObjectStart => Val::Other("an object"),
        Event::ArrayStart => Val::Other("an array"),
        Event::Scalar(pyjson::Value::Null) => Val::Null,
        Event::Scalar(pyjson::Value::Bool(_)) => Val::Other("a boolean"),
        Event::Scalar(pyjson::Value::Str(s)) => match s.into_string() {
            Ok(s) => Val::Str(Cow::Owned(s)),
            Err(lone) => Val::Lone(lone),
        },
        Event::Scalar(_) => Val::Other("a number"),
        Event::Key(_) | Event::End => Val::Absent,
    }
}

/// What a JSON value other than an object is.
fn json_kind(value: &pyjson::Value) -> &'static str {
    match value {
        pyjson::Value::Null => "JSON null",
        pyjson::Value::Bool(_) => "a JSON boolean",
        pyjson::Value::Int(_) | pyjson::Value::Float(_) => "a JSON number",
        pyjson::Value::Str(_) => "a JSON string",
        pyjson::Value::Array(_) => "a JSON array",
        pyjson::Value::Object(_) => "a JSON object",
    }
}

/// Whether a line is blank: empty, or only the whitespace JSON allows
/// between tokens (space, tab, carriage return). A blank line is skipped,
/// neither a row nor malformed; any other line `json.loads` refuses
/// (a form feed alone, say) is malformed.
pub(super) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// Why a line is not UTF-8: the first bad byte, counted from 1.
fn not_utf8(e: &std::str::Utf8Error) -> String {
    let at = e.valid_up_to() + 1;
    match e.error_len() {
        Some(_) => format!("invalid UTF-8 at byte {at}"),
        None => format!("invalid UTF-8 at byte {at}: the line ends inside a character"),
    }
}

/// Where to read rows from.
#[derive(Clone, Debug)]
pub enum Source {
    /// Standard input (`-`).
    Stdin,
    /// A file; `.gz` and `.zst` are decompressed.
    File(PathBuf),
}

impl Source {
    /// `-` is standard input; anything else a file.
    pub fn from_arg(arg: &Path) -> Source {
        if arg.as_os_str() == "-" {
            Source::Stdin
        } else {
            Source::File(arg.to_path_buf())
        }
    }

    pub(super) fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".into(),
            Source::File(p) => std::path::absolute(p)
                .unwrap_or_else(|_| p.clone())
                .to_string_lossy()
                .into_owned(),
        }
    }

    pub(super) fn path(&self) -> PathBuf {
        match self {
            Source::Stdin => PathBuf::from("<stdin>"),
            Source::File(p) => p.clone(),
        }
    }
}

/// A reader that counts the bytes it hands out, for the progress line.
pub(super) struct Counted<R> {
    pub(super) inner: R,
    pub(super) read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// The decompressed stream of one input, the raw bytes read counted.
pub(super) enum Stream {
    Plain(Counted<Box<dyn Read>>),
    Gzip(flate2::read::MultiGzDecoder<Counted<Box<dyn Read>>>),
    Zstd(zstd::stream::read::Decoder<'static, io::BufReader<Counted<Box<dyn Read>>>>),
}

impl Stream {
    pub(super) fn raw_read(&self) -> u64 {
        match self {
            Stream::Plain(c) => c.read,
            Stream::Gzip(d) => d.get_ref().read,
            Stream::Zstd(d) => d.get_ref().get_ref().read,
        }
    }

    pub(super) fn format(&self) -> &'static str {
        match self {
            Stream::Plain(_) => "plain",
            Stream::Gzip(_) => "gzip",
            Stream::Zstd(_) => "zstd",
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(r) => r.read(buf),
            Stream::Gzip(r) => r.read(buf),
            Stream::Zstd(r) => r.read(buf),
        }
    }
}

/// Opens an input; returns the stream and its size on disk when known.
pub(super) fn open(source: &Source) -> Result<(Stream, u64)> {
    let (raw, size): (Box<dyn Read>, u64) = match source {
        Source::Stdin => (Box::new(io::stdin()), 0),
        Source::File(p) => {
            let f = std::fs::File::open(p).map_err(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    Error::NotFound {
                        what: "results file",
                        path: p.clone(),
                    }
                } else {
                    Error::io("open the results file", p, e)
                }
            })?;
            let meta = f.metadata().ctx("examine the results file", p)?;
            if meta.is_dir() {
                return Err(Error::Absent {
                    path: p.clone(),
                    message: format!(
                        "'{}' is a directory; audit reads results files (JSON Lines)",
                        p.display()
                    ),
                });
            }
            (Box::new(f), meta.len())
        }
    };
    let counted = Counted {
        inner: raw,
        read: 0,
    };
    let name = match source {
        Source::File(p) => p.to_string_lossy().into_owned(),
        Source::Stdin => String::new(),
    };
    let stream = if name.ends_with(".gz") {
        Stream::Gzip(flate2::read::MultiGzDecoder::new(counted))
    } else if name.ends_with(".zst") {
        let mut decoder = zstd::stream::read::Decoder::new(counted)
            .ctx("start decompressing the results file", source.path())?;
        // The window a frame asks for is memory held; zstd -19 and below
        // ask for at most 8 MiB.
        decoder
            .window_log_max(ZSTD_WINDOW_LOG_MAX)
            .ctx("start decompressing the results file", source.path())?;
        Stream::Zstd(decoder)
    } else {
        Stream::Plain(counted)
    };
    Ok((stream, size))
}

pub(super) fn malformed(input: &mut Input, reason: String) {
    input.malformed_count += 1;
    if input.malformed.len() < LISTED {
        input.malformed.push(MalformedLine {
            line: input.lines,
            reason,
        });
    }
}

/// What [`read_lines`] hands on.
pub(super) enum Line<'a> {
    /// A line, without its newline.
    Text(&'a [u8]),
    /// A line longer than [`MAX_LINE_BYTES`], not held.
    TooLong,
    /// `n` more bytes were read.
    Chunk(usize),
}

/// Splits a stream into lines in a buffer of [`CHUNK`] bytes; a line longer
/// than [`MAX_LINE_BYTES`] is skipped through without being held.
pub(super) fn read_lines(
    stream: &mut Stream,
    buf: &mut [u8],
    mut each: impl FnMut(Line<'_>),
    mut tick: impl FnMut(&Stream),
) -> io::Result<()> {
    let (mut start, mut end) = (0usize, 0usize);
    // Within a line too long to hold: its start was dropped.
    let mut skipping = false;
    loop {
        let n = match stream.read(&mut buf[end..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            if skipping {
                each(Line::TooLong);
            } else if start < end {
                emit(&buf[start..end], &mut each);
            }
            return Ok(());
        }
        each(Line::Chunk(n));
        tick(stream);
        end += n;
        while let Some(pos) = memchr::memchr(b'\n', &buf[start..end]) {
            if skipping {
                skipping = false;
                each(Line::TooLong);
            } else {
                emit(&buf[start..start + pos], &mut each);
            }
            start += pos + 1;
        }
        if end - start > MAX_LINE_BYTES {
            skipping = true;
            start = end;
        }
        if start == end {
            (start, end) = (0, 0);
        } else if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
    }
}

fn emit(line: &[u8], each: &mut impl FnMut(Line<'_>)) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > MAX_LINE_BYTES {
        each(Line::TooLong);
    } else {
        each(Line::Text(line));
    }
}
