//! Python-compatible JSON loading for Compound Engineering `plugin.json` manifests.
//!
//! The reference implementation validates a plugin manifest with
//! `json.loads(path.read_text())` on CPython 3.11 (C-accelerated `json`
//! module, UTF-8 locale) and then checks its `name` and `version`. cestore must
//! accept and reject exactly the same files, so this module reproduces that
//! dialect instead of RFC 8259 (which is what `serde_json` implements):
//!
//! * strict UTF-8 decoding (the same byte sequences `std::str::from_utf8`
//!   rejects), a leading byte order mark is an error;
//! * the `NaN`, `Infinity` and `-Infinity` extensions, `1e400` as infinity;
//! * `\uXXXX` escapes that produce lone surrogates (kept, see [`PyString`]);
//! * duplicate object keys resolved the `dict` way: the last value wins, at
//!   the position of the first occurrence;
//! * CPython's limit of [`MAX_INT_DIGITS`] digits per integer literal and the
//!   recursion limit the reference hits on deeply nested containers
//!   ([`MAX_DEPTH`]).
//!
//! The grammar and the error messages follow `scan_once_unicode` in CPython
//! 3.11's `Modules/_json.c` and `json.decoder.JSONDecoder.decode`. The parser
//! is iterative, so hostile nesting cannot overflow the Rust stack.

use std::borrow::Cow;
use std::collections::HashMap;

/// Most digits CPython 3.11 converts in one integer literal (`sys.int_info.default_max_str_digits`).
pub const MAX_INT_DIGITS: usize = 4300;

/// Deepest container nesting the reference accepts in `plugin.json`, counting the manifest object itself.
///
/// CPython 3.11 charges one unit of its recursion budget per nested `[` or `{`
/// (`Py_EnterRecursiveCall` in `scan_once_unicode`); the budget is
/// `sys.getrecursionlimit()` = 1000 minus the Python frames already on the
/// stack, so the threshold depends on where `json.loads` is called from. It
/// was measured with the real reference: `python3
/// /work/shared/reference/oracle.py snapshot DIR --version 1.0.0` on a minimal
/// plugin tree (`.claude-plugin/plugin.json` plus `skills/ce-plan/SKILL.md`,
/// `skills/ce-work/SKILL.md`, `skills/ce-code-review/SKILL.md`) whose
/// manifest is `{"name":"compound-engineering","version":"1.0.0","x":V}`,
/// where `V` is N nested arrays (`[[...]]`), N nested objects
/// (`{"a":{"a":...1}}`) or N alternating objects and arrays. Bisecting N over
/// 1..2000 gave, for all three shapes, N = 988 accepted and N = 989 rejected
/// with `RecursionError` ("maximum recursion depth exceeded while decoding a
/// JSON array from a unicode string"). With the outer manifest object that is
/// 989 levels accepted, 990 rejected. (A bare `python3 -c 'json.loads(...)'`
/// sits fewer frames deep and accepts 995 levels, so only the oracle's number
/// is meaningful here.) The test `oracle_agrees_on_the_depth_threshold`
/// re-checks this against the oracle when it is present.
pub const MAX_DEPTH: usize = 989;

/// A decoded JSON value, shaped like the Python object `json.loads` returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`, Python's `None`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer literal: its decimal digits as written, with the sign.
    Int(String),
    /// A number with a fraction or exponent, or `NaN` / `Infinity` / `-Infinity`.
    Float(f64),
    /// A string.
    Str(PyString),
    /// An array, Python's `list`.
    Array(Vec<Value>),
    /// An object with duplicate keys already resolved (last value, first position).
    Object(Vec<(PyString, Value)>),
}

/// A Python `str`: a sequence of code points that may include lone surrogates.
///
/// JSON like `"\ud800"` decodes in Python to a string holding the surrogate
/// code point U+D800, which a Rust `String` cannot hold. Strings without lone
/// surrogates are stored as UTF-8; the others as raw code points. The choice is
/// canonical, so derived equality and hashing match Python's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyString(Repr);

/// Storage of a [`PyString`]; `CodePoints` only when a lone surrogate is present.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Repr {
    Utf8(String),
    CodePoints(Vec<u32>),
}

/// Why [`loads`] rejected a document; each variant is one Python exception.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not UTF-8 (Python's `UnicodeDecodeError`, same message).
    #[error("{message}")]
    NotUtf8 {
        /// Byte offset of the first undecodable byte.
        offset: usize,
        /// Python's message, e.g. "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte".
        message: String,
    },
    /// The text is not JSON (Python's `json.JSONDecodeError`, same message).
    #[error("{message}: line {line} column {column} (char {pos})")]
    Syntax {
        /// What went wrong, e.g. "Expecting value".
        message: &'static str,
        /// Character (code point) offset of the problem.
        pos: usize,
        /// One-based line of the problem.
        line: usize,
        /// One-based column (in characters) of the problem.
        column: usize,
    },
    /// An integer literal has more than [`MAX_INT_DIGITS`] digits (Python's `ValueError`).
    #[error(
        "Exceeds the limit (4300 digits) for integer string conversion: value has {digits} digits; \
         use sys.set_int_max_str_digits() to increase the limit"
    )]
    IntTooLong {
        /// Number of digits in the literal, sign excluded.
        digits: usize,
    },
    /// Containers nest deeper than [`MAX_DEPTH`] (Python's `RecursionError`).
    #[error(
        "maximum recursion depth exceeded while decoding a JSON {container} from a unicode string"
    )]
    TooDeep {
        /// Nesting depth of the container that was refused (`MAX_DEPTH + 1`).
        depth: usize,
        /// "array" or "object".
        container: &'static str,
    },
}

/// Why [`check_plugin_manifest`] refused a manifest, with the reference's messages.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ManifestProblem {
    /// The file is not loadable JSON.
    #[error("Compound Engineering plugin manifest is invalid: {0}")]
    Invalid(LoadError),
    /// The top level is not an object or its `name` is not "compound-engineering".
    #[error("CE comparator requires the compound-engineering plugin manifest")]
    NotCompoundEngineering,
    /// The manifest's `version` differs from the pinned one.
    #[error("Compound Engineering plugin version mismatch: expected {expected}, got {got}")]
    VersionMismatch {
        /// The version the caller pinned.
        expected: String,
        /// Python `repr()` of the manifest's `version` value, or "None" when absent.
        got: String,
    },
}

/// Decodes `bytes` exactly like Python 3.11's `json.loads(bytes.decode("utf-8"))`.
///
/// # Errors
///
/// A [`LoadError`] whenever that Python expression raises, with Python's message.
pub fn loads(bytes: &[u8]) -> Result<Value, LoadError> {
    parse_text(decode_utf8(bytes)?)
}

