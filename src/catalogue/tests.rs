//! The catalogue's tests.

use super::*;
use crate::digest::ObjectId;
use crate::error::{ErrorKind, Misuse};
use crate::profile::ce::manifest::Entry;
use crate::profile::ce::manifest::Manifest;
use std::cell::Cell;

fn entry(path: &str, data: &[u8], executable: bool) -> Entry {
    Entry::of(path, data, executable)
}

fn manifest(tag: &str) -> Manifest {
    Manifest::new(vec![
        entry("bin/run", format!("#!{tag}\n").as_bytes(), true),
        entry(&format!("skills/{tag}.md"), b"hello world\n", false),
    ])
}

fn snap<'a>(m: &'a Manifest, version: &'a str) -> NewSnapshot<'a> {
    NewSnapshot {
        name: "plug",
        version,
        digest: m.digest,
        manifest: &m.bytes,
        entries: &m.entries,
        first_ingested_at: None,
        tree: m.tree.as_ref(),
        delta: None,
    }
}

fn event(digest: ManifestDigest, kind: &str, source: &str) -> IngestEvent {
    IngestEvent {
        digest,
        event: kind.into(),
        at: String::new(),
        source: source.into(),
        host: "host".into(),
        user: "user".into(),
        tool_version: "0.0.0".into(),
        new_objects: 2,
        reused_objects: 0,
    }
}

fn view(path: &str, digest: ManifestDigest) -> ViewRow {
    ViewRow {
        path: path.into(),
        digest,
        kind: ViewKind::Checkout,
        method: "hardlink".into(),
        linked: 2,
        copied: 0,
        created_at: String::new(),
        root_id: Some((7, 42)),
    }
}

/// Records an ingest of `m` at `version` from `source`.
fn ingest(cat: &mut Catalogue, m: &Manifest, version: &str, source: &str) -> RecordedIngest {
    cat.record_ingest(
        &snap(m, version),
        None,
        &event(m.digest, "ingest", source),
        &[],
        Default::default(),
    )
    .unwrap()
}

fn fresh(dir: &Path) -> Catalogue {
    Catalogue::open(&dir.join("catalogue.sqlite"), || Ok(false)).unwrap()
}

/// The kinds of a snapshot's events, oldest first.
fn kinds(cat: &Catalogue, d: &ManifestDigest) -> Vec<String> {
    cat.ingests(Some(d))
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect()
}

/// The sorted names in a directory.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn remote_blobs_keep_the_last_repository_per_registry_and_blob() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let (x, y) = (ObjectId::of(b"x"), ObjectId::of(b"y"));
    assert!(cat.remote_blobs("reg:5000").unwrap().is_empty());
    cat.record_remote_blobs("reg:5000", "a/one", &[x, y])
        .unwrap();
    cat.record_remote_blobs("reg:5000", "a/two", &[y]).unwrap();
    cat.record_remote_blobs("other", "a/one", &[x]).unwrap();
    let found = cat.remote_blobs("reg:5000").unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[&x], "a/one");
    assert_eq!(found[&y], "a/two");
    assert_eq!(cat.remote_blobs("other").unwrap().len(), 1);
    assert!(cat.remote_blobs("nowhere").unwrap().is_empty());
}

#[test]
fn a_new_catalogue_is_created_at_the_current_schema_and_reopens() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("catalogue.sqlite");
    let asked = Cell::new(0);
    let cat = Catalogue::open(&path, || {
        asked.set(asked.get() + 1);
        Ok(false)
    })
    .unwrap();
    assert_eq!(
        asked.get(),
        1,
        "a missing catalogue asks whether data exists"
    );
    assert_eq!(cat.path(), path);
    assert!(cat.snapshots(None, None).unwrap().is_empty());
    let other = Connection::open(&path).unwrap();
    assert_eq!(
        Catalogue::user_version(&other).unwrap(),
        SCHEMA_VERSION,
        "every migration is applied"
    );
    let mode: String = other
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(other);
    drop(cat);
    // A catalogue with a schema is opened without asking.
    let again = Catalogue::open(&path, || -> Result<bool> {
        panic!("holds_data must not be asked of a sound catalogue")
    })
    .unwrap();
    assert!(again.integrity_problems().unwrap().is_empty());
}

