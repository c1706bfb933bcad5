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
//! [`KEPT_VALUES`] entries and counts the rest; every string taken from a
//! row is [`cut`] to 80 characters as it is read; a distinct digest costs a
//! fixed 128-byte tally, and the report is made from the tallies one digest
//! at a time.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io::{self, Read};
use std::num::NonZeroU32;
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
pub const QUOTED: usize = 80;

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
///
/// JSON is UTF-8: a line that is not is no row, whatever it holds, and the
/// reason names the first byte that breaks it (serde_json skips the strings
/// it does not keep without checking them, so the line is checked first).
fn parse_row<'a>(line: &'a [u8], node: &Node) -> Result<[Val<'a>; 3], String> {
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

/// A line of the inputs, counted from 1 across all of them: the lines of
/// the first input, then those of the next, and so on. One integer, so that
/// a tally's places cost 8 bytes each; [`Lines::place`] names the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct At(u64);

/// Where each input's lines start, to turn an [`At`] back into a place.
#[derive(Debug, Default)]
struct Lines {
    /// Each input's name, as reported.
    names: Vec<String>,
    /// The lines of all inputs before each one.
    before: Vec<u64>,
}

impl Lines {
    /// The input and line of `at`.
    fn place(&self, at: At) -> Place<'_> {
        // The last input that starts before `at` holds it: an input with no
        // lines starts where the next one does and is passed over.
        let input = self.before.partition_point(|&b| b < at.0).saturating_sub(1);
        Place {
            file: self.names.get(input).map_or("", String::as_str),
            line: at.0 - self.before.get(input).copied().unwrap_or(0),
        }
    }
}

/// A place in the input, as reported.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Place<'a> {
    /// The input: an absolute path, or `<stdin>`.
    pub file: &'a str,
    /// The line, counted from 1.
    pub line: u64,
}

/// The distinct versions and arms the tallies name, each held once and
/// referred to by a 4-byte id: a million digests of one version and one
/// arm hold two strings, not two million.
#[derive(Debug, Default)]
struct Values {
    list: Vec<Box<str>>,
    ids: HashMap<Box<str>, NonZeroU32>,
}

impl Values {
    /// The id of `value`, added when new; `None` when no id is left.
    fn id(&mut self, value: &str) -> Option<NonZeroU32> {
        if let Some(&id) = self.ids.get(value) {
            return Some(id);
        }
        let id = NonZeroU32::new(u32::try_from(self.list.len() + 1).ok()?)?;
        self.list.push(value.into());
        self.ids.insert(value.into(), id);
        Some(id)
    }

    fn get(&self, id: NonZeroU32) -> &str {
        self.list.get(id.get() as usize - 1).map_or("", |v| &**v)
    }
}

/// A value claimed by rows, with how many and the first.
#[derive(Debug)]
struct Claim {
    rows: u64,
    first: At,
    value: NonZeroU32,
}

/// The values one field takes in a digest's rows: the first held inline
/// (most digests have one version and one arm), any others beside it, at
/// most [`KEPT_VALUES`] in all; rows of further values are counted.
#[derive(Debug, Default)]
struct Claims {
    head: Option<Claim>,
    rest: Option<Box<MoreClaims>>,
}

#[derive(Debug, Default)]
struct MoreClaims {
    more: Vec<Claim>,
    unlisted: u64,
}

impl Claims {
    fn iter(&self) -> impl Iterator<Item = &Claim> {
        self.head
            .iter()
            .chain(self.rest.iter().flat_map(|r| r.more.iter()))
    }

    fn unlisted(&self) -> u64 {
        self.rest.as_ref().map_or(0, |r| r.unlisted)
    }