/// Validates a `plugin.json` exactly like the reference's manifest check.
///
/// The reference reads the file with `Path.read_text()`, which also
/// translates `\r\n` and lone `\r` to `\n`; that never changes what is
/// accepted but does change the character positions in error messages, so it
/// is reproduced here.
///
/// # Errors
///
/// The [`ManifestProblem`] the reference would raise, with its message.
pub fn check_plugin_manifest(bytes: &[u8], version: &str) -> Result<(), ManifestProblem> {
    let text = decode_utf8(bytes).map_err(ManifestProblem::Invalid)?;
    let manifest = parse_text(&universal_newlines(text)).map_err(ManifestProblem::Invalid)?;
    let is_ce = |name: &Value| matches!(name, Value::Str(s) if s.eq_str("compound-engineering"));
    if !matches!(manifest, Value::Object(_)) || !manifest.get("name").is_some_and(is_ce) {
        return Err(ManifestProblem::NotCompoundEngineering);
    }
    match manifest.get("version") {
        Some(Value::Str(found)) if found.eq_str(version) => Ok(()),
        other => Err(ManifestProblem::VersionMismatch {
            expected: version.to_owned(),
            got: other.map_or_else(|| "None".to_owned(), Value::py_repr),
        }),
    }
}

impl ManifestProblem {
    /// Name of the exception class the reference oracle reports for this problem.
    ///
    /// The reference only wraps `OSError`, `UnicodeError` and
    /// `JSONDecodeError` in its `SandboxError`; an over-long integer escapes
    /// as a bare `ValueError` and deep nesting as a `RecursionError`.
    pub fn reference_kind(&self) -> &'static str {
        match self {
            Self::Invalid(LoadError::IntTooLong { .. }) => "ValueError",
            Self::Invalid(LoadError::TooDeep { .. }) => "RecursionError",
            _ => "SandboxError",
        }
    }

    /// The exact message the reference oracle reports for this problem.
    pub fn reference_message(&self) -> String {
        match self {
            Self::Invalid(inner @ (LoadError::IntTooLong { .. } | LoadError::TooDeep { .. })) => {
                inner.to_string()
            }
            _ => self.to_string(),
        }
    }
}

impl Value {
    /// The value of `key` when `self` is an object holding it (like `dict.get`).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k.eq_str(key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Python's `repr()` of the value (exact for scalars, best effort for Unicode printability).
    ///
    /// Recurses once per nesting level; values from [`loads`] are at most [`MAX_DEPTH`] deep.
    pub fn py_repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    /// Appends the `repr()` of `self` to `out`.
    fn write_repr(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("None"),
            Value::Bool(true) => out.push_str("True"),
            Value::Bool(false) => out.push_str("False"),
            Value::Int(digits) => out.push_str(int_repr(digits)),
            Value::Float(x) => out.push_str(&float_repr(*x)),
            Value::Str(s) => out.push_str(&s.py_repr()),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "" } else { ", " });
                    item.write_repr(out);
                }
                out.push(']');
            }
            Value::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    out.push_str(if i == 0 { "" } else { ", " });
                    out.push_str(&key.py_repr());
                    out.push_str(": ");
                    value.write_repr(out);
                }
                out.push('}');
            }
        }
    }
}

impl PyString {
    /// The string as UTF-8, or `None` when it holds a lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        match &self.0 {
            Repr::Utf8(text) => Some(text),
            Repr::CodePoints(_) => None,
        }
    }

    /// Whether the string equals `s` (Python `==`; never true with a lone surrogate).
    pub fn eq_str(&self, s: &str) -> bool {
        self.as_str() == Some(s)
    }

    /// Whether the string holds a lone surrogate code point.
    pub fn has_lone_surrogates(&self) -> bool {
        matches!(self.0, Repr::CodePoints(_))
    }

    /// The string's code points, surrogates included.
    pub fn code_points(&self) -> Vec<u32> {
        match &self.0 {
            Repr::Utf8(text) => text.chars().map(u32::from).collect(),
            Repr::CodePoints(points) => points.clone(),
        }
    }

    /// Python's `repr()` of the string, quotes included.
    pub fn py_repr(&self) -> String {
        let points = self.code_points();
        let has = |c: char| points.contains(&u32::from(c));
        let quote = if has('\'') && !has('"') { '"' } else { '\'' };
        let mut out = String::with_capacity(points.len() + 2);
        out.push(quote);
        for &cp in &points {
            push_repr_code_point(&mut out, cp, quote);
        }
        out.push(quote);
        out
    }
}

impl From<&str> for PyString {
    /// Wraps UTF-8 text.
    fn from(text: &str) -> Self {
        PyString(Repr::Utf8(text.to_owned()))
    }
}

/// Appends one code point of a string repr, escaped the way Python's `unicode_repr` does.
fn push_repr_code_point(out: &mut String, cp: u32, quote: char) {
    let c = char::from_u32(cp);
    match c {
        Some(c) if c == quote || c == '\\' => {
            out.push('\\');
            out.push(c);
        }
        Some('\t') => out.push_str("\\t"),
        Some('\n') => out.push_str("\\n"),
        Some('\r') => out.push_str("\\r"),
        Some(c) if c < ' ' || c == '\x7f' => push_hex_escape(out, 'x', 2, cp),
        Some(c) if c.is_ascii() || is_printable(c) => out.push(c),
        _ if cp <= 0xff => push_hex_escape(out, 'x', 2, cp),
        _ if cp <= 0xffff => push_hex_escape(out, 'u', 4, cp),
        _ => push_hex_escape(out, 'U', 8, cp),
    }
}

/// Appends `\<letter>` and `cp` as `width` lowercase hex digits.
fn push_hex_escape(out: &mut String, letter: char, width: usize, cp: u32) {
    out.push('\\');
    out.push(letter);
    out.push_str(&format!("{cp:0width$x}"));
}

/// Python's `str.isprintable()` for one non-ASCII character, via Rust's equivalent table.
///
/// Both languages call a character non-printable when its general category is
/// Cc, Cf, Cs, Co, Cn, Zl, Zp or Zs (space excepted); Rust's `escape_debug`
/// uses exactly that table. The Unicode versions differ (Python 3.11 ships
/// 14.0), so characters assigned after 14.0 count as printable here only.
/// `escape_debug` also escapes grapheme extenders at the start of a string,
/// hence the leading `a`.
fn is_printable(c: char) -> bool {
    let mut probe = String::from("a");
    probe.push(c);
    probe.escape_debug().nth(1) == Some(c)
}

/// Python's `repr()` of an integer literal (only `-0` changes: it becomes `0`).
fn int_repr(digits: &str) -> &str {
    if digits.starts_with('-') && digits[1..].bytes().all(|d| d == b'0') {
        &digits[1..]
    } else {
        digits
    }
}

/// Python's `repr()` of a float: shortest round-trip digits, Python's layout.
fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if x.is_sign_negative() { "-" } else { "" };
    format!("{sign}{}", layout_float(&digits, exponent))
}

/// Lays out shortest digits `d.ddd × 10^exponent` like CPython's `format_float_short` in `repr` mode.
fn layout_float(digits: &str, exponent: i32) -> String {
    let point = exponent + 1; // digits before the decimal point
    let count = digits.len() as i32;
    if !(-4 < point && point <= 16) {
        let (head, tail) = digits.split_at(1);
        let dot = if tail.is_empty() { "" } else { "." };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{head}{dot}{tail}e{exp_sign}{:02}", exponent.unsigned_abs());
    }
    if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point >= count {
        format!("{digits}{}.0", "0".repeat((point - count) as usize))
    } else {
        let (int_part, frac) = digits.split_at(point as usize);
        format!("{int_part}.{frac}")
    }
}