#[test]
fn a_new_snapshot_records_rows_origin_event_and_repairs_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    let mut new = snap(&m, "1.0.0");
    new.first_ingested_at = Some("2020-01-02T03:04:05.000Z");
    let origin = Origin {
        at: "2019-12-31T00:00:00.000Z".into(),
        host: "far".into(),
        user: "someone".into(),
        source: "/src/a".into(),
        tool_version: "0.0.1".into(),
    };
    let repair = event(m.digest, "repair", "/src/a");
    let done = cat
        .record_ingest(
            &new,
            Some(&origin.event(m.digest)),
            &event(m.digest, "ingest", "/here"),
            std::slice::from_ref(&repair),
            Default::default(),
        )
        .unwrap();
    assert!(done.new_snapshot);
    assert_eq!(kinds(&cat, &m.digest), ["origin", "ingest", "repair"]);
    let other = Connection::open(cat.path()).unwrap();
    let (kind, source): (String, String) = other
        .query_row(
            "SELECT event, source FROM ingests WHERE id = ?1",
            [done.event_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((kind.as_str(), source.as_str()), ("ingest", "/here"));

    let row = cat.snapshot(&m.digest).unwrap();
    assert_eq!(row.name, "plug");
    assert_eq!(row.version, "1.0.0");
    assert_eq!(row.file_count, 2);
    assert_eq!(row.total_bytes, m.total_bytes() as i64);
    // The earliest of the row's time and its events': the origin's.
    assert_eq!(row.first_ingested_at, "2019-12-31T00:00:00.000Z");
    let written: String = other
        .query_row("SELECT first_ingested_at FROM snapshots", [], |r| r.get(0))
        .unwrap();
    assert_eq!(written, "2020-01-02T03:04:05.000Z");
    assert_eq!(cat.manifest_bytes(&m.digest).unwrap(), m.bytes);
    assert_eq!(cat.files(&m.digest).unwrap(), m.entries);
    assert_eq!(cat.origin(&m.digest).unwrap(), Some(origin));
    let live = cat.live_objects().unwrap();
    assert_eq!(live.len(), 2);
    assert!(m.entries.iter().all(|e| live.contains(&e.key())));
}

#[test]
fn a_repeat_ingest_records_only_its_event() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    let first = cat
        .record_ingest(
            &snap(&m, "1.0.0"),
            None,
            &event(m.digest, "ingest", "/one"),
            &[],
            Default::default(),
        )
        .unwrap();
    let origin = event(m.digest, "origin", "/elsewhere");
    // A repeat under another version keeps the first row as it was.
    let second = cat
        .record_ingest(
            &snap(&m, "9.9.9"),
            Some(&origin),
            &event(m.digest, "ingest", "/two"),
            &[event(m.digest, "repair", "/two")],
            Default::default(),
        )
        .unwrap();
    assert!(first.new_snapshot);
    assert!(!second.new_snapshot);
    assert!(second.event_id > first.event_id);
    assert_eq!(kinds(&cat, &m.digest), ["ingest", "ingest", "repair"]);
    assert_eq!(cat.snapshot(&m.digest).unwrap().version, "1.0.0");
    assert_eq!(cat.snapshots(None, None).unwrap().len(), 1);
    assert_eq!(cat.files(&m.digest).unwrap().len(), 2);
    assert_eq!(cat.origin(&m.digest).unwrap().unwrap().source, "/one");
    let (first_at, last_at, count) = cat.ingest_summary(&m.digest).unwrap();
    assert_eq!(count, 3);
    assert!(first_at.is_some() && first_at <= last_at);
}

#[test]
fn a_snapshot_is_named_by_digest_prefix_or_version() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let (one, two, three) = (manifest("one"), manifest("two"), manifest("three"));
    ingest(&mut cat, &one, "1.0.0", "/one");
    ingest(&mut cat, &two, "2.0.0", "/two");
    ingest(&mut cat, &three, "2.0.0", "/three");
    let hex = one.digest.to_hex();
    for name in [hex.as_str(), &hex[..12], "@1.0.0"] {
        assert_eq!(resolve(&cat, name).unwrap(), one.digest, "{name}");
    }
    assert_eq!(
        resolve(&cat, &hex.to_uppercase()[..12]).unwrap(),
        one.digest
    );
    // Fewer than four hex digits, an empty version, not hex: usage errors.
    for name in [&hex[..3], "", "@", "xyz!"] {
        let err = resolve(&cat, name).unwrap_err();
        assert_eq!(err.error_kind(), ErrorKind::Usage, "{name}: {err}");
    }
    assert!(resolve(&cat, &hex[..2])
        .unwrap_err()
        .to_string()
        .contains("at least 4"));
    let err = resolve(&cat, "@9.9.9").unwrap_err();
    assert_eq!(err.error_kind(), ErrorKind::UnknownDigest);
    assert!(err.to_string().contains("9.9.9"), "{err}");
    // Two snapshots of 2.0.0: each listed with its version and ingest time.
    let err = resolve(&cat, "@2.0.0").unwrap_err();
    let Error::AmbiguousDigest { name, matches } = &err else {
        panic!("not ambiguous: {err}");
    };
    assert_eq!(name, "@2.0.0");
    let mut digests: Vec<ManifestDigest> = matches.iter().map(|c| c.manifest_digest).collect();
    let mut both = [two.digest, three.digest];
    digests.sort_by_key(ManifestDigest::to_hex);
    both.sort_by_key(ManifestDigest::to_hex);
    assert_eq!(digests, both);
    for c in matches {
        assert_eq!(c.version, "2.0.0");
        assert!(c.ingested_at.ends_with('Z'), "{c:?}");
        assert!(err.to_string().contains(&c.ingested_at), "{err}");
    }
}

#[test]
fn undo_forgets_a_snapshot_only_its_own_ingest_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    let done = ingest(&mut cat, &m, "1", "/");
    let called = Cell::new(false);
    let gone = cat
        .undo_ingest(&m.digest, &done, || {
            called.set(true);
            Ok(())
        })
        .unwrap();
    assert!(gone);
    assert!(called.get());
    assert!(!cat.has_snapshot(&m.digest).unwrap());
    assert!(cat.ingests(None).unwrap().is_empty());
    assert!(cat.files(&m.digest).unwrap().is_empty(), "file rows go too");
}

