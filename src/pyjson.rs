//! Python-compatible JSON loading: what `json.loads` accepts, refuses and builds.
//!
//! The reference implementation validates a profile's manifest file with
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
//! is iterative, so hostile nesting cannot overflow the Rust stack, and it
//! reads a text as a stream of [`Event`]s ([`walk`]): [`loads`] builds the
//! value from them, and a reader that wants a few fields of a large text
//! (`cestore audit`'s rows) takes them as they pass, holding nothing else.

use std::borrow::Cow;
use std::collections::HashMap;

/// Most digits CPython 3.11 converts in one integer literal (`sys.int_info.default_max_str_digits`).
pub const MAX_INT_DIGITS: usize = 4300;

/// Deepest container nesting the reference accepts in the CE profile's manifest file, counting its outer object itself.
///
/// CPython 3.11 charges one unit of its recursion budget per nested `[` or `{`
/// (`Py_EnterRecursiveCall` in `scan_once_unicode`); the budget is
/// `sys.getrecursionlimit()` = 1000 minus the Python frames already on the
/// stack, so the threshold depends on where `json.loads` is called from. It
/// was measured with the real reference: `python3
/// /work/shared/reference/oracle.py snapshot DIR --version 1.0.0` on the
/// CE profile's minimal tree (its manifest file and the three required
/// skills, `crate::profile::ce::fixtures`) whose manifest file is `{"name":"compound-engineering","version":"1.0.0","x":V}`,
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
    /// Containers nest deeper than Python's recursion limit allows
    /// ([`MAX_DEPTH`] for [`loads`]; Python's `RecursionError`).
    #[error(
        "maximum recursion depth exceeded while decoding a JSON {container} from a unicode string"
    )]
    TooDeep {
        /// Nesting depth of the container that was refused (one more than allowed).
        depth: usize,
        /// "array" or "object".
        container: &'static str,
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

/// One step of a JSON text read as a stream by [`walk`]: what `json.loads`
/// builds, in the order of the text, without building it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An object opens; each member follows as its [`Event::Key`] and then
    /// its value's events, and [`Event::End`] closes it.
    ObjectStart,
    /// An array opens; its items' events follow, and [`Event::End`] closes it.
    ArrayStart,
    /// The key of the next member of the innermost object open.
    Key(PyString),
    /// The innermost container open closes.
    End,
    /// A value that is no container: null, a boolean, a number or a string.
    Scalar(Value),
}

/// Reads `bytes` as `json.loads(bytes.decode("utf-8"))` does where Python's
/// recursion limit allows `max_depth` nested containers, handing each step
/// to `each` rather than building the value.
///
/// It accepts and refuses exactly what [`loads`] does at that depth (which
/// is built on it), and holds only the closers of the containers open and
/// one token at a time. Duplicate keys are handed on as they come: the one
/// Python keeps is the last.
///
/// # Errors
///
/// The [`LoadError`] Python raises; the events already handed on belong to
/// a text Python refuses.
pub fn walk(bytes: &[u8], max_depth: usize, mut each: impl FnMut(Event)) -> Result<(), LoadError> {
    walk_text(decode_utf8(bytes)?, max_depth, &mut each)
}

