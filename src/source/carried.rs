//! Source records as they travel with a snapshot: in a registry's
//! `dev.cestore.sources` annotation and in a bundle's `sources.json`.
//!
//! What travels is each record and when its ingest ran, never how the
//! sending store came to hold it (`via`): that is the receiver's to say
//! (`registry`, `bundle`). So the list a store sends depends only on the
//! records themselves, and a snapshot pushed again from a store that pulled
//! or imported it publishes the same bytes as the store that ingested it.
//!
//! The list is JSON, one line, oldest first, each record once, so that the
//! same records always give the same bytes (and the same OCI manifest
//! digest). It is bounded ([`MAX_CARRIED_BYTES`]): a sender that holds more
//! keeps the newest records that fit, and a receiver refuses a longer list
//! before it parses anything. Repositories are stripped of credentials on
//! the way out and on the way in ([`redact_url`]), whatever the other side
//! did.

use serde::{Deserialize, Serialize};

use super::record::{redact_url, SourceEntry, SourceRecord, Via};

/// The most bytes a carried list may have: far more than the records of a
/// release (a dirty record lists paths, and a release has at most 2,048
/// files), and a small part of the 4 MiB an OCI manifest may have.
pub const MAX_CARRIED_BYTES: usize = 256 * 1024;

/// One record as it travels: when its ingest ran, and the record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Carried {
    /// When the ingest that found the source ran (UTC, RFC 3339).
    at: String,
    /// The record.
    record: SourceRecord,
}

/// Why a carried list cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CarriedError {
    /// The list has more bytes than [`MAX_CARRIED_BYTES`].
    #[error("it has {found} bytes, more than the {max} a list of source records may have")]
    TooLarge {
        /// Its size.
        found: usize,
        /// The limit.
        max: usize,
    },
    /// The list is not a JSON list of `{at, record}`.
    #[error("it is not a list of source records: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// A record with its repository stripped of credentials.
fn redacted(mut record: SourceRecord) -> SourceRecord {
    record.repository = redact_url(&record.repository);
    record
}

/// The list a snapshot's records travel as, or `None` when there is none
/// (or none fits): each distinct `{at, record}` once, oldest first (by
/// time, then by their JSON), the oldest left out when the whole list would
/// exceed [`MAX_CARRIED_BYTES`].
pub fn to_json(entries: &[SourceEntry]) -> Option<String> {
    let mut lines: Vec<(String, String)> = entries
        .iter()
        .filter_map(|e| {
            let carried = Carried {
                at: e.at.clone(),
                record: redacted(e.record.clone()),
            };
            // Cannot fail: every field is a string, a bool or a list of strings.
            let json = serde_json::to_string(&carried).ok()?;
            Some((e.at.clone(), json))
        })
        .collect();
    lines.sort();
    lines.dedup();
    // The newest that fit, with the brackets and the commas.
    let mut budget = MAX_CARRIED_BYTES.saturating_sub(2);
    let mut first = lines.len();
    while first > 0 {
        let len = lines[first - 1].1.len() + 1;
        if len > budget {
            break;
        }
        budget -= len;
        first -= 1;
    }
    let kept = &lines[first..];
    if kept.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(MAX_CARRIED_BYTES - budget);
    out.push('[');
    for (i, (_, json)) in kept.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(json);
    }
    out.push(']');
    Some(out)
}

/// Reads a carried list back as the receiver keeps it: each record with its
/// time, marked `via`, its repository stripped of credentials. Unknown
/// fields (a newer sender's) are ignored; anything else that is not a list
/// of records, or a list over [`MAX_CARRIED_BYTES`], is refused.
pub fn from_json(bytes: &[u8], via: Via) -> Result<Vec<SourceEntry>, CarriedError> {
    if bytes.len() > MAX_CARRIED_BYTES {
        return Err(CarriedError::TooLarge {
            found: bytes.len(),
            max: MAX_CARRIED_BYTES,
        });
    }
    let list: Vec<Carried> = serde_json::from_slice(bytes)?;
    Ok(list
        .into_iter()
        .map(|c| SourceEntry {
            at: c.at,
            via,
            record: redacted(c.record),
        })
        .collect())
}

