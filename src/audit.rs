//! Auditing a results file: every manifest digest its rows name, checked
//! against the store, and every row checked against the reference's arm rule.
//!
//! A results file is JSON Lines, one run per line, as the benchmark harness
//! writes it: each row carries an arm, and the rows of the `ce_*` arms the
//! plugin's version and manifest digest. [`scan`] reads the files once, as a
//! stream: a line is parsed in place, only the three fields asked for are
//! taken out of it, and only one tally per distinct digest is kept, so that
//! memory grows with the digests, not the rows. [`judge`] then looks each
//! digest up in the store (and with `--verify` re-hashes its objects).
//!
//! Every list that grows with the rows (row problems, malformed lines, the
//! versions and arms of one digest) keeps at most [`LISTED`] or
//! [`KEPT_VALUES`] entries and counts the rest.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::digest::ManifestDigest;
use crate::error::{Error, IoContext, Result};
use crate::policy::is_ce_arm;
use crate::progress::Progress;
use crate::store::verify::{verify_store, Severity, VerifyOptions};
use crate::store::Store;

/// The most row problems, and malformed lines per input, listed by line
/// number; more are counted, not listed.
pub const LISTED: usize = 1000;
/// The most distinct versions and arms listed for one digest; rows beyond
/// them are counted.
pub const KEPT_VALUES: usize = 16;
/// The longest line parsed; a longer one is a malformed line, skipped
/// without being held in memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// The largest zstd window accepted (16 MiB), so that a frame cannot make
/// audit hold more; a frame that asks for more is an error.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;
/// How much of the input is read at once.
const CHUNK: usize = 4 << 20;
/// The most characters of a bad value quoted in a problem.
const QUOTED: usize = 80;

/// The harness's digest field.
pub const DEFAULT_DIGEST_FIELD: &str = "ce_plugin_manifest_digest";
/// The harness's version field.
pub const DEFAULT_VERSION_FIELD: &str = "ce_plugin_version";
/// The harness's arm field.
pub const DEFAULT_ARM_FIELD: &str = "arm";

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
struct Node {
    children: Vec<(String, Node)>,
    slot: Option<usize>,
}

