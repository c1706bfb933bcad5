//! The audit's tests.

use super::*;
use crate::digest::ManifestDigest;
use std::io;

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

/// The tree digest fields are read beside the three, each into its own
/// slot; a field named as one of the three (or under one) is that field's
/// only, as before, and is no misuse.
#[test]
fn tree_fields_are_read_unless_one_of_the_three_claims_their_key() {
    let line = r#"{"arm":"a","task_asset_manifest_digest":"t","sandbox_dependency_content_digest":{"x":"c"}}"#;
    let node = Node::of(&Fields::default()).unwrap();
    let vals = parse_row(line.as_bytes(), &node).unwrap();
    assert_eq!(vals[3 + 1].as_str(), Some("t"));
    assert!(matches!(vals[3 + 3], Val::Other("an object")));
    assert!(matches!(vals[3], Val::Absent));
    // Read by Python's grammar (a NaN), the same.
    let nan = line.replacen('{', r#"{"n":NaN,"#, 1);
    let vals = parse_row(nan.as_bytes(), &node).unwrap();
    assert_eq!(vals[3 + 1].as_str(), Some("t"));
    assert!(matches!(vals[3 + 3], Val::Other("an object")));
    for f in [
        fields("task_asset_manifest_digest", "v", "arm"),
        fields("sandbox_dependency_content_digest.x", "v", "arm"),
    ] {
        let node = Node::of(&f).unwrap();
        let vals = parse_row(line.as_bytes(), &node).unwrap();
        let claimed = vals[0].as_str().map(str::to_string);
        assert!(claimed.is_some(), "{f:?}");
        // The key claimed is read as the digest field only.
        let slot = if f.digest.starts_with("task") {
            3 + 1
        } else {
            3 + 3
        };
        assert!(matches!(vals[slot], Val::Absent), "{f:?}");
    }
}

fn row(line: &str, f: &Fields) -> Result<[Option<String>; 3], String> {
    let node = Node::of(f).unwrap();
    parse_row(line.as_bytes(), &node).map(|vals| {
        let [a, b, c, ..] = vals.map(|v| match v {
            Val::Absent => None,
            Val::Null => Some("null".into()),
            Val::Str(s) => Some(format!("'{s}'")),
            Val::Lone(s) => Some(format!("lone {}", quoted_lone(&s))),
            Val::Other(k) => Some(k.to_string()),
        });
        [a, b, c]
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
    // A line cut short, in Python's words.
    assert_eq!(
        row(r#"{"arm": "x""#, &f).unwrap_err(),
        "not JSON: Expecting ',' delimiter: line 1 column 12 (char 11)"
    );
}

#[test]
fn only_lowercase_hex_is_a_digest() {
    let hex = "ab".repeat(32);
    assert!(ManifestDigest::from_lower_hex(&hex).is_some());
    assert!(ManifestDigest::from_lower_hex(&hex.to_uppercase()).is_none());
    assert!(ManifestDigest::from_lower_hex(&hex[..63]).is_none());
    assert!(ManifestDigest::from_lower_hex(&format!("{hex}0")).is_none());
    assert!(ManifestDigest::from_lower_hex(&"g".repeat(64)).is_none());
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
        "not JSON: Expecting property name enclosed in double quotes: line 1 column 11 (char 10)"
    );
    assert_eq!(
        parse_row(b"-1", &node).unwrap_err(),
        "a JSON number, not an object"
    );
}

#[test]
fn rows_python_reads_are_rows_with_their_fields() {
    let f = Fields::default();
    let d = "ab".repeat(32);
    // Python's extensions anywhere in a row: the row and its fields stand.
    for extra in ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e309"] {
        let line = format!(
            r#"{{"arm": "ce_review", "score": {extra}, "ce_plugin_version": "1.0.0", "ce_plugin_manifest_digest": "{d}"}}"#
        );
        assert_eq!(
            row(&line, &f).unwrap(),
            [
                Some(format!("'{d}'")),
                Some("'1.0.0'".into()),
                Some("'ce_review'".into())
            ],
            "{line}"
        );
    }
    // In a field itself: a number.
    let got = row(r#"{"arm": NaN, "ce_plugin_version": -Infinity}"#, &f).unwrap();
    assert_eq!(
        got,
        [None, Some("a number".into()), Some("a number".into())]
    );
    // A lone surrogate in a value no field reads, in a key, and in each field.
    let got = row(
        &format!(
            r#"{{"note": "\ud800", "\udc00": 1, "arm": "ce_review", "ce_plugin_manifest_digest": "{d}"}}"#
        ),
        &f,
    )
    .unwrap();
    assert_eq!(got[0], Some(format!("'{d}'")));
    let got = row(
        r#"{"arm": "ce_\ud800review", "ce_plugin_version": "1.0.\udfff", "ce_plugin_manifest_digest": "ab\ud800"}"#,
        &f,
    )
    .unwrap();
    assert_eq!(
        got,
        [
            Some(r#"lone "ab\ud800""#.into()),
            Some(r#"lone "1.0.\udfff""#.into()),
            Some(r#"lone "ce_\ud800review""#.into())
        ]
    );
    // A pair of escapes is one character, not a lone surrogate.
    let got = row(r#"{"arm": "\ud83d\ude00", "score": NaN}"#, &f).unwrap();
    assert_eq!(got[2], Some("'😀'".into()));
    // Integers: as long as Python reads them, and no longer.
    let digits = |n: usize| "7".repeat(n);
    let line = format!(r#"{{"arm": "baseline", "n": {}}}"#, digits(4300));
    assert_eq!(row(&line, &f).unwrap()[2], Some("'baseline'".into()));
    let line = format!(r#"{{"arm": "baseline", "n": {}}}"#, digits(4301));
    assert!(row(&line, &f)
        .unwrap_err()
        .starts_with("not JSON: Exceeds the limit (4300 digits) for integer string conversion"));
    // In a string, 5,000 digits are characters.
    let line = format!(r#"{{"arm": "baseline", "n": "{}"}}"#, digits(5000));
    assert!(row(&line, &f).is_ok());
}

#[test]
fn a_key_met_again_replaces_its_value_whole() {
    let nested = fields("p.d", "p.v", "arm");
    // Python keeps the last "p": its "d" is gone, whether serde or Python's
    // grammar reads the line.
    for tail in ["", ", \"x\": NaN"] {
        let line = format!(r#"{{"p": {{"d": "x", "v": "1"}}, "p": {{"v": "2"}}{tail}}}"#);
        assert_eq!(
            row(&line, &nested).unwrap(),
            [None, Some("'2'".into()), None],
            "{line}"
        );
        let line = format!(r#"{{"p": {{"d": "x"}}, "arm": "a", "p": 5{tail}}}"#);
        assert_eq!(
            row(&line, &nested).unwrap(),
            [None, None, Some("'a'".into())],
            "{line}"
        );
        let line = format!(r#"{{"p": {{"d": "x", "d": [1]}}{tail}}}"#);
        assert_eq!(
            row(&line, &nested).unwrap(),
            [Some("an array".into()), None, None],
            "{line}"
        );
    }
}

#[test]
fn nesting_is_read_to_pythons_depth() {
    let f = Fields::default();
    let d = "cd".repeat(32);
    let arrays = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    // The row counts as a level: a value of ROW_MAX_DEPTH - 1 levels is the deepest.
    let line = |inner: usize| {
        format!(
            r#"{{"deep": {}, "ce_plugin_manifest_digest": "{d}"}}"#,
            arrays(inner)
        )
    };
    assert_eq!(
        row(&line(ROW_MAX_DEPTH - 1), &f).unwrap()[0],
        Some(format!("'{d}'"))
    );
    assert_eq!(
        row(&line(ROW_MAX_DEPTH), &f).unwrap_err(),
        "not JSON: maximum recursion depth exceeded while decoding a JSON array from a unicode string"
    );
    // serde_json's own limit (128) is no limit of a row.
    assert!(row(&line(200), &f).is_ok());
}

#[test]
fn blank_lines_are_only_json_whitespace() {
    for blank in ["", " ", "\t", "\r", " \t\r "] {
        assert!(is_blank(blank.as_bytes()), "{blank:?}");
    }
    for not_blank in ["\u{c}", "\u{b}", "\u{a0}", "\u{feff}", " x"] {
        assert!(!is_blank(not_blank.as_bytes()), "{not_blank:?}");
        let node = Node::of(&Fields::default()).unwrap();
        assert!(parse_row(not_blank.as_bytes(), &node).is_err());
    }
}

// The differential test's seeded generator and mutator are `pyjson`'s.
use crate::pyjson::tests::{mutate_with, SplitMix64 as Rng};

const DIFF_KEYS: &[&str] = &[
    "arm",
    "ce_plugin_manifest_digest",
    "ce_plugin_version",
    "p",
    "d",
    "v",
    "run",
    "score",
    "\\u0061rm",
    "ce_plugin_\\u0076ersion",
    "ar\\ud800m",
    "\\ud800",
    "",
];

const DIFF_STRINGS: &[&str] = &[
    "ce_review",
    "ce_workflow",
    "baseline",
    "abababababababababababababababababababababababababababababababab",
    "ABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABAB",
    "1.0.0",
    "1.0.\\ud800",
    "\\ud800",
    "\\udc00x",
    "\\ud83d\\ude00",
    "\\uD83D\\uDE00",
    "\\ud800\\u0041",
    "\\ud800\\ud800",
    "",
    "é",
    "\\u00e9",
    "a\\\"b",
    "\\\\",
    "\\n\\t\\b\\f\\r\\/",
    "\\u0000",
    "\u{7f}\u{85}\u{2028}",
];

const DIFF_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-12",
    "1.5",
    "-2.5E-3",
    "1e400",
    "-1e400",
    "1e309",
    "1.8e308",
    "1e-400",
    "123456789012345678901234567890",
    "NaN",
    "Infinity",
    "-Infinity",
];

const DIFF_WS: &[&str] = &["", "", "", " ", "\t", "\r", "  "];

fn diff_string(rng: &mut Rng, key: bool) -> String {
    format!(
        "\"{}\"",
        rng.pick(if key { DIFF_KEYS } else { DIFF_STRINGS })
    )
}

fn diff_value(rng: &mut Rng, depth: usize) -> String {
    let ws = |rng: &mut Rng| rng.pick(DIFF_WS);
    match rng.below(if depth > 3 { 6 } else { 9 }) {
        0 => rng.pick(&["null", "true", "false"]).to_owned(),
        1 | 2 => rng.pick(DIFF_NUMBERS).to_owned(),
        3..=5 => diff_string(rng, false),
        6 => {
            let items: Vec<String> = (0..rng.below(4))
                .map(|_| diff_value(rng, depth + 1))
                .collect();
            format!(
                "[{}{}]",
                items.join(&format!("{},{}", ws(rng), ws(rng))),
                ws(rng)
            )
        }
        _ => diff_object(rng, depth + 1),
    }
}

fn diff_object(rng: &mut Rng, depth: usize) -> String {
    let members: Vec<String> = (0..rng.below(6))
        .map(|_| {
            let ws = [rng.pick(DIFF_WS), rng.pick(DIFF_WS), rng.pick(DIFF_WS)];
            format!(
                "{}{}{}:{}{}",
                ws[0],
                diff_string(rng, true),
                ws[1],
                ws[2],
                diff_value(rng, depth)
            )
        })
        .collect();
    format!("{{{}{}}}", members.join(","), rng.pick(DIFF_WS))
}

const DIFF_BYTES: &[u8] =
    b"{}[]\",:\\ -+.0123456789eENIaInfnul\t\r\x00\x0b\x0c\x1f\x7f\xc3\xa9\xff\xed\xa0\x80\xef\xbb\xbf";
const DIFF_TOKENS: &[&str] = &[
    "\\u",
    "\\ud800",
    "NaN",
    "-Infinity",
    "Infinity",
    "1e400",
    "null",
    "\"\"",
    "\\",
    "}",
    "]",
    "\u{feff}",
    "\u{a0}",
    "\u{c}",
];

fn diff_mutate(rng: &mut Rng, line: Vec<u8>) -> Vec<u8> {
    mutate_with(rng, line, DIFF_BYTES, DIFF_TOKENS)
}

fn diff_case(rng: &mut Rng) -> Vec<u8> {
    let row = |rng: &mut Rng| {
        format!(
            "{}{}{}",
            rng.pick(DIFF_WS),
            diff_object(rng, 0),
            rng.pick(DIFF_WS)
        )
        .into_bytes()
    };
    match rng.below(10) {
        0..=3 => row(rng),
        4..=6 => {
            let line = row(rng);
            diff_mutate(rng, line)
        }
        // Cut short, as a killed writer leaves a line.
        7 => {
            let mut line = row(rng);
            line.truncate(rng.below(line.len() + 1));
            line
        }
        8 => diff_value(rng, 0).into_bytes(),
        _ => (0..rng.below(8))
            .map(|_| DIFF_BYTES[rng.below(DIFF_BYTES.len())])
            .collect(),
    }
}

/// The lines read at the edges of the rules: nesting (audit's limit, and
/// serde_json's), long integers, BOM, whitespace, duplicate keys. Those
/// whose answer depends on CPython's version (the recursion limit's) are
/// marked.
fn diff_edges() -> Vec<(Vec<u8>, bool)> {
    let d = "ef".repeat(32);
    let mut out: Vec<(String, bool)> = Vec::new();
    for n in [
        127,
        128,
        129,
        ROW_MAX_DEPTH - 2,
        ROW_MAX_DEPTH - 1,
        ROW_MAX_DEPTH,
        ROW_MAX_DEPTH + 1,
    ] {
        let exact = n > 900;
        let arrays = format!("{}{}", "[".repeat(n), "]".repeat(n));
        let objects = format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        out.push((
            format!(r#"{{"deep": {arrays}, "ce_plugin_manifest_digest": "{d}"}}"#),
            exact,
        ));
        out.push((
            format!(r#"{{"ce_plugin_manifest_digest": "{d}", "deep": {objects}}}"#),
            exact,
        ));
        out.push((format!("{{\"p\": {objects}}}"), exact));
        out.push((arrays, exact));
    }
    for n in [4299, 4300, 4301] {
        let digits = "9".repeat(n);
        out.push((format!(r#"{{"arm": "baseline", "n": {digits}}}"#), false));
        out.push((format!(r#"{{"arm": "baseline", "n": -{digits}}}"#), false));
        out.push((format!(r#"{{"arm": "baseline", "n": {digits}.5}}"#), false));
        out.push((format!(r#"{{"arm": "baseline", "n": "{digits}"}}"#), false));
        out.push((format!(r#"{{"arm": {digits}}}"#), false));
    }
    for line in [
        "",
        " ",
        "\t\r",
        "\u{c}",
        "\u{b}",
        "\u{a0}",
        "\u{feff}{}",
        "\u{feff}{\"arm\": \"baseline\"}",
        "{\"arm\": \"baseline\"}\u{c}",
        "{\"arm\": \"baseline\"}\u{0}",
        "\r{\"arm\":\"baseline\"}\t\r",
        "{\"arm\"\r:\t\"baseline\"}",
        "{\"arm\": \"a\", \"arm\": \"b\"}",
        "{\"arm\": \"a\", \"arm\": NaN}",
        "{\"p\": {\"d\": \"x\"}, \"p\": 1}",
        "{\"p\": {\"d\": \"x\"}, \"p\": {\"v\": NaN}}",
        "{\"p\": {\"d\": \"x\", \"d\": \"\\ud800\"}}",
        "{\"arm\": \"ce_review\", \"x\": \"\\u12\"}",
        "{\"arm\": \"\\ud83d\\ude00",
        "{\"arm\": \"\\ud83d\\ude00\"",
        "{\"arm\": \"ce_review\", \"x\": \"tab\there\"}",
        "{\"arm\": nan}",
        "{\"arm\": -NaN}",
        "{\"arm\": +1}",
        "{\"arm\": 01}",
        "{\"arm\": 1.}",
        "{'arm': 'baseline'}",
        "[]",
        "\"s\"",
        "NaN",
        "null",
        "{}",
        "{\"arm\": \"x\"} {}",
    ] {
        out.push((line.to_string(), false));
    }
    let mut bytes: Vec<(Vec<u8>, bool)> =
        out.into_iter().map(|(l, e)| (l.into_bytes(), e)).collect();
    // Not UTF-8: a bad byte, an encoded surrogate, a cut character.
    bytes.push((b"{\"arm\": \"\xff\"}".to_vec(), false));
    bytes.push((b"{\"arm\": \"\xed\xa0\x80\"}".to_vec(), false));
    bytes.push((b"{\"arm\": \"\xc3".to_vec(), false));
    bytes
}

/// Reads each line and prints what Python makes of it: `blank`,
/// `malformed` with why, or `row` with the fields of the two sets of
/// paths given (each absent, null, a kind, or a string as `json.dumps`
/// writes it). `json.loads` is called at the script's top level, as
/// [`ROW_MAX_DEPTH`] was measured.
const PYTHON_ROWS: &str = r#"
import sys, json
paths = [p.split(".") for p in sys.argv[1:]]
out = ["%d.%d" % sys.version_info[:2]]
def describe(row, path):
    cur = row
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return "absent"
        cur = cur[part]
    if cur is None:
        return "null"
    if isinstance(cur, bool):
        return "a boolean"
    if isinstance(cur, (int, float)):
        return "a number"
    if isinstance(cur, str):
        return "str " + json.dumps(cur)
    if isinstance(cur, list):
        return "an array"
    return "an object"
kinds = {"list": "a JSON array", "str": "a JSON string", "NoneType": "JSON null",
         "bool": "a JSON boolean", "int": "a JSON number", "float": "a JSON number"}
for line in sys.stdin.read().split("\n")[:-1]:
    raw = bytes.fromhex(line[1:])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        out.append("malformed utf-8")
        continue
    if all(c in " \t\r" for c in text):
        out.append("blank")
        continue
    try:
        row = json.loads(text)
    except (ValueError, RecursionError) as exc:
        out.append("malformed not JSON: " + str(exc))
        continue
    if not isinstance(row, dict):
        out.append("malformed " + kinds[type(row).__name__] + ", not an object")
        continue
    out.append("row " + json.dumps([describe(row, p) for p in paths], separators=(",", ":")))
sys.stdout.write("".join(o + "\n" for o in out))
"#;

/// A string as Python's `json.dumps` writes it (ASCII, `\uXXXX` escapes).
fn py_dumps(points: &[u32]) -> String {
    let mut out = String::from("\"");
    for &cp in points {
        match cp {
            0x22 => out.push_str("\\\""),
            0x5c => out.push_str("\\\\"),
            0x0a => out.push_str("\\n"),
            0x0d => out.push_str("\\r"),
            0x09 => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            0x20..=0x7e => out.push(char::from_u32(cp).unwrap()),
            0x10000.. => {
                let v = cp - 0x10000;
                out.push_str(&format!(
                    "\\u{:04x}\\u{:04x}",
                    0xd800 + (v >> 10),
                    0xdc00 + (v & 0x3ff)
                ));
            }
            _ => out.push_str(&format!("\\u{cp:04x}")),
        }
    }
    out.push('"');
    out
}

fn describe(v: &Val<'_>) -> String {
    match v {
        Val::Absent => "absent".into(),
        Val::Null => "null".into(),
        Val::Str(s) => format!(
            "str {}",
            py_dumps(&s.chars().map(u32::from).collect::<Vec<_>>())
        ),
        Val::Lone(s) => format!("str {}", py_dumps(&s.code_points())),
        Val::Other(k) => k.to_string(),
    }
}

/// What audit makes of a line, in the judge's terms.
fn ours(line: &[u8], nodes: &[Node; 2]) -> String {
    if is_blank(line) {
        return "blank".into();
    }
    let mut fields = Vec::new();
    for node in nodes {
        match parse_row(line, node) {
            Ok(vals) => fields.extend(vals.iter().take(3).map(describe)),
            Err(why) if why.starts_with("invalid UTF-8 at byte") => {
                return "malformed utf-8".into()
            }
            Err(why) => return format!("malformed {why}"),
        }
    }
    format!("row {}", serde_json::to_string(&fields).unwrap())
}

#[test]
fn rows_are_what_python_reads() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let seed = std::env::var("AUDIT_ROWS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00a0_d170_u64);
    let mut rng = Rng(seed);
    let mut cases = diff_edges();
    cases.extend((0..6000).map(|_| (diff_case(&mut rng), false)));
    // Lines hold no newline: the reader cuts there.
    for (case, _) in &mut cases {
        case.retain(|&b| b != b'\n');
    }
    let sets = [Fields::default(), fields("p.d", "p.v", "arm")];
    let paths: Vec<&str> = sets
        .iter()
        .flat_map(|f| [f.digest.as_str(), f.version.as_str(), f.arm.as_str()])
        .collect();
    let Ok(mut child) = Command::new("python3")
        .arg("-c")
        .arg(PYTHON_ROWS)
        .args(&paths)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("skipping rows_are_what_python_reads: python3 is not available");
        return;
    };
    let mut input = String::new();
    for (case, _) in &cases {
        input.push('x');
        input.extend(case.iter().map(|b| format!("{b:02x}")));
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the python3 judge failed");
    let text = String::from_utf8(output.stdout).unwrap();
    let mut answers = text.lines();
    let version = answers.next().unwrap_or_default().to_string();
    let answers: Vec<&str> = answers.collect();
    assert_eq!(answers.len(), cases.len(), "the judge answered every line");
    // The recursion limit's depth is CPython 3.11's; other versions count
    // it otherwise.
    let exact = version == "3.11";
    if !exact {
        eprintln!("rows_are_what_python_reads: python3 is {version}, not 3.11: the recursion-limit cases are not compared");
    }
    let nodes = [Node::of(&sets[0]).unwrap(), Node::of(&sets[1]).unwrap()];
    let mut failures = Vec::new();
    let (mut rows, mut malformed) = (0, 0);
    for (i, ((case, version_bound), python)) in cases.iter().zip(&answers).enumerate() {
        if *version_bound && !exact {
            continue;
        }
        let mine = ours(case, &nodes);
        rows += usize::from(python.starts_with("row "));
        malformed += usize::from(python.starts_with("malformed "));
        if mine != *python {
            failures.push(format!(
                "line {i} {:?}:\n  python: {python}\n  audit:  {mine}",
                String::from_utf8_lossy(&case[..case.len().min(300)])
            ));
        }
    }
    eprintln!(
        "rows_are_what_python_reads: seed {seed}, {} lines, {rows} rows, {malformed} malformed (python {version})",
        cases.len()
    );
    assert!(rows > 1000 && malformed > 1000, "the lines cover both");
    assert!(
        failures.is_empty(),
        "seed {seed}: {} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A `--field` spec is `NAME=KIND`: added after the defaults, or re-mapping
/// a default in its place; anything else is a usage error naming the spec.
#[test]
fn field_specs_extend_or_remap_the_default_table() {
    let specs =
        |s: &[&str]| FieldTable::with_specs(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
    let table = specs(&[]).unwrap();
    assert_eq!(table.len(), DEFAULT_FIELDS.len());
    assert_eq!(table.fields[4].name, "gitnexus_runtime_manifest_digest");
    assert_eq!(table.fields[4].kind, DigestKind::Tree);
    let table = specs(&["x.y=ce", "task_asset_manifest_digest=task"]).unwrap();
    assert_eq!(table.len(), DEFAULT_FIELDS.len() + 1);
    assert_eq!(table.fields[1].kind, DigestKind::Task);
    assert_eq!(table.fields[5].name, "environment_digest");
    assert_eq!(table.fields[5].kind, DigestKind::Environment);
    assert_eq!(table.fields[6].name, "x.y");
    assert_eq!(table.fields[6].kind, DigestKind::Ce);
    for bad in [
        &["x"][..],
        &["x=blob"],
        &["=tree"],
        &["a..b=tree"],
        &["x.=tree"],
        &["x=tree", "x=task"],
    ] {
        let e = specs(bad).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        assert!(e.to_string().contains(FIELD_SPEC_RULE), "{bad:?}: {e}");
    }
    let many: Vec<String> = (0..=MAX_TABLE_FIELDS - DEFAULT_FIELDS.len())
        .map(|i| format!("f{i}=tree"))
        .collect();
    assert!(FieldTable::with_specs(&many[1..]).is_ok());
    assert_eq!(FieldTable::with_specs(&many).unwrap_err().exit_code(), 2);
}

/// A field given reads its slot, a dotted one from nested objects; one that
/// overlaps the three fields or another of the table is refused, while a
/// default one that does is not read, as before.
#[test]
fn a_given_field_reads_its_slot_and_may_not_overlap() {
    let table = FieldTable::with_specs(&["r.m=tree".to_string()]).unwrap();
    let node = Node::with_table(&Fields::default(), &table).unwrap();
    let vals = parse_row(
        br#"{"r": {"m": "d"}, "gitnexus_runtime_manifest_digest": "g"}"#,
        &node,
    )
    .unwrap();
    assert_eq!(vals[3 + 4].as_str(), Some("g"));
    assert_eq!(vals[3 + 6].as_str(), Some("d"));
    for spec in ["arm=tree", "arm.x=tree", "ce_plugin_version=task"] {
        let table = FieldTable::with_specs(&[spec.to_string()]).unwrap();
        let e = Node::with_table(&Fields::default(), &table).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{spec}: {e}");
    }
    let table = FieldTable::with_specs(&["r=tree".to_string(), "r.m=tree".to_string()]).unwrap();
    assert!(Node::with_table(&Fields::default(), &table).is_err());
    let f = fields("gitnexus_runtime_manifest_digest", "v", "arm");
    assert!(Node::with_table(&f, &FieldTable::default()).is_ok());
}