    /// Counts a row claiming `value` (already [`cut`]).
    fn add(&mut self, values: &mut Values, value: &str, at: At) {
        let found = match &mut self.head {
            Some(h) if values.get(h.value) == value => Some(h),
            Some(_) => self
                .rest
                .as_mut()
                .and_then(|r| r.more.iter_mut().find(|c| values.get(c.value) == value)),
            None => None,
        };
        if let Some(c) = found {
            c.rows += 1;
            return;
        }
        let listed = self.iter().count();
        let id = if listed < KEPT_VALUES {
            values.id(value)
        } else {
            None
        };
        let claim = id.map(|value| Claim {
            rows: 1,
            first: at,
            value,
        });
        match (claim, self.head.is_none()) {
            (Some(c), true) => self.head = Some(c),
            (Some(c), false) => self.rest.get_or_insert_default().more.push(c),
            (None, _) => self.rest.get_or_insert_default().unlisted += 1,
        }
    }

    fn report<'a>(&self, values: &'a Values, lines: &'a Lines) -> Vec<Claimed<'a>> {
        self.iter()
            .map(|c| Claimed {
                value: values.get(c.value),
                rows: c.rows,
                first: lines.place(c.first),
            })
            .collect()
    }
}

/// What the rows say about one digest, in a fixed 128 bytes (checked by a
/// unit test) plus what more than one version or arm per digest takes.
#[derive(Debug)]
struct Tally {
    digest: ManifestDigest,
    rows: u64,
    first: At,
    last: At,
    versions: Claims,
    arms: Claims,
    /// The snapshot's version, once the store was asked: an id in
    /// [`Values`]; `None` when the store does not hold the digest.
    stored: Option<NonZeroU32>,
    /// Whether this audit pulled it from the registry.
    pulled: bool,
}

/// Finds a digest's tally in 16 bytes an entry: a table from a keyed
/// 64-bit hash of the digest to the tally's index, the tally holding the
/// digest itself. The key is random per run, so that an input cannot choose
/// digests that collide; two digests that do are looked up in `collided`.
#[derive(Debug, Default)]
struct Index {
    key: std::hash::RandomState,
    by_hash: HashMap<u64, usize, std::hash::BuildHasherDefault<Spread>>,
    collided: HashMap<ManifestDigest, usize>,
}

/// The hasher of a hash already random: passes the 64 bits on.
#[derive(Default)]
struct Spread(u64);

impl std::hash::Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl Index {
    /// The index of `digest`'s tally in `tallies`, a new one added when absent.
    fn tally(&mut self, tallies: &mut Vec<Tally>, digest: ManifestDigest, at: At) -> usize {
        use std::hash::BuildHasher;
        let hash = self.key.hash_one(digest);
        let fresh = tallies.len();
        let found = match self.by_hash.get(&hash) {
            None => {
                self.by_hash.insert(hash, fresh);
                None
            }
            Some(&i) if tallies[i].digest == digest => Some(i),
            Some(_) => match self.collided.get(&digest) {
                Some(&i) => Some(i),
                None => {
                    self.collided.insert(digest, fresh);
                    None
                }
            },
        };
        found.unwrap_or_else(|| {
            tallies.push(Tally {
                digest,
                rows: 0,
                first: at,
                last: at,
                versions: Claims::default(),
                arms: Claims::default(),
                stored: None,
                pulled: false,
            });
            fresh
        })
    }
}