impl Node {
    /// The tree of the three field paths; overlapping paths are refused.
    fn of(fields: &Fields) -> Result<Node> {
        let mut root = Node::default();
        let named = [
            ("--digest-field", &fields.digest),
            ("--version-field", &fields.version),
            ("--arm-field", &fields.arm),
        ];
        for (slot, (flag, path)) in named.iter().enumerate() {
            let parts: Vec<&str> = path.split('.').collect();
            if parts.iter().any(|p| p.is_empty()) {
                return Err(Error::Usage(format!(
                    "{flag} '{path}': a field is a key or a dotted path of keys (ce_plugin.manifest_digest), with no empty key"
                )));
            }
            let mut node = &mut root;
            for part in parts {
                if node.slot.is_some() {
                    return Err(overlap(&named, flag, path));
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
                return Err(overlap(&named, flag, path));
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

fn overlap(named: &[(&str, &String); 3], flag: &str, path: &str) -> Error {
    let others: Vec<String> = named
        .iter()
        .filter(|(f, _)| *f != flag)
        .map(|(f, p)| format!("{f} '{p}'"))
        .collect();
    Error::Usage(format!(
        "{flag} '{path}' is, holds or lies inside another field ({}); the three fields must be distinct and not nested in each other",
        others.join(", ")
    ))
}

/// One field's value in a row.
#[derive(Debug, Default)]
enum Val<'a> {
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
    fn present(&self) -> bool {
        !matches!(self, Val::Absent | Val::Null)
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Reads one object, filling the slots its tree names.
struct ObjectSeed<'n, 'v, 'a> {
    node: &'n Node,
    vals: &'v mut [Val<'a>; 3],
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
struct KeySeed<'n>(&'n Node);

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
fn parse_row<'a>(line: &'a [u8], node: &Node) -> Result<[Val<'a>; 3], String> {
    let mut vals: [Val<'a>; 3] = Default::default();
    let mut de = serde_json::Deserializer::from_slice(line);
    let parsed = ObjectSeed {
        node,
        vals: &mut vals,
        top: true,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    match parsed {
        Ok(()) => Ok(vals),
        Err(e) => Err(match serde_json::from_slice::<IgnoredAny>(line) {
            Ok(_) => format!("{}, not an object", json_kind(line)),
            Err(_) => format!("not JSON: {e}"),
        }),
    }
}

/// What a valid JSON text that is not an object is.
fn json_kind(line: &[u8]) -> &'static str {
    match line.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => "a JSON array",
        Some(b'"') => "a JSON string",
        Some(b'n') => "JSON null",
        Some(b't' | b'f') => "a JSON boolean",
        _ => "a JSON number",
    }
}

/// A place in the input: which input (by its index) and which line (from 1).
#[derive(Clone, Copy, Debug)]
struct At {
    input: usize,
    line: u64,
}

/// A place in the input, as reported.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Place {
    /// The input: an absolute path, or `<stdin>`.
    pub file: String,
    /// The line, counted from 1.
    pub line: u64,
}

/// A value claimed by rows, with how many and the first.
#[derive(Debug)]
struct Claim {
    value: String,
    rows: u64,
    first: At,
}

/// What the rows say about one digest.
#[derive(Debug)]
struct Tally {
    rows: u64,
    first: At,
    last: At,
    versions: Vec<Claim>,
    versions_unlisted: u64,
    arms: Vec<Claim>,
    arms_unlisted: u64,
}

/// Counts `value` in `claims`, keeping at most [`KEPT_VALUES`] of them, each
/// cut to [`QUOTED`] characters (a cut one ends in `…`, so it never equals a
/// real version).
fn claim(claims: &mut Vec<Claim>, unlisted: &mut u64, value: &str, at: At) {
    let cut;
    let value = if value.len() > QUOTED && value.chars().nth(QUOTED).is_some() {
        cut = format!("{}…", value.chars().take(QUOTED).collect::<String>());
        cut.as_str()
    } else {
        value
    };
    if let Some(c) = claims.iter_mut().find(|c| c.value == value) {
        c.rows += 1;
    } else if claims.len() < KEPT_VALUES {
        claims.push(Claim {
            value: value.to_string(),
            rows: 1,
            first: at,
        });
    } else {
        *unlisted += 1;
    }
}

/// A row that breaks a rule.
#[derive(Debug, serde::Serialize)]
pub struct RowProblem {
    /// The input.
    pub file: String,
    /// The line.
    pub line: u64,
    /// `arm-mismatch` or `malformed-digest`.
    pub kind: &'static str,
    /// The row's arm, or null when it has none (or not a string).
    pub arm: Option<String>,
    /// What is wrong.
    pub detail: String,
}

/// A line that is not a row.
#[derive(Debug, serde::Serialize)]
pub struct MalformedLine {
    /// The line, counted from 1.
    pub line: u64,
    /// Why it is not a row.
    pub reason: String,
}

/// One input, as read.
#[derive(Debug, serde::Serialize)]
pub struct Input {
    /// An absolute path, or `<stdin>`.
    pub file: String,
    /// `plain`, `gzip` or `zstd`.
    pub format: &'static str,
    /// The bytes read, after decompression.
    pub bytes: u64,
    /// The lines, blank ones included.
    pub lines: u64,
    /// The lines that are rows (JSON objects).
    pub rows: u64,
    /// How many lines are not rows.
    pub malformed_count: u64,
    /// The first [`LISTED`] of them.
    pub malformed: Vec<MalformedLine>,
}

/// What the inputs hold, before the store is asked.
#[derive(Debug)]
pub struct Scan {
    fields: Fields,
    inputs: Vec<Input>,
    tallies: HashMap<ManifestDigest, Tally>,
    problems: Vec<(At, &'static str, Option<String>, String)>,
    problem_count: u64,
}

impl Scan {
    /// The digests the rows name, in order.
    pub fn digests(&self) -> Vec<ManifestDigest> {
        let mut d: Vec<ManifestDigest> = self.tallies.keys().copied().collect();
        d.sort();
        d
    }

    fn row(&mut self, at: At, vals: [Val<'_>; 3]) {
        let [digest, version, arm] = vals;
        let arm_text = arm.as_str();
        let ce = arm_text.is_some_and(is_ce_arm);
        let carried: Vec<&str> = [
            (digest.present(), self.fields.digest.as_str()),
            (version.present(), self.fields.version.as_str()),
        ]
        .iter()
        .filter(|(has, _)| *has != ce)
        .map(|(_, f)| *f)
        .collect();
        if !carried.is_empty() {
            let who = match arm_text {
                Some(a) => format!(
                    "the {} arm {}",
                    if ce { "ce_*" } else { "non-CE" },
                    quoted(a)
                ),
                None => "a row without an arm".to_string(),
            };
            let detail = if ce {
                format!(
                    "{who} must carry {}; it has no {}",
                    self.both(),
                    carried.join(" and no ")
                )
            } else {
                format!(
                    "{who} must carry neither {} nor {}; it has {}",
                    self.fields.digest,
                    self.fields.version,
                    carried.join(" and ")
                )
            };
            self.problem(at, "arm-mismatch", arm_text, detail);
        }
        let key = match &digest {
            Val::Str(s) => match lower_hex_digest(s) {
                Some(d) => Some(d),
                None => {
                    let detail = format!(
                        "{} {} is not 64 lowercase hex characters",
                        self.fields.digest,
                        quoted(s)
                    );
                    self.problem(at, "malformed-digest", arm_text, detail);
                    None
                }
            },
            Val::Other(kind) => {
                let detail = format!(
                    "{} is {kind}, not a string of 64 lowercase hex characters",
                    self.fields.digest
                );
                self.problem(at, "malformed-digest", arm_text, detail);
                None
            }
            Val::Absent | Val::Null => None,
        };
        let Some(key) = key else { return };
        let t = self.tallies.entry(key).or_insert_with(|| Tally {
            rows: 0,
            first: at,
            last: at,
            versions: Vec::new(),
            versions_unlisted: 0,
            arms: Vec::new(),
            arms_unlisted: 0,
        });
        t.rows += 1;
        t.last = at;
        match &version {
            Val::Str(v) => claim(&mut t.versions, &mut t.versions_unlisted, v, at),
            Val::Other(kind) => claim(
                &mut t.versions,
                &mut t.versions_unlisted,
                &format!("({kind})"),
                at,
            ),
            Val::Absent | Val::Null => {}
        }
        if let Some(a) = arm_text {
            claim(&mut t.arms, &mut t.arms_unlisted, a, at);
        }
    }

    fn both(&self) -> String {
        format!("{} and {}", self.fields.digest, self.fields.version)
    }

    fn problem(&mut self, at: At, kind: &'static str, arm: Option<&str>, detail: String) {
        self.problem_count += 1;
        if self.problems.len() < LISTED {
            self.problems
                .push((at, kind, arm.map(str::to_string), detail));
        }
    }
}

/// `s` in quotes, cut to [`QUOTED`] characters, escaped as JSON escapes it.
fn quoted(s: &str) -> String {
    let cut: String = s.chars().take(QUOTED).collect();
    let mut q = serde_json::to_string(&cut).unwrap_or_default();
    if cut.len() < s.len() {
        q.push('…');
    }
    q
}

/// The digest `s` names, when it is exactly 64 lowercase hex characters.
fn lower_hex_digest(s: &str) -> Option<ManifestDigest> {
    if s.len() != 64 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    s.parse().ok()
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

    fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".into(),
            Source::File(p) => std::path::absolute(p)
                .unwrap_or_else(|_| p.clone())
                .to_string_lossy()
                .into_owned(),
        }
    }

    fn path(&self) -> PathBuf {
        match self {
            Source::Stdin => PathBuf::from("<stdin>"),
            Source::File(p) => p.clone(),
        }
    }
}

/// A reader that counts the bytes it hands out, for the progress line.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// The decompressed stream of one input, the raw bytes read counted.
enum Stream {
    Plain(Counted<Box<dyn Read>>),
    Gzip(flate2::read::MultiGzDecoder<Counted<Box<dyn Read>>>),
    Zstd(zstd::stream::read::Decoder<'static, io::BufReader<Counted<Box<dyn Read>>>>),
}

impl Stream {
    fn raw_read(&self) -> u64 {
        match self {
            Stream::Plain(c) => c.read,
            Stream::Gzip(d) => d.get_ref().read,
            Stream::Zstd(d) => d.get_ref().get_ref().read,
        }
    }

    fn format(&self) -> &'static str {
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
fn open(source: &Source) -> Result<(Stream, u64)> {
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

/// Reads every input once and tallies its rows by digest.
pub fn scan(sources: &[Source], fields: &Fields, progress: bool) -> Result<Scan> {
    let node = Node::of(fields)?;
    if sources
        .iter()
        .filter(|s| matches!(s, Source::Stdin))
        .count()
        > 1
    {
        return Err(Error::Usage(
            "standard input (-) can be named only once".into(),
        ));
    }
    let mut scan = Scan {
        fields: fields.clone(),
        inputs: Vec::new(),
        tallies: HashMap::new(),
        problems: Vec::new(),
        problem_count: 0,
    };
    let mut buf = vec![0u8; CHUNK];
    for (index, source) in sources.iter().enumerate() {
        let (mut stream, size) = open(source)?;
        let mut input = Input {
            file: source.name(),
            format: stream.format(),
            bytes: 0,
            lines: 0,
            rows: 0,
            malformed_count: 0,
            malformed: Vec::new(),
        };
        let mut bar =
            Progress::new("audit", size, progress).after(std::time::Duration::from_secs(1));
        let mut shown = 0u64;
        read_lines(
            &mut stream,
            &mut buf,
            |event| match event {
                Line::Text(line) => {
                    input.lines += 1;
                    let at = At {
                        input: index,
                        line: input.lines,
                    };
                    if line.iter().all(u8::is_ascii_whitespace) {
                        return;
                    }
                    match parse_row(line, &node) {
                        Ok(vals) => {
                            input.rows += 1;
                            scan.row(at, vals);
                        }
                        Err(reason) => malformed(&mut input, reason),
                    }
                }
                Line::TooLong => {
                    input.lines += 1;
                    malformed(
                        &mut input,
                        format!("longer than {} bytes; skipped unread", MAX_LINE_BYTES),
                    );
                }
                Line::Chunk(n) => {
                    input.bytes += n as u64;
                }
            },
            |stream| {
                let raw = stream.raw_read();
                bar.add(raw - shown, raw - shown);
                shown = raw;
            },
        )
        .map_err(|e| Error::io("read the results file", source.path(), e))?;
        scan.inputs.push(input);
    }
    Ok(scan)
}

fn malformed(input: &mut Input, reason: String) {
    input.malformed_count += 1;
    if input.malformed.len() < LISTED {
        input.malformed.push(MalformedLine {
            line: input.lines,
            reason,
        });
    }
}

/// What [`read_lines`] hands on.
enum Line<'a> {
    /// A line, without its newline.
    Text(&'a [u8]),
    /// A line longer than [`MAX_LINE_BYTES`], not held.
    TooLong,
    /// `n` more bytes were read.
    Chunk(usize),
}

/// Splits a stream into lines in a buffer of [`CHUNK`] bytes; a line longer
/// than [`MAX_LINE_BYTES`] is skipped through without being held.
fn read_lines(
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

/// A digest's standing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// In the store; every row claims its version (and, with `--verify`,
    /// every object re-hashes right).
    Ok,
    /// Not in the store, and the registry had no copy it could take.
    Unknown,
    /// A row claims a version other than the snapshot's.
    VersionMismatch,
    /// `--verify` found an object that fails its re-hash.
    Damaged,
    /// Unknown, then fetched from `--registry` and verified.
    Pulled,
}

impl Status {
    /// The name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unknown => "unknown",
            Status::VersionMismatch => "version-mismatch",
            Status::Damaged => "damaged",
            Status::Pulled => "pulled",
        }
    }

    /// Whether the digest passes.
    pub fn passes(self) -> bool {
        matches!(self, Status::Ok | Status::Pulled)
    }
}

/// A version or an arm the rows claim, with how many rows and the first.
#[derive(Debug, serde::Serialize)]
pub struct Claimed {
    /// The version or arm.
    pub value: String,
    /// The rows that claim it.
    pub rows: u64,
    /// The first row that does.
    pub first: Place,
}

/// A damaged object of a snapshot, from `--verify`.
#[derive(Debug, serde::Serialize)]
pub struct DamagedObject {
    /// The problem's kind, as `verify` names it (`object-content`, …).
    pub kind: &'static str,
    /// The object's absolute path.
    pub path: String,
    /// What is wrong.
    pub detail: String,
}

/// Everything the audit says about one digest.
#[derive(Debug, serde::Serialize)]
pub struct DigestAudit {
    /// The manifest digest.
    pub manifest_digest: ManifestDigest,
    /// Its standing.
    pub status: Status,
    /// The snapshot's version, or null when it is not in the store.
    pub version: Option<String>,
    /// The versions the rows claim (non-strings in parentheses), at most
    /// [`KEPT_VALUES`].
    pub claimed_versions: Vec<Claimed>,
    /// Rows claiming further versions.
    pub claimed_versions_unlisted: u64,
    /// The rows that name the digest.
    pub rows: u64,
    /// The arms of those rows, at most [`KEPT_VALUES`].
    pub arms: Vec<Claimed>,
    /// Rows of further arms.
    pub arms_unlisted: u64,
    /// The first row naming it.
    pub first: Place,
    /// The last row naming it.
    pub last: Place,
    /// With `--verify`, the objects that fail their re-hash.
    pub damaged: Vec<DamagedObject>,
    /// Whether it was fetched from `--registry` by this audit.
    pub pulled: bool,
    /// With `--registry`, why the digest could not be pulled.
    pub pull_error: Option<String>,
}

/// The report of an audit.
#[derive(Debug, serde::Serialize)]
pub struct AuditReport {
    /// The fields read.
    pub fields: Fields,
    /// Each input as read.
    pub inputs: Vec<Input>,
    /// The rows, over all inputs.
    pub rows: u64,
    /// One entry per distinct digest, in digest order.
    pub digests: Vec<DigestAudit>,
    /// How many rows break a rule.
    pub row_problem_count: u64,
    /// The first [`LISTED`] of them, in input order.
    pub row_problems: Vec<RowProblem>,
    /// How many lines are not rows, over all inputs.
    pub malformed_count: u64,
    /// The most row problems, and malformed lines per input, listed.
    pub listed_at_most: usize,
    /// Whether objects were re-hashed (`--verify`).
    pub verified: bool,
    /// The registry unknown digests were pulled from, or null.
    pub registry: Option<String>,
    /// Whether everything passed.
    pub passed: bool,
    /// The one-line verdict.
    pub verdict: String,
}

/// How to judge the digests.
pub struct JudgeOptions<'a> {
    /// Re-hash every snapshot's objects.
    pub verify: bool,
    /// Whether a progress line may be drawn.
    pub progress: bool,
    /// The registry pulled from, if any.
    pub registry: Option<&'a str>,
    /// The digests pulled from it.
    pub pulled: &'a [ManifestDigest],
    /// The digests it could not give, and why.
    pub pull_errors: &'a BTreeMap<ManifestDigest, String>,
}

/// The digests of `scan` the store does not hold.
pub fn unknown(store: &Store, scan: &Scan) -> Result<Vec<ManifestDigest>> {
    let mut out = Vec::new();
    for d in scan.digests() {
        if !store.catalogue().has_snapshot(&d)? {
            out.push(d);
        }
    }
    Ok(out)
}

/// Looks every digest up in the store and decides its status.
pub fn judge(store: &Store, scan: Scan, opts: &JudgeOptions<'_>) -> Result<AuditReport> {
    let cat = store.catalogue();
    let names: Vec<String> = scan.inputs.iter().map(|i| i.file.clone()).collect();
    let place = |at: At| Place {
        file: names[at.input].clone(),
        line: at.line,
    };
    let mut versions: BTreeMap<ManifestDigest, String> = BTreeMap::new();
    for d in scan.digests() {
        if cat.has_snapshot(&d)? {
            versions.insert(d, cat.snapshot(&d)?.version);
        }
    }
    let mut damage: BTreeMap<ManifestDigest, Vec<DamagedObject>> = BTreeMap::new();
    if opts.verify && !versions.is_empty() {
        let hexes: Vec<String> = versions.keys().map(|d| d.to_hex()).collect();
        let report = verify_store(
            store,
            &VerifyOptions {
                digests: &hexes,
                repair_from: None,
                progress: opts.progress,
            },
        )?;
        for p in report
            .problems
            .iter()
            .filter(|p| p.severity == Severity::Corruption)
        {
            // A problem of the catalogue itself touches every snapshot.
            let hit: Vec<ManifestDigest> = if p.snapshots.is_empty() {
                versions.keys().copied().collect()
            } else {
                p.snapshots.clone()
            };
            for d in hit {
                damage.entry(d).or_default().push(DamagedObject {
                    kind: p.kind,
                    path: p.path.clone(),
                    detail: p.detail.clone(),
                });
            }
        }
    }
    let mut digests = Vec::new();
    for d in scan.digests() {
        let t = &scan.tallies[&d];
        let version = versions.get(&d).cloned();
        let damaged = damage.remove(&d).unwrap_or_default();
        let mismatch = version
            .as_ref()
            .is_some_and(|v| t.versions_unlisted > 0 || t.versions.iter().any(|c| &c.value != v));
        let status = if version.is_none() {
            Status::Unknown
        } else if !damaged.is_empty() {
            Status::Damaged
        } else if mismatch {
            Status::VersionMismatch
        } else if opts.pulled.contains(&d) {
            Status::Pulled
        } else {
            Status::Ok
        };
        let claims = |cs: &[Claim]| -> Vec<Claimed> {
            cs.iter()
                .map(|c| Claimed {
                    value: c.value.clone(),
                    rows: c.rows,
                    first: place(c.first),
                })
                .collect()
        };
        digests.push(DigestAudit {
            manifest_digest: d,
            status,
            version,
            claimed_versions: claims(&t.versions),
            claimed_versions_unlisted: t.versions_unlisted,
            rows: t.rows,
            arms: claims(&t.arms),
            arms_unlisted: t.arms_unlisted,
            first: place(t.first),
            last: place(t.last),
            damaged,
            pulled: opts.pulled.contains(&d),
            pull_error: opts.pull_errors.get(&d).cloned(),
        });
    }
    let row_problems: Vec<RowProblem> = scan
        .problems
        .into_iter()
        .map(|(at, kind, arm, detail)| RowProblem {
            file: names[at.input].clone(),
            line: at.line,
            kind,
            arm,
            detail,
        })
        .collect();
    let malformed_count = scan.inputs.iter().map(|i| i.malformed_count).sum();
    let rows = scan.inputs.iter().map(|i| i.rows).sum();
    // Lines that are not rows are listed, but do not fail the audit: the
    // harness skips them (a line cut short by a killed writer is one). An
    // input of nothing but such lines is not a results file, though.
    let passed = digests.iter().all(|d| d.status.passes())
        && scan.problem_count == 0
        && (rows > 0 || malformed_count == 0);
    let verdict = verdict(&digests, scan.problem_count, malformed_count, rows, passed);
    Ok(AuditReport {
        fields: scan.fields,
        inputs: scan.inputs,
        rows,
        digests,
        row_problem_count: scan.problem_count,
        row_problems,
        malformed_count,
        listed_at_most: LISTED,
        verified: opts.verify,
        registry: opts.registry.map(str::to_string),
        passed,
        verdict,
    })
}

fn verdict(
    digests: &[DigestAudit],
    problems: u64,
    malformed: u64,
    rows: u64,
    passed: bool,
) -> String {
    let mut by: BTreeMap<Status, usize> = BTreeMap::new();
    for d in digests {
        *by.entry(d.status).or_default() += 1;
    }
    let statuses: Vec<String> = by
        .iter()
        .map(|(s, n)| format!("{n} {}", s.as_str()))
        .collect();
    let mut parts = vec![format!(
        "{} ({})",
        crate::error::counted(digests.len(), "digest", "digests"),
        if statuses.is_empty() {
            "none".to_string()
        } else {
            statuses.join(", ")
        }
    )];
    parts.push(crate::error::counted(
        problems,
        "row problem",
        "row problems",
    ));
    parts.push(crate::error::counted(
        malformed,
        "malformed line",
        "malformed lines",
    ));
    format!(
        "{}: {} in {}",
        if passed { "PASS" } else { "FAIL" },
        parts.join(", "),
        crate::error::counted(rows, "row", "rows")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(data: &[u8], chunk: usize) -> Vec<Option<String>> {
        let mut stream = Stream::Plain(Counted {
            inner: Box::new(io::Cursor::new(data.to_vec())),
            read: 0,
        });
        let mut buf = vec![0u8; chunk];
        let mut out = Vec::new();
        read_lines(
            &mut stream,
            &mut buf,
            |l| match l {
                Line::Text(t) => out.push(Some(String::from_utf8_lossy(t).into_owned())),
                Line::TooLong => out.push(None),
                Line::Chunk(_) => {}
            },
            |_| {},
        )
        .unwrap();
        out
    }

    #[test]
    fn lines_split_on_newlines_with_crlf_and_a_last_line_without_one() {
        let got = lines_of(b"a\r\nb\n\nc", CHUNK);
        assert_eq!(
            got,
            [
                Some("a".into()),
                Some("b".into()),
                Some("".into()),
                Some("c".into())
            ]
        );
        assert_eq!(lines_of(b"", CHUNK), Vec::<Option<String>>::new());
        assert_eq!(lines_of(b"x\n", CHUNK), [Some("x".to_string())]);
    }

    #[test]
    fn a_line_too_long_is_skipped_and_counted_once() {
        let long = vec![b'x'; MAX_LINE_BYTES + 10];
        for tail in [&b"\nafter\n"[..], &b""[..]] {
            let mut data = b"first\n".to_vec();
            data.extend_from_slice(&long);
            data.extend_from_slice(tail);
            let got = lines_of(&data, CHUNK);
            let mut want = vec![Some("first".to_string()), None];
            if !tail.is_empty() {
                want.push(Some("after".into()));
            }
            assert_eq!(got, want);
        }
        // A line longer than the whole buffer, read in many pieces.
        let mut data = vec![b'y'; 3 * CHUNK];
        data.extend_from_slice(b"\nz\n");
        assert_eq!(lines_of(&data, CHUNK), [None, Some("z".to_string())]);
        // Exactly at the bound is still a line.
        let mut data = vec![b'1'; MAX_LINE_BYTES];
        data.push(b'\n');
        assert_eq!(lines_of(&data, CHUNK).len(), 1);
        assert!(lines_of(&data, CHUNK)[0].is_some());
    }

    fn fields(d: &str, v: &str, a: &str) -> Fields {
        Fields {
            digest: d.into(),
            version: v.into(),
            arm: a.into(),
        }
    }

    #[test]
    fn fields_must_be_distinct_and_not_nested() {
        assert!(Node::of(&Fields::default()).is_ok());
        assert!(Node::of(&fields("p.d", "p.v", "arm")).is_ok());
        for (d, v, a) in [
            ("p", "p.v", "arm"),
            ("p.v", "p", "arm"),
            ("x", "x", "arm"),
            ("a..b", "v", "arm"),
            ("", "v", "arm"),
        ] {
            let e = Node::of(&fields(d, v, a)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{d} {v} {a}: {e}");
        }
    }

    fn row(line: &str, f: &Fields) -> Result<[Option<String>; 3], String> {
        let node = Node::of(f).unwrap();
        parse_row(line.as_bytes(), &node).map(|vals| {
            vals.map(|v| match v {
                Val::Absent => None,
                Val::Null => Some("null".into()),
                Val::Str(s) => Some(format!("'{s}'")),
                Val::Other(k) => Some(k.to_string()),
            })
        })
    }

    #[test]
    fn rows_give_only_their_fields() {
        let f = Fields::default();
        let got = row(
            r#"{"x": [1, {"arm": "no"}], "arm": "ce_review", "ce_plugin_version": null, "ce_plugin_manifest_digest": 7}"#,
            &f,
        )
        .unwrap();
        assert_eq!(
            got,
            [
                Some("a number".into()),
                Some("null".into()),
                Some("'ce_review'".into())
            ]
        );
        // Escapes in keys and values; the last of a repeated key wins, as in Python.
        let got = row(
            r#"{"\u0061rm": "ce_\u0072eview", "arm": "baseline", "ce_plugin_version": "1.0.0"}"#,
            &f,
        )
        .unwrap();
        assert_eq!(
            got,
            [None, Some("'1.0.0'".into()), Some("'baseline'".into())]
        );
        // Dotted paths; a path through a non-object holds nothing.
        let nested = fields("p.d", "p.v", "arm");
        let got = row(r#"{"p": {"d": "x", "v": {"deep": 1}}, "arm": []}"#, &nested).unwrap();
        assert_eq!(
            got,
            [
                Some("'x'".into()),
                Some("an object".into()),
                Some("an array".into())
            ]
        );
        assert_eq!(
            row(r#"{"p": "flat"}"#, &nested).unwrap(),
            [None, None, None]
        );
        // Not rows.
        assert_eq!(row("[1]", &f).unwrap_err(), "a JSON array, not an object");
        assert_eq!(
            row("\"s\"", &f).unwrap_err(),
            "a JSON string, not an object"
        );
        assert!(row(r#"{"arm": "x"} trailing"#, &f)
            .unwrap_err()
            .starts_with("not JSON: "));
        assert!(row(r#"{"arm": "x""#, &f)
            .unwrap_err()
            .starts_with("not JSON: EOF"));
    }

    #[test]
    fn only_lowercase_hex_is_a_digest() {
        let hex = "ab".repeat(32);
        assert!(lower_hex_digest(&hex).is_some());
        assert!(lower_hex_digest(&hex.to_uppercase()).is_none());
        assert!(lower_hex_digest(&hex[..63]).is_none());
        assert!(lower_hex_digest(&format!("{hex}0")).is_none());
        assert!(lower_hex_digest(&"g".repeat(64)).is_none());
    }

    #[test]
    fn claims_keep_a_bounded_number_of_values() {
        let mut claims = Vec::new();
        let mut unlisted = 0;
        let at = At { input: 0, line: 1 };
        for i in 0..(KEPT_VALUES + 5) {
            claim(&mut claims, &mut unlisted, &format!("v{i}"), at);
            claim(&mut claims, &mut unlisted, "v0", at);
        }
        assert_eq!(claims.len(), KEPT_VALUES);
        assert_eq!(unlisted, 5);
        assert_eq!(claims[0].rows, 1 + (KEPT_VALUES as u64 + 5));
    }
}