#[test]
fn undo_keeps_a_snapshot_something_else_uses() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let never = || -> Result<()> { panic!("forget must not run while the snapshot stays") };

    // A repeat ingest did not record the snapshot.
    let m = manifest("a");
    ingest(&mut cat, &m, "1", "/1");
    let repeat = ingest(&mut cat, &m, "1", "/2");
    assert!(!cat.undo_ingest(&m.digest, &repeat, never).unwrap());
    assert!(cat.has_snapshot(&m.digest).unwrap());
    let left = cat.ingests(Some(&m.digest)).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].source, "/1", "only the undone event goes");

    // Another ingest of it was recorded meanwhile.
    let b = manifest("b");
    let first = ingest(&mut cat, &b, "1", "/1");
    ingest(&mut cat, &b, "1", "/2");
    assert!(!cat.undo_ingest(&b.digest, &first, never).unwrap());
    assert!(cat.has_snapshot(&b.digest).unwrap());
    assert_eq!(cat.ingests(Some(&b.digest)).unwrap()[0].source, "/2");

    // A view of it was recorded meanwhile.
    let c = manifest("c");
    let done = ingest(&mut cat, &c, "1", "/");
    cat.add_view(&view("/views/c", c.digest)).unwrap();
    assert!(!cat.undo_ingest(&c.digest, &done, never).unwrap());
    assert!(cat.has_snapshot(&c.digest).unwrap());
    assert!(cat.ingests(Some(&c.digest)).unwrap().is_empty());
}

#[test]
fn a_failing_forget_leaves_the_ingest_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    let done = ingest(&mut cat, &m, "1", "/");
    let err = cat
        .undo_ingest(&m.digest, &done, || Err(Error::Integrity("no".into())))
        .unwrap_err();
    assert!(matches!(err, Error::Integrity(ref s) if s == "no"));
    // The deletions ran in the transaction `forget` failed inside.
    assert!(cat.has_snapshot(&m.digest).unwrap());
    assert_eq!(kinds(&cat, &m.digest), ["ingest"]);
    assert_eq!(cat.files(&m.digest).unwrap(), m.entries);
}

#[test]
fn add_view_records_a_view_of_a_recorded_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    ingest(&mut cat, &m, "1.2", "/");
    let row = cat.add_view(&view("/v/one", m.digest)).unwrap();
    assert_eq!((row.digest, row.version.as_str()), (m.digest, "1.2"));
    let got = cat.view("/v/one").unwrap().unwrap();
    assert_eq!(got.digest, m.digest);
    assert_eq!(got.root_id, Some((7, 42)));
    assert!(!got.created_at.is_empty());
    assert!(cat.remove_view("/v/one").unwrap());
    assert!(!cat.remove_view("/v/one").unwrap());
    assert!(cat.view("/v/one").unwrap().is_none());
}

#[test]
fn add_view_of_a_forgotten_snapshot_is_a_conflict_and_records_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    ingest(&mut cat, &m, "1", "/");
    cat.remove_snapshot(&m.digest, false, || Ok(())).unwrap();
    let err = cat.add_view(&view("/v/late", m.digest)).unwrap_err();
    assert!(
        matches!(err, Error::Clash(crate::error::Clash::SnapshotRemoved { ref digest, ref view })
            if view == "/v/late" && *digest == m.digest),
        "{err}"
    );
    assert!(cat.views(None).unwrap().is_empty());
    assert!(cat.view("/v/late").unwrap().is_none());
}

#[test]
fn remove_snapshot_refuses_while_views_exist_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    let keep = manifest("b");
    for s in [&m, &keep] {
        ingest(&mut cat, s, "1", "/");
    }
    cat.add_view(&view("/v/b", m.digest)).unwrap();
    cat.add_view(&view("/v/a", m.digest)).unwrap();
    cat.add_view(&view("/v/other", keep.digest)).unwrap();

    let called = Cell::new(false);
    let err = cat
        .remove_snapshot(&m.digest, false, || {
            called.set(true);
            Ok(())
        })
        .unwrap_err();
    assert!(
        matches!(err, Error::Misuse(Misuse::SnapshotHasViews { ref views, .. }) if views == &["/v/a", "/v/b"]),
        "{err}"
    );
    assert!(!called.get());
    assert!(cat.has_snapshot(&m.digest).unwrap());
    assert_eq!(cat.views(Some(&m.digest)).unwrap().len(), 2);

    // A failing closure takes the whole removal back.
    let err = cat
        .remove_snapshot(&m.digest, true, || Err(Error::Integrity("stop".into())))
        .unwrap_err();
    assert!(matches!(err, Error::Integrity(_)));
    assert!(cat.has_snapshot(&m.digest).unwrap());
    assert_eq!(cat.views(Some(&m.digest)).unwrap().len(), 2);

    let forgotten = cat
        .remove_snapshot(&m.digest, true, || {
            called.set(true);
            Ok(())
        })
        .unwrap();
    assert!(called.get());
    assert_eq!(
        forgotten,
        [
            ("/v/a".to_string(), ViewKind::Checkout),
            ("/v/b".to_string(), ViewKind::Checkout)
        ]
    );
    assert!(!cat.has_snapshot(&m.digest).unwrap());
    assert!(cat.files(&m.digest).unwrap().is_empty());
    assert!(cat.views(Some(&m.digest)).unwrap().is_empty());
    // The other snapshot, its view, and the history stay.
    assert!(cat.has_snapshot(&keep.digest).unwrap());
    assert_eq!(cat.views(None).unwrap().len(), 1);
    assert_eq!(kinds(&cat, &m.digest), ["ingest"]);
    let live = cat.live_objects().unwrap();
    assert!(live.contains(&keep.entries[0].key()));
    assert!(!live.contains(&m.entries[0].key()));

    let err = cat.remove_snapshot(&m.digest, true, || panic!("nothing to forget"));
    assert!(matches!(err, Err(Error::UnknownDigest { .. })));
}