/// Decodes a file's `bytes` as `json.loads(path.read_text())` does.
///
/// `Path.read_text()` also translates `\r\n` and lone `\r` to `\n`; that
/// never changes what is accepted but does change the character positions
/// in error messages, so it is reproduced here.
///
/// # Errors
///
/// A [`LoadError`] whenever that Python expression raises, with Python's message.
pub fn loads_text_file(bytes: &[u8]) -> Result<Value, LoadError> {
    let text = decode_utf8(bytes)?;
    parse_text(&universal_newlines(text))
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

    /// The string as UTF-8, or itself back when it holds a lone surrogate.
    pub fn into_string(self) -> Result<String, PyString> {
        match self.0 {
            Repr::Utf8(text) => Ok(text),
            points @ Repr::CodePoints(_) => Err(PyString(points)),
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

/// `json.loads` on already decoded text, as the reference calls it
/// ([`MAX_DEPTH`]).
fn parse_text(text: &str) -> Result<Value, LoadError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new(text, MAX_DEPTH);
    parser.document(&mut |event| builder.event(event))?;
    builder
        .done
        .ok_or_else(|| parser.error("Expecting value", 0))
}

/// `json.loads` on already decoded text, each step handed to `each`.
fn walk_text(text: &str, max_depth: usize, each: &mut dyn FnMut(Event)) -> Result<(), LoadError> {
    Parser::new(text, max_depth).document(each)
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

/// A container being filled while a [`Builder`] reads its members.
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

    /// The finished container as a value.
    fn into_value(self) -> Value {
        match self {
            Frame::Array(items) => Value::Array(items),
            Frame::Object { members, .. } => Value::Object(members.entries),
        }
    }
}

/// Builds the value a stream of [`Event`]s describes, as `json.loads` does.
#[derive(Default)]
struct Builder {
    /// The containers open, innermost last.
    open: Vec<Frame>,
    /// The whole value, once its last event came.
    done: Option<Value>,
}

impl Builder {
    /// Takes one event.
    fn event(&mut self, event: Event) {
        match event {
            Event::ObjectStart => self.open.push(Frame::Object {
                members: Members::default(),
                key: PyString::from(""),
            }),
            Event::ArrayStart => self.open.push(Frame::Array(Vec::new())),
            Event::Key(k) => {
                if let Some(Frame::Object { key, .. }) = self.open.last_mut() {
                    *key = k;
                }
            }
            Event::End => {
                if let Some(frame) = self.open.pop() {
                    self.add(frame.into_value());
                }
            }
            Event::Scalar(value) => self.add(value),
        }
    }

    /// Adds a finished value to the innermost container, or ends the document.
    fn add(&mut self, value: Value) {
        match self.open.last_mut() {
            Some(frame) => frame.push(value),
            None => self.done = Some(value),
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
    /// The deepest nesting of containers read; deeper is [`LoadError::TooDeep`].
    max_depth: usize,
}

impl<'a> Parser<'a> {
    /// A parser at the start of `text`.
    fn new(text: &'a str, max_depth: usize) -> Parser<'a> {
        Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            max_depth,
        }
    }

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

    /// The whole text: one value, with whitespace around it.
    fn document(&mut self, each: &mut dyn FnMut(Event)) -> Result<(), LoadError> {
        if self.text.starts_with('\u{feff}') {
            return Err(self.error("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0));
        }
        self.skip_whitespace();
        self.value(each)?;
        self.skip_whitespace();
        if self.pos != self.bytes.len() {
            return Err(self.error("Extra data", self.pos));
        }
        Ok(())
    }

    /// Reads one value starting exactly at the cursor, iteratively: the
    /// closers of the containers open are its only stack.
    fn value(&mut self, each: &mut dyn FnMut(Event)) -> Result<(), LoadError> {
        let mut open: Vec<u8> = Vec::new();
        loop {
            if self.open(&mut open, each)? {
                continue;
            }
            // A value is complete: close the containers that end after it,
            // or go on to the next member of the innermost one.
            loop {
                let Some(&closer) = open.last() else {
                    return Ok(());
                };
                if !self.after_member(closer, each)? {
                    break;
                }
                open.pop();
                each(Event::End);
            }
        }
    }

    /// Reads a scalar or an empty container (returns false), or opens a
    /// container, reading its first key when it is an object (returns true).
    fn open(&mut self, open: &mut Vec<u8>, each: &mut dyn FnMut(Event)) -> Result<bool, LoadError> {
        let (container, closer, start) = match self.peek() {
            Some(b'[') => ("array", b']', Event::ArrayStart),
            Some(b'{') => ("object", b'}', Event::ObjectStart),
            _ => {
                each(Event::Scalar(self.scalar()?));
                return Ok(false);
            }
        };
        let depth = open.len() + 1;
        if depth > self.max_depth {
            return Err(LoadError::TooDeep { depth, container });
        }
        self.pos += 1;
        self.skip_whitespace();
        each(start);
        if self.peek() == Some(closer) {
            self.pos += 1;
            each(Event::End);
            return Ok(false);
        }
        if closer == b'}' {
            each(Event::Key(self.key()?));
        }
        open.push(closer);
        Ok(true)
    }

    /// After a member of the container `closer` closes: consumes the closer
    /// (returns true) or a comma and the next key (returns false).
    fn after_member(&mut self, closer: u8, each: &mut dyn FnMut(Event)) -> Result<bool, LoadError> {
        self.skip_whitespace();
        if self.peek() == Some(closer) {
            self.pos += 1;
            return Ok(true);
        }
        if self.peek() != Some(b',') {
            return Err(self.error("Expecting ',' delimiter", self.pos));
        }
        self.pos += 1;
        self.skip_whitespace();
        if closer == b'}' {
            each(Event::Key(self.key()?));
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
        // The C scanner joins a pair only when a character follows it
        // (`end + 6 < len`); otherwise the second escape is read alone and,
        // at the end of the text, refused.
        if is_high && end + 6 < self.bytes.len() && self.bytes.get(end..end + 2) == Some(b"\\u") {
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

/// Appends `s` to `out` as a JSON string literal, escaped as Python's
/// `json.dumps(..., ensure_ascii=True)` does.
///
/// `"` and `\` get a backslash; `\n`, `\r`, `\t`, `\b` and `\f` their short
/// escapes; every other character outside 0x20..=0x7E (0x7F included) becomes
/// `\uXXXX` in lowercase hex, as a UTF-16 surrogate pair above U+FFFF.
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    write_json_string_body(out, s);
    out.push(b'"');
}

/// The inside of [`write_json_string`]'s literal: `s` escaped, without the
/// quotes around it.
pub fn write_json_string_body(out: &mut Vec<u8>, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            ' '..='~' => out.push(c as u8),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    push_u_escape(out, *unit);
                }
            }
        }
    }
}

/// Appends one UTF-16 code unit as `\uXXXX`, lowercase, as Python writes it
/// (a lone surrogate too).
pub fn push_u_escape(out: &mut Vec<u8>, unit: u16) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[usize::from((unit >> shift) & 0xf)]);
    }
}

#[cfg(test)]
pub(crate) mod tests;
