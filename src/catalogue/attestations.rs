//! The `attestations` table, where snapshots' attestations are indexed, and
//! the form an attestation is kept in.
//!
//! An attestation is, to the store, opaque: the bytes of a signed envelope
//! (one JSON object on one line, ending in `\n`), the id of the key that
//! signed it (64 hex) and the time it was made. Its file under
//! `attestations/ab/<digest>/` is named by the SHA-256 of the envelope's
//! bytes and holds one line, a small wrapper that carries the key id and the
//! time beside the envelope, so that `cestore recover` rebuilds the row from
//! the file alone, without reading a signature:
//!
//! ```text
//! {"keyid":"<64 hex>","at":"<RFC 3339>","envelope":<the envelope, verbatim>}
//! ```
//!
//! The wrapper's bytes follow from the three parts (`keyid` first, `at`
//! written as JSON writes a string, then the envelope's line as it is,
//! without its `\n`, then `}` and `\n`), so the envelope's bytes are exactly
//! the wrapper's between the `"envelope":` prefix and the final `}`, and a
//! file written again from the catalogue is the file it was. `jq .envelope`
//! gives the envelope to a verifier.

use rusqlite::{params, Connection};

use super::{errors, immediate, Catalogue};
use crate::digest::{AttestationId, ManifestDigest};
use crate::error::Result;

/// An attestation as a store keeps it: its envelope's bytes and their name,
/// the key id that signed it and when it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptAttestation {
    /// The SHA-256 of `json`: the file's name.
    pub id: AttestationId,
    /// The id of the key that signed it: 64 lowercase hex digits.
    pub keyid: String,
    /// When it was made (UTC, RFC 3339).
    pub at: String,
    /// The envelope's bytes: one JSON object on one line, ending in `\n`.
    pub json: String,
}

/// The parts of a wrapper, as JSON reads them.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Wrapper {
    keyid: String,
    at: String,
    #[allow(dead_code)]
    envelope: serde_json::Map<String, serde_json::Value>,
}

impl KeptAttestation {
    /// The kept form of an envelope signed by `keyid` at `at`; a missing
    /// final `\n` is added. `None` unless the envelope is one JSON object on
    /// one line (starting with `{`, ending with `}`), `keyid` is 64
    /// lowercase hex digits and `at` is not empty.
    pub fn new(
        json: impl Into<String>,
        keyid: impl Into<String>,
        at: impl Into<String>,
    ) -> Option<KeptAttestation> {
        let (mut json, keyid, at) = (json.into(), keyid.into(), at.into());
        if !json.ends_with('\n') {
            json.push('\n');
        }
        let line = &json[..json.len() - 1];
        let sound = line.starts_with('{')
            && line.ends_with('}')
            && !line.contains('\n')
            && serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line).is_ok()
            && keyid.len() == 64
            && keyid
                .bytes()
                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
            && !at.is_empty();
        sound.then(|| KeptAttestation {
            id: AttestationId::of(json.as_bytes()),
            keyid,
            at,
            json,
        })
    }

    /// The wrapper's bytes up to the envelope: `{"keyid":…,"at":…,"envelope":`.
    fn prefix(keyid: &str, at: &str) -> String {
        // Cannot fail: a string always serialises.
        let at = serde_json::to_string(at).unwrap_or_default();
        format!("{{\"keyid\":\"{keyid}\",\"at\":{at},\"envelope\":")
    }

    /// The bytes of its file: the wrapper, one line ending in `\n`.
    pub fn file(&self) -> String {
        let mut out = Self::prefix(&self.keyid, &self.at);
        out.push_str(&self.json[..self.json.len() - 1]);
        out.push_str("}\n");
        out
    }

    /// Reads a kept attestation back from its file's bytes; `None` when they
    /// are not exactly the wrapper [`KeptAttestation::file`] writes.
    pub fn parse(file: &str) -> Option<KeptAttestation> {
        let wrapper: Wrapper = serde_json::from_str(file).ok()?;
        let prefix = Self::prefix(&wrapper.keyid, &wrapper.at);
        let envelope = file.strip_prefix(&prefix)?.strip_suffix("}\n")?;
        let kept = KeptAttestation::new(format!("{envelope}\n"), wrapper.keyid, wrapper.at)?;
        (kept.file() == file).then_some(kept)
    }
}

/// Adds one attestation of a recorded snapshot, unless it is there already.
pub(super) fn insert_attestation(
    conn: &Connection,
    digest: &ManifestDigest,
    kept: &KeptAttestation,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO attestations (snapshot_id, id, keyid, at, envelope)
         SELECT id, ?2, ?3, ?4, ?5 FROM snapshots WHERE digest = ?1",
    )?
    .execute(params![
        digest.to_hex(),
        kept.id.to_hex(),
        kept.keyid,
        kept.at,
        kept.json
    ])
}