/// Strict UTF-8 decoding with Python's `UnicodeDecodeError` message on failure.
fn decode_utf8(bytes: &[u8]) -> Result<&str, LoadError> {
    std::str::from_utf8(bytes).map_err(|err| {
        let start = err.valid_up_to();
        let first = bytes.get(start).copied().unwrap_or(0);
        let (len, reason) = match err.error_len() {
            None => (bytes.len() - start, "unexpected end of data"),
            Some(1) if !(0xc2..=0xf4).contains(&first) => (1, "invalid start byte"),
            Some(n) => (n, "invalid continuation byte"),
        };
        let place = if len == 1 {
            format!("byte 0x{first:02x} in position {start}")
        } else {
            format!("bytes in position {start}-{}", start + len - 1)
        };
        LoadError::NotUtf8 {
            offset: start,
            message: format!("'utf-8' codec can't decode {place}: {reason}"),
        }
    })
}

/// Python's universal-newline translation done by `Path.read_text()`.
fn universal_newlines(text: &str) -> Cow<'_, str> {
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// `json.loads` on already decoded text.
fn parse_text(text: &str) -> Result<Value, LoadError> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    if text.starts_with('\u{feff}') {
        return Err(parser.error("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0));
    }
    parser.skip_whitespace();
    let value = parser.value()?;
    parser.skip_whitespace();
    if parser.pos != parser.bytes.len() {
        return Err(parser.error("Extra data", parser.pos));
    }
    Ok(value)
}

/// Builds a `JSONDecodeError`-style error, converting a byte offset to Python's char/line/column.
fn syntax_error(text: &str, message: &'static str, byte_pos: usize) -> LoadError {
    let (mut pos, mut line, mut last_newline) = (0, 1, None);
    for (i, c) in text.char_indices() {
        if i >= byte_pos {
            break;
        }
        if c == '\n' {
            line += 1;
            last_newline = Some(pos);
        }
        pos += 1;
    }
    let column = last_newline.map_or(pos + 1, |nl| pos - nl);
    LoadError::Syntax {
        message,
        pos,
        line,
        column,
    }
}

/// A container being filled while the parser reads its members.
enum Frame {
    /// An open array and the items read so far.
    Array(Vec<Value>),
    /// An open object, its members so far and the key whose value comes next.
    Object { members: Members, key: PyString },
}

/// Object members with Python `dict` semantics for duplicate keys.
#[derive(Default)]
struct Members {
    entries: Vec<(PyString, Value)>,
    index: HashMap<PyString, usize>,
}

impl Members {
    /// Sets `key` to `value`: replaces in place when present, appends otherwise.
    fn insert(&mut self, key: PyString, value: Value) {
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 = value,
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, value));
            }
        }
    }
}

impl Frame {
    /// Adds a finished member value to the container.
    fn push(&mut self, value: Value) {
        match self {
            Frame::Array(items) => items.push(value),
            Frame::Object { members, key } => {
                members.insert(std::mem::replace(key, PyString::from("")), value)
            }
        }
    }

    /// The byte that closes this container.
    fn closer(&self) -> u8 {
        match self {
            Frame::Array(_) => b']',
            Frame::Object { .. } => b'}',
        }
    }

    /// The finished container as a value.
    fn into_value(self) -> Value {
        match self {
            Frame::Array(items) => Value::Array(items),
            Frame::Object { members, .. } => Value::Object(members.entries),
        }
    }
}

/// A string under construction that switches to code points on the first lone surrogate.
#[derive(Default)]
struct StrBuilder {
    text: String,
    points: Option<Vec<u32>>,
}

impl StrBuilder {
    /// Appends UTF-8 text.
    fn push_str(&mut self, s: &str) {
        match &mut self.points {
            Some(points) => points.extend(s.chars().map(u32::from)),
            None => self.text.push_str(s),
        }
    }

    /// Appends one code point, which may be a surrogate.
    fn push_code_point(&mut self, cp: u32) {
        match (&mut self.points, char::from_u32(cp)) {
            (None, Some(c)) => self.text.push(c),
            (Some(points), _) => points.push(cp),
            (None, None) => {
                let mut points: Vec<u32> = self.text.chars().map(u32::from).collect();
                points.push(cp);
                self.points = Some(points);
            }
        }
    }

    /// The finished string.
    fn finish(self) -> PyString {
        match self.points {
            Some(points) => PyString(Repr::CodePoints(points)),
            None => PyString(Repr::Utf8(self.text)),
        }
    }
}

/// Literal tokens the C scanner recognises, with their values.
const LITERALS: [(&str, Value); 6] = [
    ("null", Value::Null),
    ("true", Value::Bool(true)),
    ("false", Value::Bool(false)),
    ("NaN", Value::Float(f64::NAN)),
    ("Infinity", Value::Float(f64::INFINITY)),
    ("-Infinity", Value::Float(f64::NEG_INFINITY)),
];

