//! Reading results files: each input opened (plain, gzip or zstd, within
//! bounded memory), cut into lines, and each line parsed in place for only
//! the three fields asked for.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::{Error, IoContext, Misuse, Result, RowField};

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

/// The fields as one tree of object keys, each leaf a slot of a row.
#[derive(Debug, Default)]
pub(super) struct Node {
    children: Vec<(String, Node)>,
    slot: Option<usize>,
}

impl Node {
    /// The tree of the three field paths; overlapping paths are refused.
    pub(super) fn of(fields: &Fields) -> Result<Node> {
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
                let at = match node.children.iter().position(|(k, _)| k == part) {
                    Some(at) => at,
                    None => {
                        node.children.push((part.to_string(), Node::default()));
                        node.children.len() - 1
                    }
                };
                node = &mut node.children[at].1;
            }
            if node.slot.is_some() || !node.children.is_empty() {
                return Err(overlap(&named, field, path));
            }
            node.slot = Some(slot);
        }
        Ok(root)
    }

    fn child(&self, key: &str) -> Option<&Node> {
        self.children
            .iter()
            .find_map(|(k, n)| (k == key).then_some(n))
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
    pub(super) vals: &'v mut [Val<'a>; 3],
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
                Some(n) => map.next_value_seed(ObjectSeed {
                    node: n,
                    vals: &mut *self.vals,
                    top: false,
                })?,
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
pub(super) fn parse_row<'a>(line: &'a [u8], node: &Node) -> Result<[Val<'a>; 3], String> {
    let text = std::str::from_utf8(line).map_err(|e| not_utf8(&e))?;
    let mut vals: [Val<'a>; 3] = Default::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = ObjectSeed {
        node,
        vals: &mut vals,
        top: true,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    match parsed {
        Ok(()) => Ok(vals),
        // Not an object: say what it is, or, when it is no JSON text at
        // all, what a plain parse of it finds.
        Err(e) => Err(match json_kind(line) {
            Some(kind) => match serde_json::from_str::<IgnoredAny>(text) {
                Ok(_) => format!("{kind}, not an object"),
                Err(e) => format!("not JSON: {e}"),
            },
            None => format!("not JSON: {e}"),
        }),
    }
}

/// Why a line is not UTF-8: the first bad byte, counted from 1.
fn not_utf8(e: &std::str::Utf8Error) -> String {
    let at = e.valid_up_to() + 1;
    match e.error_len() {
        Some(_) => format!("invalid UTF-8 at byte {at}"),
        None => format!("invalid UTF-8 at byte {at}: the line ends inside a character"),
    }
}

/// What a JSON text other than an object would be, by its first character.
fn json_kind(line: &[u8]) -> Option<&'static str> {
    match line.iter().find(|b| !b.is_ascii_whitespace())? {
        b'[' => Some("a JSON array"),
        b'"' => Some("a JSON string"),
        b'n' => Some("JSON null"),
        b't' | b'f' => Some("a JSON boolean"),
        b'-' | b'0'..=b'9' => Some("a JSON number"),
        _ => None,
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
