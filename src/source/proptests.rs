//! Property tests: the walk lists names in the order Python sorts them.

use std::collections::HashSet;
use std::fs::File;
use std::os::fd::AsFd;

use proptest::prelude::*;

use super::*;

/// Python's view of a file name, decoded one step at a time: a complete
/// UTF-8 sequence is its code point, any other byte `b` is `U+DC00 + b`
/// (`surrogateescape`). Python compares `str` by these code points.
fn reference_key(name: &[u8]) -> Vec<u32> {
    let mut key = Vec::new();
    let mut i = 0;
    while i < name.len() {
        let one_char = (1..=4).filter(|len| i + len <= name.len()).find_map(|len| {
            let s = std::str::from_utf8(&name[i..i + len]).ok()?;
            let mut chars = s.chars();
            let c = chars.next()?;
            chars.next().is_none().then_some((c, len))
        });
        match one_char {
            Some((c, len)) => {
                key.push(u32::from(c));
                i += len;
            }
            None => {
                key.push(0xDC00 + u32::from(name[i]));
                i += 1;
            }
        }
    }
    key
}

/// Characters around the boundaries where code point order differs from
/// UTF-16 order: the surrogate gap, U+E000..U+FFFF and astral planes.
fn name_char() -> impl Strategy<Value = char> {
    prop_oneof![
        any::<char>(),
        prop::char::range('\u{1}', '\u{7f}'),
        prop::char::range('\u{80}', '\u{7ff}'),
        prop::char::range('\u{d700}', '\u{d7ff}'),
        prop::char::range('\u{e000}', '\u{ffff}'),
        prop::char::range('\u{10000}', '\u{10ffff}'),
    ]
    .prop_filter("not a separator or NUL", |c| *c != '/' && *c != '\0')
}

fn utf8_name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(name_char(), 1..6).prop_map(|cs| String::from_iter(cs).into_bytes())
}

/// Any bytes a file name may hold: stray continuation bytes, truncated
/// sequences, encoded surrogates, overlong forms, bytes above 0xF4.
fn any_name() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        any::<u8>(),
        0x80u8..=0xff,
        prop::sample::select(vec![
            b'a', b'~', 0xc0, 0xc2, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5
        ]),
    ]
    .prop_filter("not a separator or NUL", |b| *b != b'/' && *b != 0);
    let piece = prop_oneof![utf8_name(), prop::collection::vec(byte, 1..5)];
    prop::collection::vec(piece, 1..4).prop_map(|pieces| pieces.concat())
}

fn valid_names(names: HashSet<Vec<u8>>) -> Vec<Vec<u8>> {
    names
        .into_iter()
        .filter(|n| n.as_slice() != b"." && n.as_slice() != b".." && n.len() <= 255)
        .collect()
}

/// Creates the names as files in a new directory, lists it with
/// `list_sorted` and checks the order against the reference model.
fn check_listing(names: Vec<Vec<u8>>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    for name in &names {
        File::create(dir.path().join(OsStr::from_bytes(name)))
            .map_err(|e| TestCaseError::fail(format!("create {name:?}: {e}")))?;
    }
    let handle = File::open(dir.path()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let listed = fs::list_sorted(handle.as_fd()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut expected = names;
    expected.sort_by_key(|n| reference_key(n));
    prop_assert_eq!(listed, expected);
    Ok(())
}

#[test]
fn reference_key_follows_surrogateescape() {
    assert_eq!(reference_key(b"a\xffb"), vec![0x61, 0xDCFF, 0x62]);
    assert_eq!(reference_key(b"\xe2\x82"), vec![0xDCE2, 0xDC82]);
    assert_eq!(reference_key(b"\xed\xa0\x80"), vec![0xDCED, 0xDCA0, 0xDC80]);
    assert_eq!(
        reference_key("\u{20ac}\u{1d11e}".as_bytes()),
        vec![0x20AC, 0x1D11E]
    );
}

proptest! {
    #[test]
    fn utf8_names_list_in_code_point_order(
        names in prop::collection::hash_set(utf8_name(), 0..12)
    ) {
        check_listing(valid_names(names))?;
    }

    #[test]
    fn any_names_list_in_python_str_order(
        names in prop::collection::hash_set(any_name(), 0..12)
    ) {
        check_listing(valid_names(names))?;
    }
}