impl Catalogue {
    /// The attestations of a snapshot, oldest first.
    pub fn attestations(&self, digest: &ManifestDigest) -> Result<Vec<KeptAttestation>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT a.envelope, a.keyid, a.at FROM attestations a
                 JOIN snapshots s ON s.id = a.snapshot_id
                 WHERE s.digest = ?1 ORDER BY a.at, a.id",
            )
            .map_err(self.err("prepare the attestations"))?;
        let rows: Vec<(String, String, String)> = stmt
            .query_map([digest.to_hex()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(self.err("read the attestations"))?;
        Ok(rows
            .into_iter()
            .filter_map(|(json, keyid, at)| KeptAttestation::new(json, keyid, at))
            .collect())
    }

    /// Adds an attestation of a recorded snapshot unless it is there
    /// already; returns whether it was added.
    pub fn add_attestation(&self, digest: &ManifestDigest, kept: &KeptAttestation) -> Result<bool> {
        insert_attestation(&self.conn, digest, kept)
            .map(|n| n == 1)
            .map_err(self.err("record an attestation"))
    }

    /// Adds attestations of a snapshot in one transaction, each unless it is
    /// there already; returns whether each was added, or `None` (adding
    /// nothing) when the snapshot is not recorded.
    pub fn add_attestations(
        &mut self,
        digest: &ManifestDigest,
        attestations: &[KeptAttestation],
    ) -> Result<Option<Vec<bool>>> {
        let err = errors(&self.path);
        let tx = immediate(&mut self.conn).map_err(err("begin recording attestations"))?;
        let recorded = tx
            .query_row(
                "SELECT 1 FROM snapshots WHERE digest = ?1",
                [digest.to_hex()],
                |_| Ok(()),
            )
            .map(|()| true)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(false),
                e => Err(e),
            })
            .map_err(err("look up a snapshot"))?;
        if !recorded {
            return Ok(None);
        }
        let mut added = Vec::with_capacity(attestations.len());
        for kept in attestations {
            let n = insert_attestation(&tx, digest, kept).map_err(err("record an attestation"))?;
            added.push(n == 1);
        }
        tx.commit().map_err(err("commit the attestations"))?;
        Ok(Some(added))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENVELOPE: &str = r#"{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{"keyid":"","sig":"c2ln"}]}"#;

    fn keyid() -> String {
        "0123456789abcdef".repeat(4)
    }

    #[test]
    fn the_wrapper_holds_the_envelope_verbatim_and_reads_back() {
        let kept = KeptAttestation::new(ENVELOPE, keyid(), "2026-01-02T03:04:05.000Z").unwrap();
        assert_eq!(kept.json, format!("{ENVELOPE}\n"));
        assert_eq!(kept.id, AttestationId::of(kept.json.as_bytes()));
        let file = kept.file();
        assert_eq!(
            file,
            format!(
                "{{\"keyid\":\"{}\",\"at\":\"2026-01-02T03:04:05.000Z\",\"envelope\":{ENVELOPE}}}\n",
                keyid()
            )
        );
        let v: serde_json::Value = serde_json::from_str(&file).unwrap();
        assert_eq!(v["envelope"]["payload"], "e30=");
        assert_eq!(KeptAttestation::parse(&file), Some(kept.clone()));
        let same = KeptAttestation::new(format!("{ENVELOPE}\n"), keyid(), kept.at.clone());
        assert_eq!(same, Some(kept));
    }

    #[test]
    fn what_is_not_an_attestation_is_refused() {
        let at = "2026-01-02T03:04:05.000Z";
        for (json, keyid) in [
            ("[1]", keyid()),
            ("{\"a\":\n1}", keyid()),
            (" {}", keyid()),
            ("{} ", keyid()),
            ("{", keyid()),
            (ENVELOPE, "ABCDEF".repeat(10) + "ABCD"),
            (ENVELOPE, "abc".into()),
        ] {
            assert_eq!(KeptAttestation::new(json, keyid, at), None, "{json}");
        }
        assert_eq!(KeptAttestation::new(ENVELOPE, keyid(), ""), None);

        let file = KeptAttestation::new(ENVELOPE, keyid(), at).unwrap().file();
        for bad in [
            file.replace("\"at\":", "\"at\" :"),
            file.trim_end().to_string(),
            file.replace("}}\n", "} }\n"),
            file.replacen('{', "{\"more\":1,", 1),
            format!(
                "{{\"at\":\"{at}\",\"keyid\":\"{}\",\"envelope\":{ENVELOPE}}}\n",
                keyid()
            ),
            ENVELOPE.to_string() + "\n",
        ] {
            assert_eq!(KeptAttestation::parse(&bad), None, "{bad}");
        }
    }
}