#[test]
fn a_shared_view_alone_never_keeps_its_snapshot_from_being_forgotten() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    ingest(&mut cat, &m, "1", "/");
    let shared = ViewRow {
        kind: ViewKind::Shared,
        ..view("/s/views/a", m.digest)
    };
    cat.add_view(&shared).unwrap();
    cat.add_view(&view("/v/a", m.digest)).unwrap();
    // A checkout is in the way, and is the only view the refusal names.
    let err = cat
        .remove_snapshot(&m.digest, false, || Ok(()))
        .unwrap_err();
    assert!(
        matches!(err, Error::Misuse(Misuse::SnapshotHasViews { ref views, .. }) if views == &["/v/a"]),
        "{err}"
    );
    cat.remove_view("/v/a").unwrap();
    let forgotten = cat.remove_snapshot(&m.digest, false, || Ok(())).unwrap();
    assert_eq!(forgotten, [("/s/views/a".to_string(), ViewKind::Shared)]);
    assert!(!cat.has_snapshot(&m.digest).unwrap());
    assert!(cat.views(None).unwrap().is_empty());
}

#[test]
fn rows_match_notices_damaged_rows_and_rewrite_rows_mends_them() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    ingest(&mut cat, &m, "1.0", "/");
    assert!(cat.rows_match(&m));
    assert!(!cat.rows_match(&manifest("unrecorded")));

    let other = Connection::open(cat.path()).unwrap();
    let damages = [
        "UPDATE entries SET size = size + 1 WHERE id = (SELECT max(id) FROM entries)",
        "DELETE FROM entries WHERE id = (SELECT min(id) FROM entries)",
        "UPDATE snapshot_files SET entry_ids = X'00'",
        "UPDATE manifests SET kept = X'00'",
        "UPDATE snapshots SET total_bytes = 1",
        "UPDATE snapshots SET file_count = 5",
    ];
    for damage in damages {
        other.execute_batch(damage).unwrap();
        assert!(!cat.rows_match(&m), "unnoticed: {damage}");
        cat.rewrite_rows(&m).unwrap();
        assert!(cat.rows_match(&m), "not mended: {damage}");
    }
    let row = cat.snapshot(&m.digest).unwrap();
    assert_eq!((row.name.as_str(), row.version.as_str()), ("plug", "1.0"));
    assert_eq!(kinds(&cat, &m.digest), ["ingest"]);
    assert!(matches!(
        cat.rewrite_rows(&manifest("unrecorded")),
        Err(Error::Catalogue { .. })
    ));
}

#[test]
fn origin_is_the_earliest_ingest_or_origin_event() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let m = manifest("a");
    assert_eq!(cat.origin(&m.digest).unwrap(), None);
    let mut recovered = event(m.digest, "recovered", "/recovered");
    recovered.at = "2000-01-01T00:00:00.000Z".into();
    cat.record_ingest(&snap(&m, "1"), None, &recovered, &[], Default::default())
        .unwrap();
    assert_eq!(
        cat.origin(&m.digest).unwrap(),
        None,
        "recovery is no origin"
    );
    let mut first = event(m.digest, "ingest", "/first");
    first.at = "2001-01-01T00:00:00.000Z".into();
    cat.record_ingest(&snap(&m, "1"), None, &first, &[], Default::default())
        .unwrap();
    cat.record_ingest(
        &snap(&m, "1"),
        None,
        &event(m.digest, "ingest", "/later"),
        &[],
        Default::default(),
    )
    .unwrap();
    let origin = cat.origin(&m.digest).unwrap().unwrap();
    assert_eq!(origin.source, "/first");
    assert_eq!(origin.at, "2001-01-01T00:00:00.000Z");
    assert_eq!(
        (origin.host.as_str(), origin.user.as_str()),
        ("host", "user")
    );
}

/// How many snapshots the main file alone holds, once its log is gone.
fn snapshots_without_log(path: &Path) -> Option<i64> {
    for ext in ["-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(ext);
        let _ = std::fs::remove_file(p);
    }
    let conn = Connection::open(path).unwrap();
    conn.query_row("SELECT count(*) FROM snapshots", [], |r| r.get(0))
        .ok()
}

