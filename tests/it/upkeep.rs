//! One upkeep plan: what `verify` calls garbage is exactly what `gc`
//! removes, for every kind of finding.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::util::{assert_ok, s, write};

fn garbage_paths(verify: &Value) -> BTreeSet<(String, String)> {
    crate::util::problems(verify)
        .iter()
        .filter(|p| p["severity"] == "garbage")
        .map(|p| {
            (
                p["kind"].as_str().unwrap().to_string(),
                p["path"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn gc_paths(gc: &Value) -> BTreeSet<String> {
    [
        "objects",
        "temporary",
        "spares",
        "manifests",
        "shared_views",
        "stale_view_records",
        "source_records",
        "attestations",
    ]
    .iter()
    .flat_map(|k| gc[*k].as_array().unwrap().iter())
    .map(|p| p.as_str().unwrap().to_string())
    .collect()
}

#[test]
fn verify_and_gc_agree_on_every_kind_of_garbage() {
    let (env, _, d) = crate::util::plugin_store("release", "1.0.0");
    let store = env.store.clone();

    // An orphan object, and a name that is no object's.
    let orphan = store.join("objects/ab").join("c".repeat(62));
    write(&orphan, "nobody's\n");
    let stray = store.join("objects/ab/not-an-object");
    write(&stray, "?\n");
    // A dead work directory naming a half-built view beside it.
    let half = env.path(".view.cestore-tmp-1-2-3");
    write(&half.join("skills/x.md"), "half\n");
    let dead = store.join("tmp/checkout-999999-1");
    write(&dead.join("target"), half.to_str().unwrap());
    // A manifest a dead ingest published and never recorded.
    let (other, _, b) = crate::util::plugin_store("rb", "2.0.0");
    let manifest = store.join("manifests").join(&b[..2]).join(&b);
    fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    fs::copy(
        other.store.join("manifests").join(&b[..2]).join(&b),
        &manifest,
    )
    .unwrap();
    let dead_ingest = store.join("tmp/ingest-999999-2");
    write(&dead_ingest.join("publishing"), format!("manifest {b}\n"));
    // A shared view of an unknown snapshot, and a plain file where the
    // shared view of a recorded one belongs.
    let unknown = store.join("views").join("e".repeat(64));
    write(&unknown.join("skills/x.md"), "x\n");
    let not_dir = store.join("views").join(&d);
    write(&not_dir, "not a directory\n");
    // Spare views kept for a snapshot nothing records.
    let spare = store.join("spare").join("f".repeat(64));
    write(&spare.join("1-2-3/skills/x.md"), "x\n");
    // The record of a view whose directory is gone.
    let gone = env.path("gone");
    assert_ok(&env.run(["checkout", d.as_str(), gone.to_str().unwrap()]));
    crate::util::remove_tree(&gone);
    // Source records of a snapshot neither recorded nor kept as a manifest,
    // and of the abandoned manifest above; those of a recorded one stay.
    let beside = |kind: &str, digest: &str, name: &str| {
        let dir = store.join(kind).join(&digest[..2]).join(digest);
        write(&dir.join(format!("{}.json", name.repeat(64))), "{}\n");
        dir
    };
    let orphan_records = beside("sources", &"a".repeat(64), "b");
    let abandoned_records = beside("sources", &b, "c");
    let kept_records = beside("sources", &d, "d");
    // The same of attestations.
    let orphan_attestations = beside("attestations", &"a".repeat(64), "b");
    let abandoned_attestations = beside("attestations", &b, "c");
    let kept_attestations = beside("attestations", &d, "d");

    let verify = env.json(["verify", "--json"]);
    let claimed = garbage_paths(&verify);
    let kinds: BTreeSet<&str> = claimed.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "leftover-manifest",
            "leftover-temporary",
            "orphan-object",
            "orphan-shared-view",
            "orphan-attestations",
            "orphan-source-records",
            "orphan-spare",
            "stale-view-record",
        ]),
        "{verify:#}"
    );
    let want: BTreeSet<String> = [
        &orphan,
        &stray,
        &half,
        &dead,
        &dead_ingest,
        &manifest,
        &unknown,
        &not_dir,
        &spare,
        &gone,
        &orphan_records,
        &abandoned_records,
        &orphan_attestations,
        &abandoned_attestations,
    ]
    .iter()
    .map(|p| s(p))
    .collect();
    let claimed_paths: BTreeSet<String> = claimed.iter().map(|(_, p)| p.clone()).collect();
    assert_eq!(claimed_paths, want, "{verify:#}");

    // gc --dry-run plans exactly that, and gc does it.
    let dry = env.json(["gc", "--dry-run", "--json"]);
    assert_eq!(gc_paths(&dry), claimed_paths, "{dry:#}");
    let done = env.json(["gc", "--json"]);
    assert_eq!(gc_paths(&done), claimed_paths, "{done:#}");
    for p in &want {
        assert!(
            fs::symlink_metadata(p).is_err() || p == &s(&gone),
            "{p} is still there"
        );
    }
    assert!(kept_records.exists() && kept_attestations.exists());
    let verify = env.json(["verify", "--json"]);
    assert_eq!(garbage_paths(&verify), BTreeSet::new(), "{verify:#}");
    // The shared view that was a plain file is made again.
    let path = env.json(["path", d.as_str(), "--json"]);
    assert!(Path::new(path["path"].as_str().unwrap()).is_dir());
}
