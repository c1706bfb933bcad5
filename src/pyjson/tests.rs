//! Unit tests of the Python `json.loads` dialect.

use super::*;
use crate::profile::ce::plugin_manifest::{check_plugin_manifest, ManifestProblem};

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
    const CONTROL: &str = "Invalid control character at";
    const ESCAPE: &str = "Invalid \\escape";
    const UXXXX: &str = "Invalid \\uXXXX escape";
    const UNTERMINATED: &str = "Unterminated string starting at";
    // The text, the error's kind and its column on line 1. A pair of escapes
    // at the very end is no pair: the second is read alone, and wants a
    // character after it.
    for (text, kind, column) in [
        ("\"a\nb\"", CONTROL, 3),
        ("\"\t\"", CONTROL, 2),
        ("\"\0\"", CONTROL, 2),
        (r#""\x""#, ESCAPE, 2),
        (r#""\U0041""#, ESCAPE, 2),
        (r#""\u12""#, UXXXX, 3),
        (r#""\ud800\u12""#, UXXXX, 9),
        (r#""\u0041"#, UXXXX, 3),
        (r#""\ud83d\ude00"#, UXXXX, 9),
        (r#"["\ud83d\ude00"#, UXXXX, 10),
        (r#"["abc"#, UNTERMINATED, 2),
        (r#""\"#, UNTERMINATED, 1),
    ] {
        let want = format!("{kind}: line 1 column {column} (char {})", column - 1);
        assert_eq!(syntax(text), want, "{text:?}");
    }
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
        "[", "{", "]", "[}", "{\"a\"}", "{\"a\":}", "[,1]", "{,}", "\u{a0}1", "\u{c}1", "1\u{b}",
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
    let manifest =
        |inner: &str| format!(r#"{{"name":"compound-engineering","version":"1.0.0","x":{inner}}}"#);
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
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// The first of `items` `percent` times in a hundred, else any of them.
    fn mostly_first<'a>(&mut self, percent: usize, items: &[&'a str]) -> &'a str {
        if self.chance(percent) {
            items[0]
        } else {
            self.pick(items)
        }
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
            0 | 1 => format!("\"name\":{}", rng.mostly_first(70, &names)),
            2 | 3 => format!("\"version\":{}", rng.mostly_first(60, &versions)),
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

fn mutate(rng: &mut SplitMix64, doc: Vec<u8>) -> Vec<u8> {
    mutate_with(rng, doc, MUTATION_BYTES, MUTATION_TOKENS)
}

/// One to three mutations of `doc`: a byte of `bytes` inserted or put in
/// place of one, a byte removed, or a token of `tokens` inserted.
pub(crate) fn mutate_with(
    rng: &mut SplitMix64,
    mut doc: Vec<u8>,
    bytes: &[u8],
    tokens: &[&str],
) -> Vec<u8> {
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(doc.len() + 1);
        let byte = bytes[rng.below(bytes.len())];
        match rng.below(4) {
            0 => doc.insert(at, byte),
            1 if at < doc.len() => {
                doc.remove(at);
            }
            2 if at < doc.len() => doc[at] = byte,
            _ => {
                let token = rng.pick(tokens).as_bytes();
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
    crate::profile::ce::fixtures::minimal(dir.path(), manifest, "x\n").ok()?;
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