/// The newest record that names a commit (the last of those as new): what
/// the standard OCI annotations `org.opencontainers.image.source` and
/// `.revision` give, and what `audit --source-repo` re-derives.
pub fn newest_with_commit<'a>(
    entries: impl IntoIterator<Item = &'a SourceEntry>,
) -> Option<&'a SourceRecord> {
    entries
        .into_iter()
        .filter(|e| e.record.commit.is_some())
        .max_by(|a, b| a.at.cmp(&b.at))
        .map(|e| &e.record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(at: &str, via: Via, repository: &str, commit: Option<&str>) -> SourceEntry {
        SourceEntry {
            at: at.into(),
            via,
            record: SourceRecord::of_commit(repository, commit),
        }
    }

    #[test]
    fn the_same_records_travel_as_the_same_bytes_whatever_their_via() {
        let a = entry("2026-01-01T00:00:00.000Z", Via::Ingest, "/r", Some("a"));
        let b = entry("2026-01-02T00:00:00.000Z", Via::Ingest, "/r", Some("b"));
        let mut b_pulled = b.clone();
        b_pulled.via = Via::Registry;
        let one = to_json(&[b.clone(), a.clone()]).unwrap();
        let two = to_json(&[a.clone(), b_pulled, b.clone()]).unwrap();
        assert_eq!(one, two);
        assert!(!one.contains("via"), "{one}");
        assert!(one.starts_with(r#"[{"at":"2026-01-01"#), "{one}");
        let back = from_json(one.as_bytes(), Via::Bundle).unwrap();
        assert_eq!(back.len(), 2);
        assert!(back.iter().all(|e| e.via == Via::Bundle));
        assert_eq!(
            (back[0].at.as_str(), back[1].record.commit.as_deref()),
            (a.at.as_str(), Some("b"))
        );
        assert_eq!(to_json(&[]), None);
    }

    #[test]
    fn no_credential_travels_either_way() {
        let e = entry(
            "2026-01-01T00:00:00.000Z",
            Via::Ingest,
            "https://user:token@example.invalid/o/r.git",
            Some("a"),
        );
        let json = to_json(&[e]).unwrap();
        assert!(!json.contains("token") && !json.contains("user"), "{json}");
        let sent = json.replace(
            "https://example.invalid",
            "https://user:token@example.invalid",
        );
        let back = from_json(sent.as_bytes(), Via::Registry).unwrap();
        assert_eq!(back[0].record.repository, "https://example.invalid/o/r.git");
        // Every form git reads, both ways.
        for (url, kept) in [
            (
                "https:///user:token@example.invalid/r",
                "https:///example.invalid/r",
            ),
            ("user:token@example.invalid:o/r", "example.invalid:o/r"),
            (
                "ssh://user@example.invalid/r#token",
                "ssh://example.invalid/r",
            ),
        ] {
            let e = entry("2026-01-01T00:00:00.000Z", Via::Ingest, url, Some("a"));
            let json = to_json(&[e]).unwrap();
            assert!(!json.contains("token") && !json.contains("user"), "{json}");
            let sent = json.replace(kept, url);
            assert!(sent.contains("token"), "{sent}");
            let back = from_json(sent.as_bytes(), Via::Bundle).unwrap();
            assert_eq!(back[0].record.repository, kept);
        }
    }

    #[test]
    fn a_list_is_bounded_both_ways_and_must_be_records() {
        let many: Vec<SourceEntry> = (0..5000)
            .map(|i| {
                entry(
                    &format!("2026-01-01T00:00:{:02}.{:03}Z", i / 1000, i % 1000),
                    Via::Ingest,
                    "/r",
                    Some(&format!("{i:040}")),
                )
            })
            .collect();
        let json = to_json(&many).unwrap();
        assert!(json.len() <= MAX_CARRIED_BYTES, "{}", json.len());
        let back = from_json(json.as_bytes(), Via::Registry).unwrap();
        assert!(back.len() < many.len());
        // The newest are kept.
        assert_eq!(back.last().unwrap().record.commit, many[4999].record.commit);
        let long = vec![b' '; MAX_CARRIED_BYTES + 1];
        assert!(matches!(
            from_json(&long, Via::Registry),
            Err(CarriedError::TooLarge { .. })
        ));
        for bad in [&b"{}"[..], b"[1]", b"[{\"at\":\"x\"}]", b"not json"] {
            assert!(
                matches!(
                    from_json(bad, Via::Registry),
                    Err(CarriedError::Malformed(_))
                ),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // A newer sender's fields are ignored.
        let newer = br#"[{"at":"t","via":"ingest","extra":1,"record":{"read_from":"git","repository":"/r","commit":null,"path":"","tree":null,"tag":null,"clean":true,"future":true}}]"#;
        assert_eq!(from_json(newer, Via::Registry).unwrap().len(), 1);
    }

    #[test]
    fn the_newest_record_with_a_commit_names_the_revision() {
        let entries = [
            entry("2026-01-03T00:00:00.000Z", Via::Ingest, "/new", None),
            entry("2026-01-02T00:00:00.000Z", Via::Ingest, "/mid", Some("m")),
            entry("2026-01-01T00:00:00.000Z", Via::Ingest, "/old", Some("o")),
        ];
        let r = newest_with_commit(&entries).unwrap();
        assert_eq!(
            (r.repository.as_str(), r.commit.as_deref()),
            ("/mid", Some("m"))
        );
        assert!(newest_with_commit(&entries[..1]).is_none());
    }
}