/// Cursor over decoded text; positions are byte offsets into `text`.
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    /// The byte at the cursor.
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips JSON whitespace: space, tab, newline, carriage return.
    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// A syntax error at byte offset `at`.
    fn error(&self, message: &'static str, at: usize) -> LoadError {
        syntax_error(self.text, message, at)
    }

    /// Reads one value starting exactly at the cursor, iteratively.
    fn value(&mut self) -> Result<Value, LoadError> {
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            let Some(mut value) = self.open(&mut stack)? else {
                continue;
            };
            loop {
                let Some(mut frame) = stack.pop() else {
                    return Ok(value);
                };
                frame.push(value);
                if !self.after_member(&mut frame)? {
                    stack.push(frame);
                    break;
                }
                value = frame.into_value();
            }
        }
    }

    /// Reads a scalar or an empty container, or pushes a new open container and returns `None`.
    fn open(&mut self, stack: &mut Vec<Frame>) -> Result<Option<Value>, LoadError> {
        let (container, closer) = match self.peek() {
            Some(b'[') => ("array", b']'),
            Some(b'{') => ("object", b'}'),
            _ => return self.scalar().map(Some),
        };
        let depth = stack.len() + 1;
        if depth > MAX_DEPTH {
            return Err(LoadError::TooDeep { depth, container });
        }
        self.pos += 1;
        self.skip_whitespace();
        if self.peek() == Some(closer) {
            self.pos += 1;
            return Ok(Some(if closer == b']' {
                Value::Array(Vec::new())
            } else {
                Value::Object(Vec::new())
            }));
        }
        let frame = if closer == b']' {
            Frame::Array(Vec::new())
        } else {
            Frame::Object {
                members: Members::default(),
                key: self.key()?,
            }
        };
        stack.push(frame);
        Ok(None)
    }

    /// After a member: consumes the closer (returns true) or a comma and the next key (returns false).
    fn after_member(&mut self, frame: &mut Frame) -> Result<bool, LoadError> {
        self.skip_whitespace();
        if self.peek() == Some(frame.closer()) {
            self.pos += 1;
            return Ok(true);
        }
        if self.peek() != Some(b',') {
            return Err(self.error("Expecting ',' delimiter", self.pos));
        }
        self.pos += 1;
        self.skip_whitespace();
        if let Frame::Object { key, .. } = frame {
            *key = self.key()?;
        }
        Ok(false)
    }

    /// Reads an object key, the colon and the whitespace before the value.
    fn key(&mut self) -> Result<PyString, LoadError> {
        if self.peek() != Some(b'"') {
            return Err(self.error(
                "Expecting property name enclosed in double quotes",
                self.pos,
            ));
        }
        let key = self.string()?;
        self.skip_whitespace();
        if self.peek() != Some(b':') {
            return Err(self.error("Expecting ':' delimiter", self.pos));
        }
        self.pos += 1;
        self.skip_whitespace();
        Ok(key)
    }

    /// Reads a string, a literal or a number.
    fn scalar(&mut self) -> Result<Value, LoadError> {
        if self.peek() == Some(b'"') {
            return self.string().map(Value::Str);
        }
        let rest = &self.bytes[self.pos..];
        if let Some((word, value)) = LITERALS
            .iter()
            .find(|(word, _)| rest.starts_with(word.as_bytes()))
        {
            self.pos += word.len();
            return Ok(value.clone());
        }
        match self.number()? {
            Some(value) => Ok(value),
            None => Err(self.error("Expecting value", self.pos)),
        }
    }

    /// Reads `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`, backtracking like the C scanner.
    fn number(&mut self) -> Result<Option<Value>, LoadError> {
        let bytes = self.bytes;
        let start = self.pos;
        let mut end = start + usize::from(bytes.get(start) == Some(&b'-'));
        match bytes.get(end) {
            Some(b'0') => end += 1,
            Some(b'1'..=b'9') => end = skip_digits(bytes, end + 1),
            _ => return Ok(None),
        }
        let int_end = end;
        if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
            end = skip_digits(bytes, end + 2);
        }
        if matches!(bytes.get(end), Some(b'e' | b'E')) {
            let digits = end + 1 + usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
            let after = skip_digits(bytes, digits);
            if after > digits {
                end = after;
            }
        }
        self.pos = end;
        let literal = &self.text[start..end];
        if end == int_end {
            let digits = literal.trim_start_matches('-').len();
            if digits > MAX_INT_DIGITS {
                return Err(LoadError::IntTooLong { digits });
            }
            return Ok(Some(Value::Int(literal.to_owned())));
        }
        match literal.parse::<f64>() {
            Ok(x) => Ok(Some(Value::Float(x))),
            Err(_) => Err(self.error("Expecting value", start)),
        }
    }

    /// Reads a string starting at its opening quote.
    fn string(&mut self) -> Result<PyString, LoadError> {
        let begin = self.pos;
        let mut out = StrBuilder::default();
        let (mut chunk, mut i) = (begin + 1, begin + 1);
        loop {
            match self.bytes.get(i) {
                None => return Err(self.error("Unterminated string starting at", begin)),
                Some(b'"') => {
                    out.push_str(&self.text[chunk..i]);
                    self.pos = i + 1;
                    return Ok(out.finish());
                }
                Some(b'\\') => {
                    out.push_str(&self.text[chunk..i]);
                    i = self.escape(i, begin, &mut out)?;
                    chunk = i;
                }
                Some(&c) if c < 0x20 => return Err(self.error("Invalid control character at", i)),
                Some(_) => i += 1,
            }
        }
    }

    /// Decodes the escape whose backslash is at `at`; returns the offset just after it.
    fn escape(&self, at: usize, begin: usize, out: &mut StrBuilder) -> Result<usize, LoadError> {
        let c = match self.bytes.get(at + 1) {
            None => return Err(self.error("Unterminated string starting at", begin)),
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => return self.unicode_escape(at + 1, out),
            Some(_) => return Err(self.error("Invalid \\escape", at)),
        };
        out.push_code_point(u32::from(c));
        Ok(at + 2)
    }

    /// Decodes `\uXXXX` (the `u` is at `u`), joining a following low surrogate escape.
    fn unicode_escape(&self, u: usize, out: &mut StrBuilder) -> Result<usize, LoadError> {
        let end = u + 5;
        // The C scanner demands a character after the four digits before looking at them.
        let unit = match self.hex4(u + 1) {
            Some(unit) if end < self.bytes.len() => unit,
            _ => return Err(self.error("Invalid \\uXXXX escape", u)),
        };
        let is_high = (0xd800..0xdc00).contains(&unit);
        if is_high && self.bytes.get(end..end + 2) == Some(b"\\u") {
            if let Some(low) = self
                .hex4(end + 2)
                .filter(|low| (0xdc00..0xe000).contains(low))
            {
                out.push_code_point(0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00));
                return Ok(end + 6);
            }
        }
        out.push_code_point(unit);
        Ok(end)
    }

    /// The value of four hex digits (either case) at `at`, if they are there.
    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.bytes.get(at..at + 4)?;
        digits
            .iter()
            .try_fold(0, |acc, &d| Some(acc * 16 + char::from(d).to_digit(16)?))
    }
}