#[test]
fn checkpoint_leaves_the_rows_in_the_main_file() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manifest("a");
    let folded = tmp.path().join("folded");
    let kept = tmp.path().join("kept");
    for (dir, fold) in [(&folded, true), (&kept, false)] {
        std::fs::create_dir(dir).unwrap();
        let mut cat = fresh(dir);
        ingest(&mut cat, &m, "1", "/");
        if fold {
            cat.checkpoint_after(super::Work::Rebuilt).unwrap();
        }
    }
    assert_eq!(
        snapshots_without_log(&folded.join("catalogue.sqlite")),
        Some(1)
    );
    // Without the checkpoint the rows lived in the log only.
    assert_ne!(
        snapshots_without_log(&kept.join("catalogue.sqlite")),
        Some(1)
    );
}

/// Opening `path` while the store holds data is refused as lost, with
/// `reason`, and leaves the directory as it was.
fn assert_lost(dir: &Path, path: &Path, reason: &str) {
    let before = std::fs::read(path).ok();
    let names = listing(dir);
    let err = Catalogue::open(path, || Ok(true)).err().unwrap();
    match &err {
        Error::CatalogueLost { path: p, reason: r } => {
            assert_eq!(p, path);
            assert!(r.contains(reason), "{r}");
        }
        other => panic!("not CatalogueLost: {other}"),
    }
    assert_eq!(std::fs::read(path).ok(), before, "the file changed");
    assert_eq!(listing(dir), names, "files appeared or went");
}

#[test]
fn a_lost_catalogue_is_refused_when_the_store_holds_data() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = dir.join("catalogue.sqlite");

    assert_lost(dir, &path, "is missing");
    assert!(!path.exists());

    std::fs::write(&path, b"").unwrap();
    assert_lost(dir, &path, "is empty");

    std::fs::write(&path, b"these are not the bytes of a database\n").unwrap();
    assert_lost(dir, &path, "is not an SQLite database");

    std::fs::remove_file(&path).unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE unrelated (x)").unwrap();
    drop(conn);
    assert_lost(dir, &path, "holds no schema");

    // The same files are taken as new when the store holds nothing.
    let cat = Catalogue::open(&path, || Ok(false)).unwrap();
    assert!(cat.snapshots(None, None).unwrap().is_empty());
}

#[test]
fn an_error_from_holds_data_is_returned_and_nothing_is_made() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("catalogue.sqlite");
    let err = Catalogue::open(&path, || Err(Error::Integrity("cannot tell".into())))
        .err()
        .unwrap();
    assert!(matches!(err, Error::Integrity(ref s) if s == "cannot tell"));
    assert!(listing(tmp.path()).is_empty());
}

