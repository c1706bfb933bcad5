//! Scanning: the rows' digests tallied, one fixed-size tally per distinct
//! digest, with the bounded lists of the versions, arms and problems seen.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;

use crate::digest::ManifestDigest;
use crate::error::{Error, Result};
use crate::profile::ce::rules::is_ce_arm;
use crate::progress::Progress;
use crate::pyjson::PyString;

use super::*;

/// A line of the inputs, counted from 1 across all of them: the lines of
/// the first input, then those of the next, and so on. One integer, so that
/// a tally's places cost 8 bytes each; [`Lines::place`] names the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct At(pub(super) u64);

/// Where each input's lines start, to turn an [`At`] back into a place.
#[derive(Debug, Default)]
pub(super) struct Lines {
    /// Each input's name, as reported.
    pub(super) names: Vec<String>,
    /// The lines of all inputs before each one.
    pub(super) before: Vec<u64>,
}

impl Lines {
    /// The input and line of `at`.
    pub(super) fn place(&self, at: At) -> Place<'_> {
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
pub(super) struct Values {
    pub(super) list: Vec<Box<str>>,
    ids: HashMap<Box<str>, NonZeroU32>,
}

impl Values {
    /// The id of `value`, added when new; `None` when no id is left.
    pub(super) fn id(&mut self, value: &str) -> Option<NonZeroU32> {
        if let Some(&id) = self.ids.get(value) {
            return Some(id);
        }
        let id = NonZeroU32::new(u32::try_from(self.list.len() + 1).ok()?)?;
        self.list.push(value.into());
        self.ids.insert(value.into(), id);
        Some(id)
    }

    pub(super) fn get(&self, id: NonZeroU32) -> &str {
        self.list.get(id.get() as usize - 1).map_or("", |v| &**v)
    }
}

/// A value claimed by rows, with how many and the first.
#[derive(Debug)]
pub(super) struct Claim {
    pub(super) rows: u64,
    pub(super) first: At,
    pub(super) value: NonZeroU32,
}

/// The values one field takes in a digest's rows: the first held inline
/// (most digests have one version and one arm), any others beside it, at
/// most [`KEPT_VALUES`] in all; rows of further values are counted.
#[derive(Debug, Default)]
pub(super) struct Claims {
    head: Option<Claim>,
    pub(super) rest: Option<Box<MoreClaims>>,
}

#[derive(Debug, Default)]
pub(super) struct MoreClaims {
    pub(super) more: Vec<Claim>,
    pub(super) unlisted: u64,
}

impl Claims {
    pub(super) fn iter(&self) -> impl Iterator<Item = &Claim> {
        self.head
            .iter()
            .chain(self.rest.iter().flat_map(|r| r.more.iter()))
    }

    pub(super) fn unlisted(&self) -> u64 {
        self.rest.as_ref().map_or(0, |r| r.unlisted)
    }