/// The offset of the first non-ASCII-digit byte at or after `from`.
fn skip_digits(bytes: &[u8], from: usize) -> usize {
    from + bytes.get(from..).map_or(0, |rest| {
        rest.iter().take_while(|b| b.is_ascii_digit()).count()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Value {
        match loads(text.as_bytes()) {
            Ok(value) => value,
            Err(err) => panic!("{text:?} rejected: {err}"),
        }
    }

    fn err(text: &str) -> LoadError {
        match loads(text.as_bytes()) {
            Ok(value) => panic!("{text:?} accepted as {value:?}"),
            Err(err) => err,
        }
    }

    fn syntax(text: &str) -> String {
        match err(text) {
            e @ LoadError::Syntax { .. } => e.to_string(),
            other => panic!("{text:?}: expected a syntax error, got {other:?}"),
        }
    }

    fn s(text: &str) -> Value {
        Value::Str(PyString::from(text))
    }

    fn int(digits: &str) -> Value {
        Value::Int(digits.to_owned())
    }

    #[test]
    fn literals_include_python_extensions() {
        assert_eq!(ok("null"), Value::Null);
        assert_eq!(ok("true"), Value::Bool(true));
        assert_eq!(ok(" false\n"), Value::Bool(false));
        assert!(matches!(ok("NaN"), Value::Float(x) if x.is_nan()));
        assert_eq!(ok("Infinity"), Value::Float(f64::INFINITY));
        assert_eq!(ok("-Infinity"), Value::Float(f64::NEG_INFINITY));
        for bad in [
            "nan",
            "-NaN",
            "+Infinity",
            "infinity",
            "nul",
            "True",
            "None",
            "tru e",
        ] {
            err(bad);
        }
    }

    #[test]
    fn numbers_follow_the_c_scanner() {
        assert_eq!(ok("0"), int("0"));
        assert_eq!(ok("-0"), int("-0"));
        assert_eq!(ok("-12"), int("-12"));
        assert_eq!(ok("1.5"), Value::Float(1.5));
        assert_eq!(ok("1E+2"), Value::Float(100.0));
        assert_eq!(ok("2e-1"), Value::Float(0.2));
        assert_eq!(ok("1e400"), Value::Float(f64::INFINITY));
        assert_eq!(ok("-1e400"), Value::Float(f64::NEG_INFINITY));
        assert_eq!(ok("1e-400"), Value::Float(0.0));
        assert_eq!(syntax("01"), "Extra data: line 1 column 2 (char 1)");
        assert_eq!(syntax("1."), "Extra data: line 1 column 2 (char 1)");
        assert_eq!(syntax("1e+"), "Extra data: line 1 column 2 (char 1)");
        assert_eq!(syntax("-"), "Expecting value: line 1 column 1 (char 0)");
        for bad in [
            "+1", ".5", "1.e5", "-.5", "0x10", "1_000", "\u{661}", "- 1", "[1.]",
        ] {
            err(bad);
        }
    }

    #[test]
    fn integer_digit_limit_matches_python() {
        let at_limit = "7".repeat(MAX_INT_DIGITS);
        assert_eq!(ok(&at_limit), int(&at_limit));
        assert_eq!(ok(&format!("-{at_limit}")), int(&format!("-{at_limit}")));
        let over = "7".repeat(MAX_INT_DIGITS + 1);
        assert_eq!(err(&over), LoadError::IntTooLong { digits: 4301 });
        assert_eq!(
            err(&format!("[-{over}]")),
            LoadError::IntTooLong { digits: 4301 }
        );
        assert!(matches!(ok(&format!("{over}.0")), Value::Float(x) if x.is_infinite()));
        assert!(matches!(ok(&format!("{over}e-4000")), Value::Float(x) if x > 0.0));
        assert!(err(&over)
            .to_string()
            .starts_with("Exceeds the limit (4300 digits)"));
    }

    #[test]
    fn strings_decode_escapes_and_keep_lone_surrogates() {
        assert_eq!(ok(r#""a\"\\\/\b\f\n\r\t""#), s("a\"\\/\u{8}\u{c}\n\r\t"));
        assert_eq!(ok(r#""\u00e9\u00C9""#), s("éÉ"));
        assert_eq!(ok(r#""\ud83d\ude00""#), s("😀"));
        assert_eq!(ok(r#""\uD83D\uDE00x""#), s("😀x"));
        let lone = ok(r#""\ud800""#);
        let Value::Str(lone) = lone else {
            panic!("not a string")
        };
        assert_eq!(lone.code_points(), vec![0xd800]);
        assert!(lone.has_lone_surrogates() && lone.as_str().is_none());
        let Value::Str(mixed) = ok(r#""a\udc00\ud800\ud800\udc00""#) else {
            panic!("not a string")
        };
        assert_eq!(mixed.code_points(), vec![0x61, 0xdc00, 0xd800, 0x10000]);
        assert_eq!(ok("\"\u{7f}\u{85}é\""), s("\u{7f}\u{85}é"));
        assert_eq!(ok(r#""\u0000""#), s("\0"));
    }

    #[test]
    fn string_errors_match_python() {
        assert_eq!(
            syntax("\"a\nb\""),
            "Invalid control character at: line 1 column 3 (char 2)"
        );
        assert_eq!(
            syntax("\"\t\""),
            "Invalid control character at: line 1 column 2 (char 1)"
        );
        assert_eq!(
            syntax("\"\0\""),
            "Invalid control character at: line 1 column 2 (char 1)"
        );
        assert_eq!(
            syntax(r#""\x""#),
            "Invalid \\escape: line 1 column 2 (char 1)"
        );
        assert_eq!(
            syntax(r#""\U0041""#),
            "Invalid \\escape: line 1 column 2 (char 1)"
        );
        assert_eq!(
            syntax(r#""\u12""#),
            "Invalid \\uXXXX escape: line 1 column 3 (char 2)"
        );
        assert_eq!(
            syntax(r#""\ud800\u12""#),
            "Invalid \\uXXXX escape: line 1 column 9 (char 8)"
        );
        assert_eq!(
            syntax(r#""\u0041"#),
            "Invalid \\uXXXX escape: line 1 column 3 (char 2)"
        );
        assert_eq!(
            syntax(r#"["abc"#),
            "Unterminated string starting at: line 1 column 2 (char 1)"
        );
        assert_eq!(
            syntax(r#""\"#),
            "Unterminated string starting at: line 1 column 1 (char 0)"
        );
    }

    #[test]
    fn structure_rules() {
        assert_eq!(
            ok(" [1, [], {}] "),
            Value::Array(vec![int("1"), Value::Array(vec![]), Value::Object(vec![])])
        );
        assert_eq!(
            ok("\t{ \"a\" :\r\n1 }\n"),
            Value::Object(vec![(PyString::from("a"), int("1"))])
        );
        assert_eq!(syntax(""), "Expecting value: line 1 column 1 (char 0)");
        assert_eq!(syntax(" \n "), "Expecting value: line 2 column 2 (char 3)");
        assert_eq!(syntax("[1,]"), "Expecting value: line 1 column 4 (char 3)");
        assert_eq!(
            syntax(r#"{"a":1,}"#),
            "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)"
        );
        assert_eq!(
            syntax("{1:2}"),
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        );
        assert_eq!(
            syntax(r#"{"a" 1}"#),
            "Expecting ':' delimiter: line 1 column 6 (char 5)"
        );
        assert_eq!(
            syntax("[1 2]"),
            "Expecting ',' delimiter: line 1 column 4 (char 3)"
        );
        assert_eq!(syntax("1 2"), "Extra data: line 1 column 3 (char 2)");
        assert_eq!(syntax("é 2"), "Expecting value: line 1 column 1 (char 0)");
        assert_eq!(
            syntax("[\"é\" 2]"),
            "Expecting ',' delimiter: line 1 column 6 (char 5)"
        );
        for bad in [
            "[", "{", "]", "[}", "{\"a\"}", "{\"a\":}", "[,1]", "{,}", "\u{a0}1", "\u{c}1",
            "1\u{b}",
        ] {
            err(bad);
        }
    }

    #[test]
    fn duplicate_keys_keep_first_position_and_last_value() {
        let value = ok(r#"{"a":1,"b":2,"a":3,"c":4,"b":5}"#);
        let expected = vec![("a", int("3")), ("b", int("5")), ("c", int("4"))];
        let expected: Vec<_> = expected
            .into_iter()
            .map(|(k, v)| (PyString::from(k), v))
            .collect();
        assert_eq!(value, Value::Object(expected));
        assert_eq!(value.get("a"), Some(&int("3")));
        assert_eq!(value.get("z"), None);
        let escaped = ok(r#"{"\u0061":1,"a":2}"#);
        assert_eq!(escaped.py_repr(), "{'a': 2}");
    }

    #[test]
    fn byte_order_mark_and_encoding_errors() {
        assert_eq!(
            syntax("\u{feff}{}"),
            "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)"
        );
        assert_eq!(
            syntax(" \u{feff}{}"),
            "Expecting value: line 1 column 2 (char 1)"
        );
        assert_eq!(ok("\"\u{feff}\""), s("\u{feff}"));
        let cases: [(&[u8], &str); 8] = [
            (
                b"\xff",
                "can't decode byte 0xff in position 0: invalid start byte",
            ),
            (
                b"\"\xc0\x80\"",
                "can't decode byte 0xc0 in position 1: invalid start byte",
            ),
            (
                b"\xe0\x80\x80",
                "can't decode byte 0xe0 in position 0: invalid continuation byte",
            ),
            (
                b"\xe2\x82(",
                "can't decode bytes in position 0-1: invalid continuation byte",
            ),
            (
                b"\xed\xa0\x80",
                "can't decode byte 0xed in position 0: invalid continuation byte",
            ),
            (
                b"\xf4\x90\x80\x80",
                "can't decode byte 0xf4 in position 0: invalid continuation byte",
            ),
            (
                b"ab\xf0\x90\x80",
                "can't decode bytes in position 2-4: unexpected end of data",
            ),
            (
                b"\xc2",
                "can't decode byte 0xc2 in position 0: unexpected end of data",
            ),
        ];
        for (bytes, message) in cases {
            let error = loads(bytes).err();
            assert!(
                matches!(&error, Some(LoadError::NotUtf8 { .. })),
                "{bytes:?}: {error:?}"
            );
            assert_eq!(
                error.map(|e| e.to_string()),
                Some(format!("'utf-8' codec {message}"))
            );
        }
    }

    #[test]
    fn depth_limit_is_exact_and_never_overflows() {
        let arrays = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let objects = |n: usize| format!("{}0{}", "{\"a\":".repeat(n), "}".repeat(n));
        ok(&arrays(MAX_DEPTH));
        ok(&objects(MAX_DEPTH));
        assert_eq!(
            err(&arrays(MAX_DEPTH + 1)),
            LoadError::TooDeep {
                depth: 990,
                container: "array"
            }
        );
        assert_eq!(
            err(&objects(MAX_DEPTH + 1)),
            LoadError::TooDeep {
                depth: 990,
                container: "object"
            }
        );
        assert_eq!(
            err(&"[".repeat(1_000_000)),
            LoadError::TooDeep {
                depth: 990,
                container: "array"
            }
        );
        let manifest = |inner: &str| {
            format!(r#"{{"name":"compound-engineering","version":"1.0.0","x":{inner}}}"#)
        };
        assert_eq!(
            check_plugin_manifest(manifest(&arrays(MAX_DEPTH - 1)).as_bytes(), "1.0.0"),
            Ok(())
        );
        let too_deep = check_plugin_manifest(manifest(&arrays(MAX_DEPTH)).as_bytes(), "1.0.0");
        let problem = too_deep.err();
        assert_eq!(
            problem.as_ref().map(ManifestProblem::reference_kind),
            Some("RecursionError")
        );
    }

    #[test]
    fn repr_matches_python() {
        assert_eq!(ok("null").py_repr(), "None");
        assert_eq!(
            ok("[true, false, -0, 12]").py_repr(),
            "[True, False, 0, 12]"
        );
        let floats = "[1.5, 1e100, 1e16, 1e15, 0.0001, 0.00001, -0.0, 1e400, -1e400, NaN, 123456789012345678.0, 1.5e-7, 5e-324, 2.0]";
        assert_eq!(
            ok(floats).py_repr(),
            "[1.5, 1e+100, 1e+16, 1000000000000000.0, 0.0001, 1e-05, -0.0, inf, -inf, nan, \
             1.2345678901234568e+17, 1.5e-07, 5e-324, 2.0]"
        );
        assert_eq!(ok(r#""it's""#).py_repr(), r#""it's""#);
        assert_eq!(ok(r#""it's \"q\"""#).py_repr(), r#"'it\'s "q"'"#);
        assert_eq!(
            ok(r#""\\\n\r\t\u0001\u007f\u0085\u00a0é\ud800😀""#).py_repr(),
            r"'\\\n\r\t\x01\x7f\x85\xa0é\ud800😀'"
        );
        assert_eq!(
            ok(r#""\u2028\u200b\ue000\u0301\ufffe""#).py_repr(),
            r"'\u2028\u200b\ue000́\ufffe'"
        );
        assert_eq!(
            ok(r#"{"a": [1, {"b": null}]}"#).py_repr(),
            "{'a': [1, {'b': None}]}"
        );
    }

    #[test]
    fn manifest_check_reproduces_the_reference() {
        let check = |text: &str| check_plugin_manifest(text.as_bytes(), "1.0.0");
        assert_eq!(
            check(r#"{"name":"compound-engineering","version":"1.0.0"}"#),
            Ok(())
        );
        assert_eq!(
            check(r#"{"version":"1.0.0","name":"x","name":"compound-engineering"}"#),
            Ok(())
        );
        for not_ce in [
            r#"[]"#,
            r#""compound-engineering""#,
            r#"{"version":"1.0.0"}"#,
            r#"{"name":"compound-engineering\ud800"}"#,
        ] {
            assert_eq!(
                check(not_ce),
                Err(ManifestProblem::NotCompoundEngineering),
                "{not_ce}"
            );
        }
        let mismatch = |got: &str| {
            Err(ManifestProblem::VersionMismatch {
                expected: "1.0.0".into(),
                got: got.into(),
            })
        };
        assert_eq!(
            check(r#"{"name":"compound-engineering"}"#),
            mismatch("None")
        );
        assert_eq!(
            check(r#"{"name":"compound-engineering","version":null}"#),
            mismatch("None")
        );
        assert_eq!(
            check(r#"{"name":"compound-engineering","version":1.0}"#),
            mismatch("1.0")
        );
        assert_eq!(
            check(r#"{"name":"compound-engineering","version":"1.0.0 "}"#),
            mismatch("'1.0.0 '")
        );
        let problem = check(r#"{"name":"compound-engineering","version":["1.0.0"]}"#).err();
        assert_eq!(
            problem.map(|p| p.to_string()),
            Some(
                "Compound Engineering plugin version mismatch: expected 1.0.0, got ['1.0.0']"
                    .to_owned()
            )
        );
        let invalid = check("{\r\n\"name\" 1}").err();
        assert_eq!(
            invalid.as_ref().map(ToString::to_string),
            Some("Compound Engineering plugin manifest is invalid: Expecting ':' delimiter: line 2 column 8 (char 9)".to_owned())
        );
        assert_eq!(
            invalid.as_ref().map(ManifestProblem::reference_kind),
            Some("SandboxError")
        );
        let long = check(&format!(
            r#"{{"name":"compound-engineering","v":{}}}"#,
            "1".repeat(4301)
        ))
        .err();
        assert_eq!(
            long.as_ref().map(ManifestProblem::reference_kind),
            Some("ValueError")
        );
        assert!(long.is_some_and(|p| p.reference_message().starts_with("Exceeds the limit")));
    }

    /// Steele, Lea and Flood's SplitMix64: a tiny seeded PRNG for the differential test.
    struct SplitMix64(u64);

    impl SplitMix64 {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn chance(&mut self, percent: usize) -> bool {
            self.below(100) < percent
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const STRING_PIECES: &[&str] = &[
        "a",
        "compound-engineering",
        "1.0.0",
        "name",
        "version",
        " ",
        "'",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u0041",
        "\\u00e9",
        "\\u0000",
        "\\u001f",
        "\\u007f",
        "\\u0085",
        "\\u00a0",
        "\\ud800",
        "\\udc00",
        "\\ud83d\\ude00",
        "\\uD83D\\uDE00",
        "\\ud800\\u0041",
        "é",
        "中",
        "😀",
        "\u{a0}",
        "\u{2028}",
        "\u{301}",
        "\u{7f}",
        "\u{85}",
        "\u{feff}",
        "\u{ad}",
        "\u{200b}",
        "\u{e000}",
    ];

    const NUMBERS: &[&str] = &[
        "0",
        "-0",
        "1",
        "-1",
        "10",
        "123456789012345678901234567890",
        "1.5",
        "-0.0",
        "1e5",
        "1E+5",
        "2e-3",
        "-2.5E-3",
        "1e400",
        "-1e400",
        "1e-400",
        "0.1",
        "1e16",
        "1e15",
        "0.00001",
        "5e-324",
        "1.0",
        "100.0",
        "NaN",
        "Infinity",
        "-Infinity",
    ];

    const WHITESPACE: &[&str] = &["", "", "", "", " ", "\n", "\t", "\r\n", "\r", "  "];

    fn gen_string(rng: &mut SplitMix64) -> String {
        let mut text = String::from("\"");
        for _ in 0..rng.below(4) {
            text.push_str(rng.pick(STRING_PIECES));
        }
        text.push('"');
        text
    }

    fn gen_number(rng: &mut SplitMix64) -> String {
        if rng.chance(3) {
            let sign = if rng.chance(50) { "-" } else { "" };
            return format!("{sign}9{}", "0".repeat(4298 + rng.below(3)));
        }
        rng.pick(NUMBERS).to_owned()
    }

    fn gen_value(rng: &mut SplitMix64, depth: usize) -> String {
        let ws = |rng: &mut SplitMix64| rng.pick(WHITESPACE);
        match rng.below(if depth > 3 { 5 } else { 7 }) {
            0 => rng.pick(&["null", "true", "false"]).to_owned(),
            1 | 2 => gen_number(rng),
            3 | 4 => gen_string(rng),
            5 => {
                let items: Vec<String> = (0..rng.below(4))
                    .map(|_| gen_value(rng, depth + 1))
                    .collect();
                format!(
                    "[{}{}]",
                    items.join(&format!("{},{}", ws(rng), ws(rng))),
                    ws(rng)
                )
            }
            _ => {
                let members: Vec<String> = (0..rng.below(4))
                    .map(|_| {
                        format!(
                            "{}{}:{}{}",
                            gen_string(rng),
                            ws(rng),
                            ws(rng),
                            gen_value(rng, depth + 1)
                        )
                    })
                    .collect();
                format!("{{{}{}}}", members.join(","), ws(rng))
            }
        }
    }

    fn gen_manifest(rng: &mut SplitMix64) -> String {
        let names = [
            "\"compound-engineering\"",
            "\"compound-engineering \"",
            "\"Compound-Engineering\"",
            "null",
            "1",
        ];
        let versions = [
            "\"1.0.0\"",
            "\"1.0.1\"",
            "\"1.0.0\\n\"",
            "\"v1.0.0\"",
            "1.0",
            "null",
            "[\"1.0.0\"]",
            "\"1.0.\\u0030\"",
        ];
        let mut members = Vec::new();
        for _ in 0..1 + rng.below(5) {
            let member = match rng.below(5) {
                0 | 1 => format!(
                    "\"name\":{}",
                    if rng.chance(70) {
                        names[0]
                    } else {
                        rng.pick(&names)
                    }
                ),
                2 | 3 => format!(
                    "\"version\":{}",
                    if rng.chance(60) {
                        versions[0]
                    } else {
                        rng.pick(&versions)
                    }
                ),
                _ => format!("{}:{}", gen_string(rng), gen_value(rng, 1)),
            };
            members.push(member);
        }
        if rng.chance(40) {
            members.push(format!("\"version\":{}", gen_value(rng, 2)));
        }
        let sep = format!("{},{}", rng.pick(WHITESPACE), rng.pick(WHITESPACE));
        format!(
            "{}{{{}}}{}",
            rng.pick(WHITESPACE),
            members.join(&sep),
            rng.pick(WHITESPACE)
        )
    }

    const MUTATION_BYTES: &[u8] = b"{}[]\",:\\ -+.0123456789eEnultrfaseNIy/bu\t\n\r\x00\x1f\x7f\xc3\xa9\xff\xed\xa0\x80\xef\xbb\xbf'";
    const MUTATION_TOKENS: &[&str] = &[
        "\\u",
        "\\ud800",
        "\\udc00",
        "NaN",
        "-Infinity",
        "null",
        "\"\"",
        "1e400",
        "\\",
        "}",
        "]",
    ];

    fn mutate(rng: &mut SplitMix64, mut doc: Vec<u8>) -> Vec<u8> {
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(doc.len() + 1);
            let byte = MUTATION_BYTES[rng.below(MUTATION_BYTES.len())];
            match rng.below(4) {
                0 => doc.insert(at, byte),
                1 if at < doc.len() => {
                    doc.remove(at);
                }
                2 if at < doc.len() => doc[at] = byte,
                _ => {
                    let token = rng.pick(MUTATION_TOKENS).as_bytes();
                    doc.splice(at..at, token.iter().copied());
                }
            }
        }
        doc
    }

    fn gen_case(rng: &mut SplitMix64) -> Vec<u8> {
        match rng.below(10) {
            0..=4 => {
                let doc = gen_manifest(rng).into_bytes();
                mutate(rng, doc)
            }
            5 | 6 => gen_manifest(rng).into_bytes(),
            7 => gen_value(rng, 0).into_bytes(),
            8 => {
                let doc = gen_value(rng, 0).into_bytes();
                mutate(rng, doc)
            }
            _ => (0..rng.below(8))
                .map(|_| MUTATION_BYTES[rng.below(MUTATION_BYTES.len())])
                .collect(),
        }
    }

    const PYTHON_JUDGE: &str = r#"
import sys, json
out = []
for line in sys.stdin.read().split("\n")[:-1]:
    raw = bytes.fromhex(line[1:])
    try:
        obj = json.loads(raw.decode("utf-8"))
    except Exception as exc:
        out.append("ERR " + json.dumps([type(exc).__name__, str(exc)]))
        continue
    isdict = isinstance(obj, dict)
    name = obj.get("name") if isdict else None
    version = obj.get("version") if isdict else None
    if not isdict or name != "compound-engineering":
        verdict = "notce"
    elif version != "1.0.0":
        verdict = "mismatch " + repr(version)
    else:
        verdict = "ok"
    out.append("OK " + json.dumps({"isdict": isdict, "name": name, "version": version, "verdict": verdict}))
sys.stdout.write("".join(o + "\n" for o in out))
"#;

    /// Runs every case through one `python3` process; `None` when python3 is unavailable.
    fn python_verdicts(cases: &[Vec<u8>]) -> Option<Vec<String>> {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut child = Command::new("python3")
            .args(["-c", PYTHON_JUDGE])
            .env("PYTHONIOENCODING", "utf-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let mut input = String::new();
        for case in cases {
            input.push('x');
            input.extend(case.iter().map(|b| format!("{b:02x}")));
            input.push('\n');
        }
        let mut stdin = child.stdin.take()?;
        stdin.write_all(input.as_bytes()).ok()?;
        drop(stdin);
        let output = child.wait_with_output().ok()?;
        assert!(output.status.success(), "python3 judge failed");
        let text = String::from_utf8(output.stdout).expect("judge output is UTF-8");
        Some(text.lines().map(str::to_owned).collect())
    }

    fn python_kind(err: &LoadError) -> &'static str {
        match err {
            LoadError::NotUtf8 { .. } => "UnicodeDecodeError",
            LoadError::Syntax { .. } => "JSONDecodeError",
            LoadError::IntTooLong { .. } => "ValueError",
            LoadError::TooDeep { .. } => "RecursionError",
        }
    }

    fn manifest_verdict(bytes: &[u8]) -> String {
        match check_plugin_manifest(bytes, "1.0.0") {
            Ok(()) => "ok".to_owned(),
            Err(ManifestProblem::NotCompoundEngineering) => "notce".to_owned(),
            Err(ManifestProblem::VersionMismatch { got, .. }) => format!("mismatch {got}"),
            Err(ManifestProblem::Invalid(e)) => format!("invalid {e}"),
        }
    }

    /// Compares one case with Python's answer; returns a description of any disagreement.
    fn compare(case: &[u8], python: &str) -> Option<String> {
        let mine = loads(case);
        if let Some(answer) = python.strip_prefix("ERR ") {
            let Ok(Value::Array(answer)) = loads(answer.as_bytes()) else {
                return Some(format!("bad judge line {python}"));
            };
            let [Value::Str(kind), Value::Str(message)] = answer.as_slice() else {
                return Some(format!("bad judge line {python}"));
            };
            return match &mine {
                Ok(value) => Some(format!(
                    "python rejected ({python}), we accepted {}",
                    value.py_repr()
                )),
                Err(e) if kind.eq_str(python_kind(e)) && message.eq_str(&e.to_string()) => None,
                Err(e) => Some(format!(
                    "python said {python}, we said {} {e}",
                    python_kind(e)
                )),
            };
        }
        let Some(answer) = python
            .strip_prefix("OK ")
            .and_then(|a| loads(a.as_bytes()).ok())
        else {
            return Some(format!("bad judge line {python}"));
        };
        let value = match mine {
            Ok(value) => value,
            Err(e) => return Some(format!("python accepted, we rejected: {e}")),
        };
        let field = |v: &Value, k: &str| v.get(k).map_or_else(|| "None".to_owned(), Value::py_repr);
        let ours = format!(
            "{} {} {}",
            matches!(value, Value::Object(_)),
            field(&value, "name"),
            field(&value, "version")
        );
        let isdict = matches!(answer.get("isdict"), Some(Value::Bool(true)));
        let theirs = format!(
            "{isdict} {} {}",
            field(&answer, "name"),
            field(&answer, "version")
        );
        let verdict = answer
            .get("verdict")
            .map(Value::py_repr)
            .unwrap_or_default();
        let our_verdict = PyString::from(manifest_verdict(case).as_str()).py_repr();
        if ours != theirs || verdict != our_verdict {
            return Some(format!(
                "python {theirs} / {verdict}, we {ours} / {our_verdict}"
            ));
        }
        None
    }

    #[test]
    fn differential_against_python() {
        let seed = std::env::var("PYJSON_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed_2024_u64);
        let mut rng = SplitMix64(seed);
        let mut cases: Vec<Vec<u8>> = [
            "",
            " ",
            "\u{feff}{}",
            "{\"a\":1}\u{0}",
            "[1,]",
            "\"\\ud800\"",
            "-",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        cases.extend((0..4000).map(|_| gen_case(&mut rng)));
        let Some(answers) = python_verdicts(&cases) else {
            eprintln!("skipping differential_against_python: python3 is not available");
            return;
        };
        assert_eq!(
            answers.len(),
            cases.len(),
            "seed {seed}: judge answered {} of {} cases",
            answers.len(),
            cases.len()
        );
        let failures: Vec<String> = cases
            .iter()
            .zip(&answers)
            .enumerate()
            .filter_map(|(i, (case, answer))| {
                compare(case, answer)
                    .map(|why| format!("case {i} {:?}: {why}", String::from_utf8_lossy(case)))
            })
            .collect();
        let accepted = answers.iter().filter(|a| a.starts_with("OK ")).count();
        eprintln!(
            "differential: seed {seed}, {} cases, {accepted} accepted by python",
            cases.len()
        );
        assert!(
            failures.is_empty(),
            "seed {seed}: {} disagreements:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    /// Runs the reference oracle on a minimal plugin tree with `manifest`; `None` when it cannot run.
    fn oracle_verdict(oracle: &std::path::Path, manifest: &str) -> Option<(bool, String)> {
        let dir = tempfile::tempdir().ok()?;
        std::fs::create_dir_all(dir.path().join(".claude-plugin")).ok()?;
        std::fs::write(dir.path().join(".claude-plugin/plugin.json"), manifest).ok()?;
        for skill in ["ce-plan", "ce-work", "ce-code-review"] {
            let skill_dir = dir.path().join("skills").join(skill);
            std::fs::create_dir_all(&skill_dir).ok()?;
            std::fs::write(skill_dir.join("SKILL.md"), "x\n").ok()?;
        }
        let output = std::process::Command::new("python3")
            .arg(oracle)
            .args([
                "snapshot",
                &dir.path().to_string_lossy(),
                "--version",
                "1.0.0",
            ])
            .output()
            .ok()?;
        let report = loads(&output.stdout).ok()?;
        let accepted = matches!(report.get("ok"), Some(Value::Bool(true)));
        let kind = report
            .get("error_kind")
            .map(Value::py_repr)
            .unwrap_or_default();
        Some((accepted, kind))
    }

    #[test]
    fn oracle_agrees_on_the_depth_threshold() {
        let oracle = std::env::var_os("CESTORE_ORACLE")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| "/work/shared/reference/oracle.py".into());
        if !oracle.is_file() {
            eprintln!(
                "skipping oracle_agrees_on_the_depth_threshold: {} not found",
                oracle.display()
            );
            return;
        }
        let arrays = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let objects = |n: usize| format!("{}0{}", "{\"a\":".repeat(n), "}".repeat(n));
        for (what, nest) in [
            ("array", &arrays as &dyn Fn(usize) -> String),
            ("object", &objects),
        ] {
            for inner in [MAX_DEPTH - 1, MAX_DEPTH] {
                let nested = nest(inner);
                let manifest =
                    format!(r#"{{"name":"compound-engineering","version":"1.0.0","x":{nested}}}"#);
                let Some((accepted, kind)) = oracle_verdict(&oracle, &manifest) else {
                    eprintln!("skipping oracle_agrees_on_the_depth_threshold: oracle did not run");
                    return;
                };
                let ours = check_plugin_manifest(manifest.as_bytes(), "1.0.0");
                assert_eq!(
                    accepted,
                    ours.is_ok(),
                    "{what} depth {}: oracle {kind}, we {ours:?}",
                    inner + 1
                );
                if let Err(problem) = ours {
                    assert_eq!(kind, format!("'{}'", problem.reference_kind()));
                }
            }
        }
    }
}