#[test]
fn a_damaged_or_newer_schema_version_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    for (version, name) in [(-1, "negative"), (SCHEMA_VERSION + 1, "newer")] {
        let path = tmp.path().join(name);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
        conn.pragma_update(None, "user_version", version).unwrap();
        drop(conn);
        let before = std::fs::read(&path).unwrap();
        let names = listing(tmp.path());
        // Refused whatever holds_data would say.
        let err = Catalogue::open(&path, || Ok(false)).err().unwrap();
        match (version, &err) {
            (-1, Error::CatalogueLost { reason, .. }) => {
                assert!(reason.contains("damaged schema version (-1)"), "{reason}")
            }
            (
                _,
                Error::CatalogueTooNew {
                    found, supported, ..
                },
            ) if version > 0 => {
                assert_eq!((*found, *supported), (version, SCHEMA_VERSION))
            }
            _ => panic!("wrong refusal of version {version}: {err}"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(listing(tmp.path()), names);
    }
}

/// The tree kinds' rows: their profile, a dependency list's content digest
/// (found again by it), and a task's names, which keep its tree and
/// dependency list from being forgotten while it is recorded.
#[test]
fn tree_kinds_are_recorded_with_their_profile_and_a_task_keeps_its_parts() {
    use crate::profile::tree::stored::TaskRecord;
    use crate::profile::tree::{dependency_digests, manifest_digest, Dependency, TreeEntry};
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let entries = vec![
        TreeEntry::directory("a"),
        TreeEntry::file_of("a/x", b"x", 0),
    ];
    let deps = vec![Dependency {
        source: "node_modules".into(),
        target: "node_modules".into(),
        entries: vec![TreeEntry::file_of("payload", b"#!\n", 0o755)],
    }];
    let tree = Manifest::tree(entries.clone());
    let list = Manifest::dependencies(deps.clone());
    let task = Manifest::task(TaskRecord {
        declarations: vec!["a".into()],
        repo_identity: "/r".into(),
        resolved_sha: "unbound".into(),
        harness_identity: None,
        manifest_digest: manifest_digest(&entries),
        dependencies: dependency_digests(&deps),
    });
    let ce = manifest("ce");
    for m in [&ce, &tree, &list, &task] {
        ingest(&mut cat, m, "", "/src");
        assert_eq!(cat.snapshot(&m.digest).unwrap().profile, m.profile());
    }
    assert_eq!(cat.snapshot(&ce.digest).unwrap().profile, "ce");
    assert_eq!(cat.files(&list.digest).unwrap(), list.entries);
    let content: String = cat
        .conn
        .query_row(
            "SELECT content_digest FROM snapshots WHERE digest = ?1",
            [list.digest.to_hex()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(content, dependency_digests(&deps).content.to_hex());
    for part in [tree.digest, list.digest] {
        let err = cat.remove_snapshot(&part, false, || Ok(())).unwrap_err();
        assert!(
            matches!(&err, Error::Misuse(Misuse::SnapshotNamedByTask { tasks, .. }) if tasks == &[task.digest]),
            "{err:?}"
        );
        assert_eq!(err.error_kind(), ErrorKind::Conflict);
        assert!(cat.has_snapshot(&part).unwrap());
    }
    cat.remove_snapshot(&task.digest, false, || Ok(())).unwrap();
    cat.remove_snapshot(&tree.digest, false, || Ok(())).unwrap();
    cat.remove_snapshot(&list.digest, false, || Ok(())).unwrap();
}

/// A catalogue of schema 8 (before environments) is migrated in place: its
/// rows stay, the profile check admits `environment`, every connection
/// reads the new definition, and an environment's row names its members,
/// which `rm` then refuses to forget.
#[test]
fn a_catalogue_before_environments_is_migrated_and_records_one() {
    use crate::profile::tree::stored::{Kind, Stored};
    use crate::profile::tree::EnvironmentMember;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("catalogue.sqlite");
    let ce = manifest("old");
    {
        let conn = Connection::open(&path).unwrap();
        for (_, sql) in &MIGRATIONS[..8] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 8).unwrap();
        let insert = |profile: &str, digest: &ManifestDigest| {
            conn.execute(
                "INSERT INTO snapshots (digest, name, version, schema_version, file_count,
                 total_bytes, manifest, first_ingested_at, profile)
                 VALUES (?1, 'n', '', 1, 0, 0, x'', '2026-01-01T00:00:00.000Z', ?2)",
                rusqlite::params![digest.to_hex(), profile],
            )
        };
        insert("ce", &ce.digest).unwrap();
        // Schema 8 refuses the profile.
        assert!(insert("environment", &ManifestDigest::from_bytes([7; 32])).is_err());
    }
    let mut cat = Catalogue::open(&path, || Ok(true)).unwrap();
    assert_eq!(Catalogue::user_version(&cat.conn).unwrap(), SCHEMA_VERSION);
    assert_eq!(cat.kind_of(&ce.digest), Some(Kind::Ce));
    let env = Manifest::stored(Stored::Environment(vec![EnvironmentMember {
        role: "ce_plugin_manifest_digest".into(),
        digest: ce.digest,
        kind: Kind::Ce,
    }]));
    ingest(&mut cat, &env, "", "/src");
    assert_eq!(cat.kind_of(&env.digest), Some(Kind::Environment));
    let err = cat
        .remove_snapshot(&ce.digest, false, || Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("1 recorded environment"), "{err}");
    assert_eq!(err.error_kind(), ErrorKind::Conflict);
    let ok: String = cat
        .conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    drop(cat);
    // Another connection reads the new definition.
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE snapshots SET profile = 'environment' WHERE digest = ?1",
        [ce.digest.to_hex()],
    )
    .unwrap();
    assert!(conn
        .execute(
            "UPDATE snapshots SET profile = 'other' WHERE digest = ?1",
            [ce.digest.to_hex()],
        )
        .is_err());
}

/// A snapshot naming another is recorded only while that one is, checked
/// in the recording transaction itself: an `rm` of a member just before an
/// environment is recorded leaves no environment naming what is gone.
#[test]
fn a_snapshot_naming_one_not_recorded_is_not_recorded() {
    use crate::profile::tree::stored::{Kind, Stored};
    use crate::profile::tree::EnvironmentMember;
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let ce = manifest("gone");
    let env = Manifest::stored(Stored::Environment(vec![EnvironmentMember {
        role: "ce_plugin_manifest_digest".into(),
        digest: ce.digest,
        kind: Kind::Ce,
    }]));
    let err = cat
        .record_ingest(
            &snap(&env, ""),
            None,
            &event(env.digest, "ingest", "/src"),
            &[],
            Attached::default(),
        )
        .unwrap_err();
    assert_eq!(err.error_kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains(&ce.digest.to_string()), "{err}");
    assert!(!cat.has_snapshot(&env.digest).unwrap());
    ingest(&mut cat, &ce, "1", "/src");
    ingest(&mut cat, &env, "", "/src");
    assert!(cat.has_snapshot(&env.digest).unwrap());
}

