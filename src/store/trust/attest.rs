//! Attestations added to a snapshot already recorded, outside an ingest
//! (`cestore sign`, or those a pull or an import brings for a snapshot the
//! store holds).
//!
//! The files go first, through a work directory and one `syncfs`, then the
//! rows, in one transaction: a crash in between leaves files that
//! `cestore recover` records. Should the snapshot be forgotten meanwhile (an
//! `rm` racing), or the transaction fail, the new files are taken back, so a
//! failed command changes nothing.

use crate::catalogue::KeptAttestation;
use crate::digest::ManifestDigest;
use crate::error::{Error, Result};
use crate::store::core::beside::Written;
use crate::store::Store;

/// Keeps and records attestations of a recorded snapshot, in a store open
/// under its shared (or exclusive) lock. Returns, for each, whether the
/// catalogue did not hold it before. Fails, changing nothing, when the
/// snapshot is not recorded.
pub fn attach(
    store: &mut Store,
    digest: &ManifestDigest,
    attestations: &[KeptAttestation],
) -> Result<Vec<bool>> {
    if !store.catalogue().has_snapshot(digest)? {
        return Err(unknown(digest));
    }
    keep_and_record(store, digest, attestations)
}

/// What [`attach`] does once it found the snapshot recorded: a snapshot
/// forgotten meanwhile is found by the transaction.
fn keep_and_record(
    store: &mut Store,
    digest: &ManifestDigest,
    attestations: &[KeptAttestation],
) -> Result<Vec<bool>> {
    let work = store.work_dir("attach")?;
    let mut written = Written::new(*digest);
    // The files' bytes are on the disk before they are named, and their
    // names before the catalogue records them: one `syncfs` each.
    let done = attestations
        .iter()
        .try_for_each(|a| written.stage(store, &work, a))
        .and_then(|()| {
            if written.staged_any() {
                store.sync()
            } else {
                Ok(())
            }
        })
        .and_then(|()| written.publish(store, &work))
        .and_then(|()| if written.any() { store.sync() } else { Ok(()) })
        .and_then(|()| {
            store
                .catalogue_mut()
                .add_attestations(digest, attestations)?
                .ok_or_else(|| unknown(digest))
        });
    if done.is_err() {
        written.take_back(store);
    }
    done
}

/// The error of a snapshot that is not recorded.
fn unknown(digest: &ManifestDigest) -> Error {
    Error::UnknownDigest {
        prefix: digest.to_hex(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ce::manifest::{Entry, Manifest};
    use crate::store::core::beside::{Found, Kind};
    use crate::store::testutil::record;
    use crate::store::LockMode;

    fn manifest() -> Manifest {
        Manifest::new(vec![Entry::of("a.md", b"a\n", false)])
    }

    fn attestation(n: u8) -> KeptAttestation {
        KeptAttestation::new(
            format!("{{\"payload\":\"{n}\",\"signatures\":[]}}"),
            "c".repeat(64),
            format!("2026-01-02T03:04:0{n}.000Z"),
        )
        .unwrap()
    }

    #[test]
    fn attestations_are_kept_recorded_and_counted_new_once() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store"), LockMode::Shared, true).unwrap();
        let m = manifest();
        record(&mut store, &m);
        let (a, b) = (attestation(1), attestation(2));
        assert_eq!(
            attach(&mut store, &m.digest, std::slice::from_ref(&b)).unwrap(),
            [true]
        );
        assert_eq!(
            attach(&mut store, &m.digest, &[a.clone(), b.clone()]).unwrap(),
            [true, false]
        );
        assert_eq!(
            store.catalogue().attestations(&m.digest).unwrap(),
            [a.clone(), b.clone()],
            "oldest first"
        );
        let on_disk = store.read_beside::<KeptAttestation>(&m.digest).unwrap();
        assert_eq!(on_disk.len(), 2);
        assert!(on_disk.iter().all(|f| matches!(f, Found::Sound(_))));
    }

    #[test]
    fn a_snapshot_not_recorded_or_forgotten_meanwhile_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("store"), LockMode::Shared, true).unwrap();
        let unknown = ManifestDigest::of(b"nothing");
        let err = attach(&mut store, &unknown, &[attestation(1)]).unwrap_err();
        assert!(matches!(err, Error::UnknownDigest { .. }), "{err}");
        assert!(!store.root().join(Kind::Attestations.dir()).exists());

        // Forgotten after the check: the transaction finds it gone, and the
        // new files go again; those kept before stay.
        let m = manifest();
        record(&mut store, &m);
        let kept = attestation(1);
        attach(&mut store, &m.digest, std::slice::from_ref(&kept)).unwrap();
        store
            .catalogue_mut()
            .remove_snapshot(&m.digest, false, || Ok(()))
            .unwrap();
        let err = keep_and_record(&mut store, &m.digest, &[attestation(2)]).unwrap_err();
        assert!(matches!(err, Error::UnknownDigest { .. }), "{err}");
        let on_disk = store.read_beside::<KeptAttestation>(&m.digest).unwrap();
        assert!(
            matches!(&on_disk[..], [Found::Sound(k)] if **k == kept),
            "{on_disk:?}"
        );
        assert!(store
            .catalogue()
            .attestations(&m.digest)
            .unwrap()
            .is_empty());
    }
}