/// `s` cut to [`QUOTED`] characters, with `…` after the cut when anything
/// was cut: every string taken from a row (a version, an arm, a value
/// quoted in a problem) is held and reported through this, so that no row
/// makes audit hold or print more than a few hundred bytes of it.
pub fn cut(s: &str) -> Cow<'_, str> {
    if s.len() <= QUOTED {
        return Cow::Borrowed(s);
    }
    match s.char_indices().nth(QUOTED) {
        Some((at, _)) => Cow::Owned(format!("{}…", &s[..at])),
        None => Cow::Borrowed(s),
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
    lines: Lines,
    /// One per distinct digest; in digest order once the scan is done.
    tallies: Vec<Tally>,
    /// Finds a tally while reading; dropped when the scan is done.
    index: Index,
    values: Values,
    problems: Vec<(At, &'static str, Option<String>, String)>,
    problem_count: u64,
    /// The rows that carry at least one of the three fields.
    with_fields: u64,
}

impl Scan {
    /// The digests the rows name, in order.
    pub fn digests(&self) -> impl Iterator<Item = ManifestDigest> + '_ {
        self.tallies.iter().map(|t| t.digest)
    }

    fn row(&mut self, at: At, vals: [Val<'_>; 3]) {
        let [digest, version, arm] = vals;
        if ![&digest, &version, &arm]
            .iter()
            .all(|v| matches!(v, Val::Absent))
        {
            self.with_fields += 1;
        }
        let arm_text = arm.as_str();
        let ce = arm_text.is_some_and(is_ce_arm);
        let arm_cut = arm_text.map(cut);
        let carried: Vec<&str> = [
            (digest.present(), self.fields.digest.as_str()),
            (version.present(), self.fields.version.as_str()),
        ]
        .iter()
        .filter(|(has, _)| *has != ce)
        .map(|(_, f)| *f)
        .collect();
        if !carried.is_empty() {
            let who = match &arm_cut {
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
            self.problem(at, "arm-mismatch", arm_cut.as_deref(), detail);
        }
        let key = match &digest {
            Val::Str(s) => match lower_hex_digest(s) {
                Some(d) => Some(d),
                None => {
                    let detail = format!(
                        "{} {} is not 64 lowercase hex characters",
                        self.fields.digest,
                        quoted(&cut(s))
                    );
                    self.problem(at, "malformed-digest", arm_cut.as_deref(), detail);
                    None
                }
            },
            Val::Other(kind) => {
                let detail = format!(
                    "{} is {kind}, not a string of 64 lowercase hex characters",
                    self.fields.digest
                );
                self.problem(at, "malformed-digest", arm_cut.as_deref(), detail);
                None
            }
            Val::Absent | Val::Null => None,
        };
        let Some(key) = key else { return };
        let i = self.index.tally(&mut self.tallies, key, at);
        let t = &mut self.tallies[i];
        t.rows += 1;
        t.last = at;
        match &version {
            Val::Str(v) => t.versions.add(&mut self.values, &cut(v), at),
            Val::Other(kind) => t.versions.add(&mut self.values, &format!("({kind})"), at),
            Val::Absent | Val::Null => {}
        }
        if let Some(a) = &arm_cut {
            t.arms.add(&mut self.values, a, at);
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

    /// Puts the tallies in digest order and lets go of what only reading needed.
    fn done(&mut self) {
        self.index = Index::default();
        self.tallies.sort_unstable_by_key(|t| t.digest);
        self.tallies.shrink_to_fit();
    }
}

/// A value already [`cut`], in quotes and escaped as JSON escapes it.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
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
        lines: Lines::default(),
        tallies: Vec::new(),
        index: Index::default(),
        values: Values::default(),
        problems: Vec::new(),
        problem_count: 0,
        with_fields: 0,
    };
    let mut buf = vec![0u8; CHUNK];
    let mut before = 0u64;
    for source in sources {
        let (mut stream, size) = open(source)?;
        scan.lines.names.push(source.name());
        scan.lines.before.push(before);
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
                    let at = At(before + input.lines);
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
        before += input.lines;
        scan.inputs.push(input);
    }
    scan.done();
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
pub struct Claimed<'a> {
    /// The version or arm, [`cut`].
    pub value: &'a str,
    /// The rows that claim it.
    pub rows: u64,
    /// The first row that does.
    pub first: Place<'a>,
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

/// Everything the audit says about one digest: a view, made when asked, of
/// what [`Digests`] holds compactly.
#[derive(Debug, serde::Serialize)]
pub struct DigestAudit<'a> {
    /// The manifest digest.
    pub manifest_digest: ManifestDigest,
    /// Its standing.
    pub status: Status,
    /// The snapshot's version, or null when it is not in the store.
    pub version: Option<&'a str>,
    /// The versions the rows claim (non-strings in parentheses), at most
    /// [`KEPT_VALUES`].
    pub claimed_versions: Vec<Claimed<'a>>,
    /// Rows claiming further versions.
    pub claimed_versions_unlisted: u64,
    /// The rows that name the digest.
    pub rows: u64,
    /// The arms of those rows, at most [`KEPT_VALUES`].
    pub arms: Vec<Claimed<'a>>,
    /// Rows of further arms.
    pub arms_unlisted: u64,
    /// The first row naming it.
    pub first: Place<'a>,
    /// The last row naming it.
    pub last: Place<'a>,
    /// With `--verify`, the objects that fail their re-hash.
    pub damaged: &'a [DamagedObject],
    /// Whether it was fetched from `--registry` by this audit.
    pub pulled: bool,
    /// With `--registry`, why the digest could not be pulled.
    pub pull_error: Option<&'a str>,
}

/// Every distinct digest of the inputs, in digest order, held as the scan
/// tallied it; serialized (and printed) one [`DigestAudit`] at a time.
#[derive(Debug)]
pub struct Digests {
    tallies: Vec<Tally>,
    values: Values,
    lines: Lines,
    damaged: BTreeMap<ManifestDigest, Vec<DamagedObject>>,
    pull_errors: BTreeMap<ManifestDigest, String>,
}

impl Digests {
    /// How many there are.
    pub fn len(&self) -> usize {
        self.tallies.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tallies.is_empty()
    }

    /// Each digest's audit, in digest order.
    pub fn iter(&self) -> impl Iterator<Item = DigestAudit<'_>> {
        self.tallies.iter().map(|t| self.audit(t))
    }

    fn status(&self, t: &Tally) -> Status {
        let Some(stored) = t.stored else {
            return Status::Unknown;
        };
        if self.damaged.contains_key(&t.digest) {
            Status::Damaged
        } else if t.versions.unlisted() > 0 || t.versions.iter().any(|c| c.value != stored) {
            Status::VersionMismatch
        } else if t.pulled {
            Status::Pulled
        } else {
            Status::Ok
        }
    }

    fn audit<'a>(&'a self, t: &'a Tally) -> DigestAudit<'a> {
        DigestAudit {
            manifest_digest: t.digest,
            status: self.status(t),
            version: t.stored.map(|v| self.values.get(v)),
            claimed_versions: t.versions.report(&self.values, &self.lines),
            claimed_versions_unlisted: t.versions.unlisted(),
            rows: t.rows,
            arms: t.arms.report(&self.values, &self.lines),
            arms_unlisted: t.arms.unlisted(),
            first: self.lines.place(t.first),
            last: self.lines.place(t.last),
            damaged: self.damaged.get(&t.digest).map_or(&[], Vec::as_slice),
            pulled: t.pulled,
            pull_error: self.pull_errors.get(&t.digest).map(String::as_str),
        }
    }
}

impl serde::Serialize for Digests {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
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
    pub digests: Digests,
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
    pub pulled: &'a BTreeSet<ManifestDigest>,
    /// The digests it could not give, and why.
    pub pull_errors: &'a BTreeMap<ManifestDigest, String>,
}

/// Every snapshot of the store with its version, asked once rather than
/// once per digest of the inputs.
fn stored_versions(store: &Store) -> Result<HashMap<ManifestDigest, String>> {
    Ok(store
        .catalogue()
        .snapshots(None, None)?
        .into_iter()
        .map(|s| (s.digest, s.version))
        .collect())
}

/// The digests of `scan` the store does not hold.
pub fn unknown(store: &Store, scan: &Scan) -> Result<Vec<ManifestDigest>> {
    let stored = stored_versions(store)?;
    Ok(scan.digests().filter(|d| !stored.contains_key(d)).collect())
}

/// Looks every digest up in the store and decides its status.
pub fn judge(store: &Store, scan: Scan, opts: &JudgeOptions<'_>) -> Result<AuditReport> {
    let Scan {
        fields,
        inputs,
        lines,
        mut tallies,
        index: _,
        mut values,
        problems,
        problem_count,
        with_fields,
    } = scan;
    let stored = stored_versions(store)?;
    let mut held: Vec<ManifestDigest> = Vec::new();
    for t in &mut tallies {
        if let Some(v) = stored.get(&t.digest) {
            held.push(t.digest);
            // No id left for the version is no version known: unknown.
            t.stored = values.id(v);
        }
        t.pulled = opts.pulled.contains(&t.digest);
    }
    drop(stored);
    let mut damaged: BTreeMap<ManifestDigest, Vec<DamagedObject>> = BTreeMap::new();
    if opts.verify && !held.is_empty() {
        let hexes: Vec<String> = held.iter().map(ManifestDigest::to_hex).collect();
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
            let hit: &[ManifestDigest] = if p.snapshots.is_empty() {
                &held
            } else {
                &p.snapshots
            };
            for d in hit {
                damaged.entry(*d).or_default().push(DamagedObject {
                    kind: p.kind,
                    path: p.path.clone(),
                    detail: p.detail.clone(),
                });
            }
        }
    }
    let row_problems: Vec<RowProblem> = problems
        .into_iter()
        .map(|(at, kind, arm, detail)| {
            let place = lines.place(at);
            RowProblem {
                file: place.file.to_string(),
                line: place.line,
                kind,
                arm,
                detail,
            }
        })
        .collect();
    let digests = Digests {
        tallies,
        values,
        lines,
        damaged,
        pull_errors: opts.pull_errors.clone(),
    };
    let malformed_count = inputs.iter().map(|i| i.malformed_count).sum();
    let rows = inputs.iter().map(|i| i.rows).sum();
    let mut by: BTreeMap<Status, usize> = BTreeMap::new();
    for d in digests.iter() {
        *by.entry(d.status).or_default() += 1;
    }
    // Lines that are not rows are listed, but do not fail the audit: the
    // harness skips them (a line cut short by a killed writer is one). An
    // input with no row, or whose rows carry none of the fields, is not a
    // results file of these fields, though: nothing in it was audited.
    let empty = if rows == 0 {
        Some("no line is a row (a JSON object)".to_string())
    } else if with_fields == 0 {
        Some(format!(
            "no row carries {}, {} or {} (see --digest-field, --version-field, --arm-field)",
            fields.digest, fields.version, fields.arm
        ))
    } else {
        None
    };
    let passed = by.keys().all(|s| s.passes()) && problem_count == 0 && empty.is_none();
    let verdict = verdict(
        &by,
        digests.len(),
        problem_count,
        malformed_count,
        rows,
        empty.as_deref(),
        passed,
    );
    Ok(AuditReport {
        fields,
        inputs,
        rows,
        digests,
        row_problem_count: problem_count,
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
    by: &BTreeMap<Status, usize>,
    digests: usize,
    problems: u64,
    malformed: u64,
    rows: u64,
    empty: Option<&str>,
    passed: bool,
) -> String {
    let statuses: Vec<String> = by
        .iter()
        .map(|(s, n)| format!("{n} {}", s.as_str()))
        .collect();
    let mut parts = vec![format!(
        "{} ({})",
        crate::error::counted(digests, "digest", "digests"),
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
        "{}: {}{} in {}",
        if passed { "PASS" } else { "FAIL" },
        empty.map(|e| format!("{e}: ")).unwrap_or_default(),
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
        let mut claims = Claims::default();
        let mut values = Values::default();
        for i in 0..(KEPT_VALUES + 5) {
            claims.add(&mut values, &format!("v{i}"), At(i as u64 + 1));
            claims.add(&mut values, "v0", At(100));
        }
        assert_eq!(claims.iter().count(), KEPT_VALUES);
        assert_eq!(claims.unlisted(), 5);
        let first = claims.iter().next().unwrap();
        assert_eq!(values.get(first.value), "v0");
        assert_eq!(first.rows, 1 + (KEPT_VALUES as u64 + 5));
        assert_eq!(first.first, At(1));
        let listed: Vec<&str> = claims.iter().map(|c| values.get(c.value)).collect();
        assert_eq!(listed[KEPT_VALUES - 1], format!("v{}", KEPT_VALUES - 1));
        // Each value is held once, however many digests claim it.
        let mut other = Claims::default();
        other.add(&mut values, "v3", At(7));
        assert_eq!(values.list.len(), KEPT_VALUES);
    }

    #[test]
    fn a_digest_costs_a_fixed_few_bytes() {
        // What 1,000,000 distinct digests of one version and one arm hold:
        // a tally each, and 16 bytes of index each while reading.
        assert!(std::mem::size_of::<Tally>() <= 128);
        assert_eq!(std::mem::size_of::<Claims>(), 32);
        assert_eq!(std::mem::size_of::<(u64, usize)>(), 16);
    }

    #[test]
    fn digests_colliding_in_the_index_keep_their_own_tallies() {
        let mut index = Index::default();
        let mut tallies = Vec::new();
        let a = ManifestDigest::from_bytes([1; 32]);
        let b = ManifestDigest::from_bytes([2; 32]);
        assert_eq!(index.tally(&mut tallies, a, At(1)), 0);
        // Make b's hash land on a's entry, as a collision would.
        use std::hash::BuildHasher;
        let hash_b = index.key.hash_one(b);
        index.by_hash.insert(hash_b, 0);
        assert_eq!(index.tally(&mut tallies, b, At(2)), 1);
        assert_eq!(index.tally(&mut tallies, b, At(3)), 1);
        assert_eq!(tallies[1].digest, b);
        assert_eq!(index.collided.len(), 1);
    }

    #[test]
    fn values_are_cut_to_the_quoted_bound_with_a_marker() {
        assert_eq!(cut("1.0.0"), "1.0.0");
        let exact = "é".repeat(QUOTED);
        assert_eq!(cut(&exact), exact.as_str());
        let long = format!("{exact}x");
        assert_eq!(cut(&long), format!("{exact}…"));
        assert_eq!(cut(&"a".repeat(1_000_000)).chars().count(), QUOTED + 1);
    }

    #[test]
    fn places_name_the_input_across_empty_ones() {
        let lines = Lines {
            names: vec!["a".into(), "empty".into(), "c".into()],
            before: vec![0, 5, 5],
        };
        let p = |n| {
            let p = lines.place(At(n));
            (p.file.to_string(), p.line)
        };
        assert_eq!(p(1), ("a".into(), 1));
        assert_eq!(p(5), ("a".into(), 5));
        assert_eq!(p(6), ("c".into(), 1));
        assert_eq!(p(8), ("c".into(), 3));
    }

    #[test]
    fn a_line_that_is_not_utf8_names_its_first_bad_byte() {
        let node = Node::of(&Fields::default()).unwrap();
        let line = b"{\"arm\": \"ce_review\", \"ce_plugin_manifest_digest\": \"ab\xffcd\"}";
        let why = parse_row(line, &node).unwrap_err();
        let at = line.iter().position(|&b| b == 0xff).unwrap() + 1;
        assert_eq!(why, format!("invalid UTF-8 at byte {at}"));
        // Even in a field audit does not keep.
        let line = b"{\"note\": \"\xfe\", \"arm\": \"baseline\"}";
        assert_eq!(
            parse_row(line, &node).unwrap_err(),
            "invalid UTF-8 at byte 11"
        );
        assert_eq!(line[10], 0xfe);
        // Cut inside a character, as a killed writer leaves it.
        let line = "{\"arm\": \"é".as_bytes();
        let line = &line[..line.len() - 1];
        assert_eq!(
            parse_row(line, &node).unwrap_err(),
            "invalid UTF-8 at byte 10: the line ends inside a character"
        );
        assert_eq!(
            parse_row(b"{\"arm\": 1,}", &node).unwrap_err(),
            "not JSON: trailing comma at line 1 column 11"
        );
        assert_eq!(
            parse_row(b"-1", &node).unwrap_err(),
            "a JSON number, not an object"
        );
    }
}