#[test]
fn a_path_search_reads_a_range_and_finds_exactly_what_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut cat = fresh(dir.path());
    let paths = [
        "p", "p/x", "p/y/z", "p.x", "p0", "pa", "q/p", "é", "é/x", "ê",
    ];
    let m = Manifest::new(
        paths
            .iter()
            .map(|p| entry(p, p.as_bytes(), false))
            .collect(),
    );
    ingest(&mut cat, &m, "1.0.0", "/src");
    let found = |filter: FileFilter<'_>| -> Vec<String> {
        let mut out: Vec<String> = cat
            .files_matching(&filter)
            .unwrap()
            .into_iter()
            .map(|h| h.entry.path)
            .collect();
        out.sort();
        out
    };
    assert_eq!(found(FileFilter::PathOrUnder("p")), ["p", "p/x", "p/y/z"]);
    assert_eq!(found(FileFilter::PathOrUnder("p/y")), ["p/y/z"]);
    assert_eq!(found(FileFilter::PathOrUnder("é")), ["é", "é/x"]);
    assert_eq!(
        found(FileFilter::PathStartsWith("p")),
        ["p", "p.x", "p/x", "p/y/z", "p0", "pa"]
    );
    assert_eq!(found(FileFilter::PathStartsWith("é")), ["é", "é/x"]);
    assert_eq!(found(FileFilter::PathStartsWith("")).len(), paths.len());
    assert_eq!(files::successor("ab").as_deref(), Some("ac"));
    assert_eq!(files::successor("a/").as_deref(), Some("a0"));
    assert_eq!(files::successor("\u{D7FF}").as_deref(), Some("\u{E000}"));
    assert_eq!(files::successor(""), None);
    assert_eq!(files::successor("a\u{10FFFF}"), None);
}

/// Two manifests sharing their first file (`lib/shared.js`).
fn sharing(tag: &str) -> Manifest {
    Manifest::new(vec![
        entry("lib/shared.js", b"shared\n", false),
        entry(&format!("lib/{tag}.js"), tag.as_bytes(), false),
    ])
}

fn count(cat: &Catalogue, table: &str) -> i64 {
    cat.conn
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// A catalogue of schema 10 (a row per file of each snapshot, each
/// manifest in its snapshot's row) is migrated: every snapshot's files,
/// manifest and sums read back as they were, a file two snapshots list is
/// one row, and the old table and column are gone.
#[test]
fn a_catalogue_with_a_row_per_file_is_migrated_to_shared_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("catalogue.sqlite");
    let (a, b) = (sharing("a"), sharing("b"));
    {
        let conn = Connection::open(&path).unwrap();
        for (_, sql) in &MIGRATIONS[..10] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 10).unwrap();
        for (i, m) in [&a, &b].into_iter().enumerate() {
            conn.execute(
                "INSERT INTO snapshots (digest, name, version, schema_version, file_count,
                 total_bytes, manifest, first_ingested_at, profile)
                 VALUES (?1, 'plug', ?2, 1, ?3, ?4, ?5, '2026-01-01T00:00:00.000Z', 'ce')",
                rusqlite::params![
                    m.digest.to_hex(),
                    i.to_string(),
                    m.entries.len() as i64,
                    m.total_bytes() as i64,
                    m.bytes
                ],
            )
            .unwrap();
            let id = conn.last_insert_rowid();
            for (seq, e) in m.entries.iter().enumerate() {
                conn.execute(
                    "INSERT INTO files (snapshot_id, seq, path, sha256, size, executable)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    rusqlite::params![
                        id,
                        seq as i64,
                        e.path,
                        e.sha256.to_hex(),
                        e.size as i64,
                        e.executable
                    ],
                )
                .unwrap();
            }
        }
    }
    let cat = Catalogue::open(&path, || Ok(true)).unwrap();
    assert_eq!(Catalogue::user_version(&cat.conn).unwrap(), SCHEMA_VERSION);
    for m in [&a, &b] {
        assert_eq!(cat.files(&m.digest).unwrap(), m.entries);
        assert_eq!(cat.manifest_bytes(&m.digest).unwrap(), m.bytes);
        assert!(cat.rows_match(m));
    }
    assert_eq!(count(&cat, "entries"), 3);
    assert!(cat.conn.prepare("SELECT 1 FROM files").is_err());
    assert!(cat.conn.prepare("SELECT manifest FROM snapshots").is_err());
    assert_eq!(cat.integrity_problems().unwrap(), Vec::<String>::new());
}

/// A file listed by several snapshots is one row, found for each, and goes
/// with the last snapshot that lists it; the live objects go with it.
#[test]
fn a_file_row_is_shared_and_forgotten_with_the_last_snapshot_listing_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let (a, b) = (sharing("a"), sharing("b"));
    ingest(&mut cat, &a, "1", "/a");
    ingest(&mut cat, &b, "2", "/b");
    assert_eq!(count(&cat, "entries"), 3);
    let shared = a.entries[0].sha256;
    let hits = cat.files_matching(&FileFilter::Object(shared)).unwrap();
    let found: Vec<_> = hits
        .iter()
        .map(|h| (h.digest, h.entry.path.as_str()))
        .collect();
    assert_eq!(
        found,
        [(a.digest, "lib/shared.js"), (b.digest, "lib/shared.js")]
    );
    let under = cat.files_matching(&FileFilter::PathOrUnder("lib")).unwrap();
    assert_eq!(under.len(), 4);

    cat.remove_snapshot(&a.digest, false, || Ok(())).unwrap();
    assert_eq!(count(&cat, "entries"), 2);
    assert_eq!(cat.files(&b.digest).unwrap(), b.entries);
    let live = cat.live_objects().unwrap();
    assert!(!live.contains(&a.entries[1].key()));
    assert!(live.contains(&b.entries[0].key()) && live.contains(&b.entries[1].key()));
    cat.remove_snapshot(&b.digest, false, || Ok(())).unwrap();
    assert_eq!(count(&cat, "entries"), 0);
    assert!(cat.live_objects().unwrap().is_empty());
}

