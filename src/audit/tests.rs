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
        "not JSON: trailing comma at line 1 column 11"
    );
    assert_eq!(
        parse_row(b"-1", &node).unwrap_err(),
        "a JSON number, not an object"
    );
}