    /// Counts a row claiming `value` (already [`cut`]).
    pub(super) fn add(&mut self, values: &mut Values, value: &str, at: At) {
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

    pub(super) fn report<'a>(&self, values: &'a Values, lines: &'a Lines) -> Vec<Claimed<'a>> {
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
pub(super) struct Tally {
    pub(super) digest: ManifestDigest,
    pub(super) rows: u64,
    pub(super) first: At,
    pub(super) last: At,
    pub(super) versions: Claims,
    pub(super) arms: Claims,
    /// The snapshot's version, once the store was asked: an id in
    /// [`Values`]; `None` when the store does not hold the digest.
    pub(super) stored: Option<NonZeroU32>,
    /// Whether this audit pulled it from the registry.
    pub(super) pulled: bool,
}

/// What the rows say about one digest of one tree field
/// of the field table ([`FieldTable`]): how many rows name it, the first
/// and the last.
#[derive(Debug)]
pub(super) struct TreeTally {
    pub(super) rows: u64,
    pub(super) first: At,
    pub(super) last: At,
}

/// Finds a digest's tally in 16 bytes an entry: a table from a keyed
/// 64-bit hash of the digest to the tally's index, the tally holding the
/// digest itself. The key is random per run, so that an input cannot choose
/// digests that collide; two digests that do are looked up in `collided`.
#[derive(Debug, Default)]
pub(super) struct Index {
    pub(super) key: std::hash::RandomState,
    pub(super) by_hash: HashMap<u64, usize, std::hash::BuildHasherDefault<Spread>>,
    pub(super) collided: HashMap<ManifestDigest, usize>,
}

/// The hasher of a hash already random: passes the 64 bits on.
#[derive(Default)]
pub(super) struct Spread(pub(super) u64);

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
    pub(super) fn tally(
        &mut self,
        tallies: &mut Vec<Tally>,
        digest: ManifestDigest,
        at: At,
    ) -> usize {
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
    pub(super) fields: Fields,
    pub(super) inputs: Vec<Input>,
    pub(super) lines: Lines,
    /// One per distinct digest; in digest order once the scan is done.
    pub(super) tallies: Vec<Tally>,
    /// Finds a tally while reading; dropped when the scan is done.
    pub(super) index: Index,
    pub(super) values: Values,
    pub(super) problems: Vec<(At, &'static str, Option<String>, String)>,
    pub(super) problem_count: u64,
    /// The rows that carry at least one of the three fields (or of the
    /// field table).
    pub(super) with_fields: u64,
    /// The digest fields read besides the CE digest's.
    pub(super) table: FieldTable,
    /// Each distinct digest of each field of the table (its index in
    /// it), in field then digest order.
    pub(super) tree: BTreeMap<(usize, ManifestDigest), TreeTally>,
    /// For the digest field, then each field of the table: the rows that
    /// carry it (not null), and of those the rows whose value is no digest.
    pub(super) carried: Vec<(u64, u64)>,
}

impl Scan {
    /// The digests the rows name, in order.
    pub fn digests(&self) -> impl Iterator<Item = ManifestDigest> + '_ {
        self.tallies.iter().map(|t| t.digest)
    }

    pub(super) fn row(&mut self, at: At, vals: &[Val<'_>; SLOTS]) {
        if !vals.iter().all(|v| matches!(v, Val::Absent)) {
            self.with_fields += 1;
        }
        let [digest, version, arm, trees @ ..] = vals;
        // The arm as held and listed (as quoted in a problem's detail, when
        // one is made).
        let arm_shown: Option<Cow<'_, str>> = match &arm {
            Val::Str(s) => Some(cut(s)),
            Val::Lone(s) => Some(Cow::Owned(shown_lone(s))),
            Val::Absent | Val::Null | Val::Other(_) => None,
        };
        let ce = arm.as_str().is_some_and(is_ce_arm);
        let carried: Vec<&str> = [
            (digest.present(), self.fields.digest.as_str()),
            (version.present(), self.fields.version.as_str()),
        ]
        .iter()
        .filter(|(has, _)| *has != ce)
        .map(|(_, f)| *f)
        .collect();
        if !carried.is_empty() {
            let arm_quoted = match &arm {
                Val::Lone(s) => Some(quoted_lone(s)),
                _ => arm_shown.as_deref().map(quoted),
            };
            let detail = self.arm_mismatch(ce, arm_quoted.as_deref(), &carried);
            self.problem(at, "arm-mismatch", arm_shown.as_deref(), detail);
        }
        let key = match digest_in(&self.fields.digest, digest) {
            Ok(key) => key,
            Err(detail) => {
                self.problem(at, "malformed-digest", arm_shown.as_deref(), detail);
                None
            }
        };
        if digest.present() {
            self.carried[0].0 += 1;
            if key.is_none() {
                self.carried[0].1 += 1;
            }
        }
        for (i, val) in trees.iter().take(self.table.len()).enumerate() {
            if val.present() {
                self.carried[1 + i].0 += 1;
            }
            match digest_in(&self.table.fields[i].name, val) {
                Ok(Some(d)) => {
                    let t = self.tree.entry((i, d)).or_insert(TreeTally {
                        rows: 0,
                        first: at,
                        last: at,
                    });
                    t.rows += 1;
                    t.last = at;
                }
                Ok(None) => {}
                Err(detail) => {
                    self.carried[1 + i].1 += 1;
                    self.problem(at, "malformed-digest", arm_shown.as_deref(), detail)
                }
            }
        }
        let Some(key) = key else { return };
        let i = self.index.tally(&mut self.tallies, key, at);
        let t = &mut self.tallies[i];
        t.rows += 1;
        t.last = at;
        match &version {
            Val::Str(v) => t.versions.add(&mut self.values, &cut(v), at),
            // Shown with its `\udXXX`: never a snapshot's version.
            Val::Lone(v) => t.versions.add(&mut self.values, &shown_lone(v), at),
            Val::Other(kind) => t.versions.add(&mut self.values, &format!("({kind})"), at),
            Val::Absent | Val::Null => {}
        }
        if let Some(a) = &arm_shown {
            t.arms.add(&mut self.values, a, at);
        }
    }

    /// How a row of arm `arm` (already quoted; a CE arm when `ce`) breaks
    /// the arm rule: `carried` names the fields it has though it must not
    /// (or lacks though it must).
    fn arm_mismatch(&self, ce: bool, arm: Option<&str>, carried: &[&str]) -> String {
        let who = match arm {
            Some(a) => format!("the {} arm {a}", if ce { "ce_*" } else { "non-CE" }),
            None => "a row without an arm".to_string(),
        };
        if ce {
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
        }
    }

    fn both(&self) -> String {
        format!("{} and {}", self.fields.digest, self.fields.version)
    }

    pub(super) fn problem(
        &mut self,
        at: At,
        kind: &'static str,
        arm: Option<&str>,
        detail: String,
    ) {
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

/// The digest a row's `field` holds: none when absent or null, else the
/// problem's detail when it is not 64 lowercase hex characters.
fn digest_in(field: &str, val: &Val<'_>) -> std::result::Result<Option<ManifestDigest>, String> {
    match val {
        Val::Str(s) => match ManifestDigest::from_lower_hex(s) {
            Some(d) => Ok(Some(d)),
            None => Err(format!(
                "{field} {} is not 64 lowercase hex characters",
                quoted(&cut(s))
            )),
        },
        // No digest is a lone surrogate: the row names none the store
        // could hold, and says so.
        Val::Lone(s) => Err(format!(
            "{field} {} holds a lone surrogate, so it is not 64 lowercase hex characters",
            quoted_lone(s)
        )),
        Val::Other(kind) => Err(format!(
            "{field} is {kind}, not a string of 64 lowercase hex characters"
        )),
        Val::Absent | Val::Null => Ok(None),
    }
}

/// A value already [`cut`], in quotes and escaped as JSON escapes it.
pub(super) fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// A string that holds a lone surrogate, as audit holds and lists it (an
/// arm, a claimed version): cut to [`QUOTED`] characters as [`cut`] does,
/// each lone surrogate written `\udXXX`, as `json.dumps` writes it.
pub(super) fn shown_lone(s: &PyString) -> String {
    let mut out = String::new();
    lone_pieces(s, |piece| match piece {
        Ok(c) => out.push(c),
        Err(unit) => out.push_str(&format!("\\u{unit:04x}")),
    });
    out
}

/// A string that holds a lone surrogate, cut as [`shown_lone`], as a JSON
/// string literal (what `json.dumps(s, ensure_ascii=False)` writes).
pub(super) fn quoted_lone(s: &PyString) -> String {
    /// Moves a run of characters to `out`, JSON-escaped.
    fn flush(run: &mut String, out: &mut String) {
        let q = quoted(run);
        out.push_str(q.get(1..q.len().saturating_sub(1)).unwrap_or_default());
        run.clear();
    }
    let mut out = String::from("\"");
    let mut run = String::new();
    lone_pieces(s, |piece| match piece {
        Ok(c) => run.push(c),
        Err(unit) => {
            flush(&mut run, &mut out);
            out.push_str(&format!("\\u{unit:04x}"));
        }
    });
    flush(&mut run, &mut out);
    out.push('"');
    out
}

/// The first [`QUOTED`] code points of `s`, each a character or a lone
/// surrogate, then `…` when there are more.
fn lone_pieces(s: &PyString, mut each: impl FnMut(std::result::Result<char, u32>)) {
    let points = s.code_points();
    for &cp in points.iter().take(QUOTED) {
        each(char::from_u32(cp).ok_or(cp));
    }
    if points.len() > QUOTED {
        each(Ok('…'));
    }
}

impl Scan {
    /// A scan of nothing yet, for `fields` and `table`.
    fn empty(fields: &Fields, table: &FieldTable) -> Scan {
        Scan {
            fields: fields.clone(),
            inputs: Vec::new(),
            lines: Lines::default(),
            tallies: Vec::new(),
            index: Index::default(),
            values: Values::default(),
            problems: Vec::new(),
            problem_count: 0,
            with_fields: 0,
            table: table.clone(),
            tree: BTreeMap::new(),
            carried: vec![(0, 0); 1 + table.len()],
        }
    }
}

impl Input {
    /// An input of nothing read yet.
    fn empty(file: String, format: &'static str) -> Input {
        Input {
            file,
            format,
            bytes: 0,
            lines: 0,
            rows: 0,
            malformed_count: 0,
            malformed: Vec::new(),
        }
    }
}

/// Reads every input once and tallies its rows by digest, the digests of
/// each field of `table` apart.
pub fn scan(
    sources: &[Source],
    fields: &Fields,
    table: &FieldTable,
    progress: bool,
) -> Result<Scan> {
    let node = Node::with_table(fields, table)?;
    if sources
        .iter()
        .filter(|s| matches!(s, Source::Stdin))
        .count()
        > 1
    {
        return Err(crate::error::Request::StdinTwice.into());
    }
    let mut scan = Scan::empty(fields, table);
    let mut buf = vec![0u8; CHUNK];
    let mut before = 0u64;
    for source in sources {
        let (mut stream, size) = open(source)?;
        scan.lines.names.push(source.name());
        scan.lines.before.push(before);
        let mut input = Input::empty(source.name(), stream.format());
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
                    if is_blank(line) {
                        return;
                    }
                    let mut vals: [Val<'_>; SLOTS] = Default::default();
                    match parse_row_into(line, &node, &mut vals) {
                        Ok(()) => {
                            input.rows += 1;
                            scan.row(at, &vals);
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