/// A file list's ids round-trip, whatever their order and size, and a
/// damaged list is refused rather than read short.
#[test]
fn an_id_list_round_trips_and_a_damaged_one_is_refused() {
    use super::files::{decode_ids, encode_ids};
    for ids in [
        vec![],
        vec![1, 2, 3, 4, 5],
        vec![i64::MAX, 1, i64::MIN, 0, -5, 300, 299],
        (1..20_000).chain(5..9).collect(),
    ] {
        assert_eq!(decode_ids(&encode_ids(&ids)).unwrap(), ids);
    }
    let run: Vec<i64> = (1..12_646).collect();
    assert!(encode_ids(&run).len() < 64, "{}", encode_ids(&run).len());
    assert!(decode_ids(b"not zstd").is_err());
    let cut = zstd::bulk::compress(&[0x80], 3).unwrap();
    assert!(decode_ids(&cut).is_err());
}

/// A manifest is recorded as its delta while its base is recorded and its
/// chain short; when the base is forgotten it is kept whole, and reads the
/// same bytes throughout.
#[test]
fn a_delta_is_kept_whole_once_its_base_is_forgotten() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let (a, b, c) = (manifest("a"), manifest("b"), manifest("c"));
    ingest(&mut cat, &a, "1", "/a");
    let as_delta = |cat: &mut Catalogue, m: &Manifest, base: &Manifest, version: &str| {
        let kept = kept::delta(&base.digest, &base.bytes, &m.bytes);
        cat.record_ingest(
            &NewSnapshot {
                delta: Some(Delta {
                    base: base.digest,
                    kept: &kept,
                }),
                ..snap(m, version)
            },
            None,
            &event(m.digest, "ingest", "/"),
            &[],
            Default::default(),
        )
        .unwrap();
    };
    as_delta(&mut cat, &b, &a, "2");
    as_delta(&mut cat, &c, &b, "3");
    assert_eq!(
        cat.manifest_base(&b.digest).unwrap(),
        Some((Some(a.digest), 1))
    );
    assert_eq!(
        cat.manifest_base(&c.digest).unwrap(),
        Some((Some(b.digest), 2))
    );
    assert_eq!(cat.manifest_bytes(&c.digest).unwrap(), c.bytes);
    assert_eq!(cat.delta_base("plug", "ce").unwrap(), Some(c.digest));

    cat.remove_snapshot(&b.digest, false, || Ok(())).unwrap();
    assert_eq!(cat.manifest_base(&c.digest).unwrap(), Some((None, 0)));
    assert_eq!(cat.manifest_bytes(&c.digest).unwrap(), c.bytes);
    assert!(cat.rows_match(&c) && cat.rows_match(&a));

    // A delta against a snapshot no longer recorded is kept whole.
    let d = manifest("d");
    as_delta(&mut cat, &d, &b, "4");
    assert_eq!(cat.manifest_base(&d.digest).unwrap(), Some((None, 0)));
    assert_eq!(cat.manifest_bytes(&d.digest).unwrap(), d.bytes);

    // A chain as long as any is kept no longer.
    cat.conn
        .execute("UPDATE manifests SET depth = ?1", [kept::MAX_DEPTH])
        .unwrap();
    assert_eq!(cat.delta_base("plug", "ce").unwrap(), None);
}

/// A file row's id is never given again once its row is forgotten: a list
/// read while its snapshot goes never names another snapshot's file.
#[test]
fn a_forgotten_file_rows_id_is_never_given_again() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cat = fresh(tmp.path());
    let (a, b, c) = (sharing("a"), sharing("b"), sharing("c"));
    ingest(&mut cat, &a, "1", "/a");
    ingest(&mut cat, &b, "2", "/b");
    let top: i64 = cat
        .conn
        .query_row("SELECT max(id) FROM entries", [], |r| r.get(0))
        .unwrap();
    cat.remove_snapshot(&b.digest, false, || Ok(())).unwrap();
    ingest(&mut cat, &c, "3", "/c");
    let new: i64 = cat
        .conn
        .query_row("SELECT id FROM entries WHERE path = 'lib/c.js'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(new > top, "{new} reuses an id up to {top}");
    assert_eq!(cat.files(&c.digest).unwrap(), c.entries);
}

/// A list that decompresses past its bound is refused before it is
/// decoded: a small row cannot ask for gigabytes.
#[test]
fn an_id_list_past_its_bound_is_refused() {
    use super::files::decode_ids;
    let zeros = vec![0u8; 10 * (1 << 20) + 1];
    let bomb = zstd::bulk::compress(&zeros, 3).unwrap();
    assert!(bomb.len() < 4096, "{}", bomb.len());
    let err = decode_ids(&bomb).unwrap_err();
    assert!(err.contains("more than"), "{err}");
}
