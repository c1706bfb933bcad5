//! Nothing lost: a lost or damaged catalogue never empties the store, views
//! are recorded or removed, concurrent commands never orphan a view, and the
//! store refuses what it cannot trust.
//!
//! The race tests run 20 rounds, and 200 with `CESTORE_STRESS=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::hardening::{scale, tmpfs_or_skip};
use crate::util::{
    self, assert_exit, assert_ok, minimal_store, object_sizes, parse_json, sha_hex, write, TestEnv,
};

/// Two releases ingested and a view checked out: a store after normal use.
struct Used {
    env: TestEnv,
    a: String,
    b: String,
    view: PathBuf,
}

fn used_store() -> Used {
    let (env, ra) = util::with_plugin("ra", "1.0.0");
    write(&ra.join("skills/ce-plan/notes.md"), "a\n".repeat(5000));
    let rb = env.plugin("rb", "1.1.0");
    write(&rb.join("scripts/run.sh"), "#!/bin/sh\necho b\n");
    fs::set_permissions(rb.join("scripts/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let a = env.ingest_digest(&ra, "1.0.0");
    let b = env.ingest_digest(&rb, "1.1.0");
    let view = env.path("view");
    assert_ok(&env.run(["checkout", a.as_str(), view.to_str().unwrap()]));
    Used { env, a, b, view }
}

/// The catalogue's files and the SHA-256 of their bytes.
fn catalogue_files(store: &Path) -> BTreeMap<String, String> {
    ["catalogue.sqlite", "catalogue.sqlite-wal"]
        .iter()
        .filter_map(|n| {
            fs::read(store.join(n))
                .ok()
                .map(|b| (n.to_string(), sha_hex(&b)))
        })
        .collect()
}

/// One kind of damage, named, applied to a store.
type Damage = (String, Box<dyn Fn(&Path)>);

/// The kinds of damage the acceptance names, each applied to a copy.
fn damages() -> Vec<Damage> {
    let mut out: Vec<Damage> = vec![
        (
            "catalogue deleted".into(),
            Box::new(|s: &Path| fs::remove_file(s.join("catalogue.sqlite")).unwrap()),
        ),
        (
            "catalogue emptied".into(),
            Box::new(|s: &Path| fs::write(s.join("catalogue.sqlite"), b"").unwrap()),
        ),
        (
            "wal deleted".into(),
            Box::new(|s: &Path| {
                let _ = fs::remove_file(s.join("catalogue.sqlite-wal"));
            }),
        ),
        (
            "wal replaced with random bytes".into(),
            Box::new(|s: &Path| {
                let bytes: Vec<u8> = (0..300_000u32)
                    .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                    .collect();
                fs::write(s.join("catalogue.sqlite-wal"), bytes).unwrap();
            }),
        ),
    ];
    for i in 0..20u64 {
        out.push((
            format!("byte flipped at offset {}", flip_offset(i)),
            Box::new(move |s: &Path| {
                let p = s.join("catalogue.sqlite");
                let mut b = fs::read(&p).unwrap();
                let at = (flip_offset(i) as usize).min(b.len() - 1);
                b[at] ^= 0xff;
                fs::write(&p, b).unwrap();
            }),
        ));
    }
    out
}

/// The header's fields first (schema cookie, user version, page size), then
/// offsets spread over the pages.
fn flip_offset(i: u64) -> u64 {
    const HEADER: [u64; 8] = [0, 16, 18, 28, 40, 56, 60, 100];
    match HEADER.get(i as usize) {
        Some(&o) => o,
        None => 4096 + (i - 8) * 3001,
    }
}

#[test]
fn a_damaged_catalogue_is_refused_untouched_or_recovered_and_gc_keeps_every_object() {
    let u = used_store();
    let pristine = u.env.path("pristine");
    crate::util::cp_a(&u.env.store, &pristine);
    let before = object_sizes(&pristine);
    let mut refused = 0;
    for (what, damage) in damages() {
        let _ = Command::new("rm").arg("-rf").arg(&u.env.store).status();
        crate::util::cp_a(&pristine, &u.env.store);
        damage(&u.env.store);
        let damaged = catalogue_files(&u.env.store);

        let out = u.env.run(["list", "--json"]);
        match out.status.code() {
            Some(7) => {
                refused += 1;
                let v = parse_json(&out);
                assert_eq!(v["ok"], false, "{what}");
                let message = v["error"]["message"].as_str().unwrap();
                assert!(message.contains("cestore recover"), "{what}: {message}");
                assert_eq!(
                    catalogue_files(&u.env.store),
                    damaged,
                    "{what}: a refused catalogue was changed"
                );
            }
            Some(0) => {}
            other => panic!("{what}: list exited {other:?}"),
        }
        // gc, whatever it makes of the catalogue, takes no object a
        // manifest on disk names.
        let gc = u.env.run(["gc", "--json"]);
        assert!(matches!(gc.status.code(), Some(0 | 7)), "{what}: gc {gc:?}");
        assert_eq!(
            object_sizes(&u.env.store),
            before,
            "{what}: gc lost objects"
        );

        let out = u.env.run(["recover", "--json"]);
        assert_ok(&out);
        let mut got = u.env.listed();
        got.sort();
        let mut want = vec![u.a.clone(), u.b.clone()];
        want.sort();
        assert_eq!(got, want, "{what}: snapshots after recover");
        assert_ok(&u.env.run(["gc"]));
        assert_eq!(
            object_sizes(&u.env.store),
            before,
            "{what}: objects after recover and gc"
        );
        let v = u.env.run(["verify", "--json"]);
        assert_ok(&v);
        let tree = u
            .env
            .run(["verify", "--tree", u.view.to_str().unwrap(), u.a.as_str()]);
        assert_ok(&tree);
    }
    assert!(
        refused >= 3,
        "deleted, emptied and unreadable catalogues are refused"
    );
}

#[test]
fn recover_rebuilds_versions_times_and_a_recovered_event() {
    let u = used_store();
    let shown = u.env.json(["show", u.a.as_str(), "--json"]);
    fs::remove_file(u.env.store.join("catalogue.sqlite")).unwrap();
    let _ = fs::remove_file(u.env.store.join("catalogue.sqlite-wal"));
    let _ = fs::remove_file(u.env.store.join("catalogue.sqlite-shm"));
    let r = u.env.json(["recover", "--json"]);
    assert_eq!(r["recovered"].as_array().unwrap().len(), 2, "{r}");
    let again = u.env.json(["show", u.a.as_str(), "--json"]);
    assert_eq!(again["provenance"], shown["provenance"]);
    let log = u.env.json(["log", u.a.as_str(), "--json"]);
    let events = crate::util::field_strs(&log["ingests"], "event");
    assert_eq!(events, ["recovered"]);
    // A second recover finds nothing to do.
    let r = u.env.json(["recover", "--json"]);
    assert_eq!(r["recovered"], Value::Array(vec![]));
}

#[test]
fn the_catalogue_file_alone_holds_every_snapshot() {
    let u = used_store();
    let copy = u.env.path("copy");
    fs::create_dir(&copy).unwrap();
    fs::copy(
        u.env.store.join("catalogue.sqlite"),
        copy.join("catalogue.sqlite"),
    )
    .unwrap();
    let out = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('select count(*) from snapshots').fetchone()[0])")
        .arg(copy.join("catalogue.sqlite"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2");
}

#[test]
fn a_store_without_manifests_gets_them_from_its_catalogue() {
    let u = used_store();
    let dir = u.env.store.join("manifests");
    let status = Command::new("rm").arg("-rf").arg(&dir).status().unwrap();
    assert!(status.success());
    assert_ok(&u.env.run(["list"]));
    for d in [&u.a, &u.b] {
        let f = dir.join(&d[..2]).join(d);
        let bytes = fs::read(&f).unwrap();
        assert_eq!(sha_hex(&bytes), *d);
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o777, 0o444);
    }
}

#[test]
fn rm_after_a_manifest_went_missing_and_gc_still_keep_objects_other_snapshots_use() {
    let u = used_store();
    // rm, then gc: the removed snapshot's own objects go, the others stay.
    assert_exit(&u.env.run(["rm", u.b.as_str()]), 0);
    assert!(!u
        .env
        .store
        .join("manifests")
        .join(&u.b[..2])
        .join(&u.b)
        .exists());
    assert_ok(&u.env.run(["gc"]));
    assert_ok(&u.env.run(["verify"]));
    assert_ok(
        &u.env
            .run(["verify", "--tree", u.view.to_str().unwrap(), u.a.as_str()]),
    );
}

/// A checkout whose record cannot be made (the catalogue refuses view rows)
/// leaves nothing at its destination.
#[test]
fn a_view_that_cannot_be_recorded_is_removed() {
    let u = used_store();
    let trigger = "CREATE TRIGGER refuse_views BEFORE INSERT ON views \
                   BEGIN SELECT RAISE(FAIL, 'views refused'); END;";
    let out = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()")
        .arg(u.env.store.join("catalogue.sqlite"))
        .arg(trigger)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let dest = u.env.path("refused");
    let out = u
        .env
        .run(["checkout", u.b.as_str(), dest.to_str().unwrap(), "--json"]);
    assert_exit(&out, 7);
    assert!(!dest.exists(), "a view nobody records was left at {dest:?}");
    assert_eq!(leftovers(&u.env.base), Vec::<String>::new());
    let out = u.env.run(["path", u.b.as_str(), "--json"]);
    assert_exit(&out, 7);
    assert!(!u.env.store.join("views").join(&u.b).exists());
    let out = u.env.run([
        "stage",
        "--arm",
        "ce_review",
        "--digest",
        u.b.as_str(),
        "--dest",
        dest.to_str().unwrap(),
        "--json",
    ]);
    assert_exit(&out, 7);
    assert!(!dest.exists());
}

/// Half-built views (`.NAME.cestore-tmp-…`) left in a directory.
fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.contains(".cestore-tmp-").then_some(n)
        })
        .collect()
}

/// On a full disk a checkout fails at its record and takes its view back.
#[test]
fn a_checkout_on_a_full_disk_leaves_no_view() {
    let test = "a_checkout_on_a_full_disk_leaves_no_view";
    let probe = TestEnv::new();
    let Some(mnt) = tmpfs_or_skip(test, &probe.path("fill"), "size=20m") else {
        return;
    };
    let mut env = TestEnv::new();
    env.store = mnt.at.join("store");
    let src = env.plugin("src", "1.0.0");
    for i in 0..300 {
        write(
            &src.join(format!("skills/ce-plan/f{i:03}.md")),
            format!("{i}\n"),
        );
    }
    let d = env.ingest_digest(&src, "1.0.0");
    // Fill the disk in steps; at each, a checkout inside the tmpfs either
    // works and is recorded, or fails and leaves nothing.
    let filler = mnt.at.join("filler");
    let mut failed = 0;
    for free_kib in [8u64, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024] {
        mnt.fill(&filler, free_kib * 1024, 0);
        let dest = mnt.at.join(format!("view-{free_kib}"));
        let out = env.run(["checkout", d.as_str(), dest.to_str().unwrap(), "--json"]);
        let code = out.status.code();
        let views = {
            let _ = fs::remove_file(&filler);
            env.json(["show", d.as_str(), "--json"])["views"].clone()
        };
        let recorded = views
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["path"] == dest.to_str().unwrap());
        match code {
            Some(0) => assert!(recorded, "{free_kib} KiB: a made view is recorded"),
            Some(7) => {
                failed += 1;
                assert!(!dest.exists(), "{free_kib} KiB: the failed view was left");
                assert!(!recorded);
            }
            other => panic!("{free_kib} KiB: checkout exited {other:?}: {out:?}"),
        }
        assert_eq!(leftovers(&mnt.at), Vec::<String>::new());
    }
    assert!(failed > 0, "some fill level makes the checkout fail");
}

fn spawn(env: &TestEnv, args: &[&str]) -> std::process::Child {
    env.cmd(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A small spread of delays from a seed, without a generator crate.
fn delay(round: usize) -> Duration {
    Duration::from_micros(((round as u64).wrapping_mul(7919) % 12) * 1000)
}

#[test]
fn rm_racing_checkout_or_stage_never_leaves_an_unrecorded_view() {
    let (env, src) = util::with_plugin("src", "1.0.0");
    for i in 0..200 {
        write(
            &src.join(format!("skills/ce-plan/f{i:03}.md")),
            format!("{i}\n"),
        );
    }
    let rounds = scale(20, 200);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..rounds {
        let d = env.ingest_digest(&src, "1.0.0");
        let dest = env.path(&format!("v{round}"));
        let racer: Vec<String> = if round % 2 == 0 {
            vec!["checkout".into(), d.clone(), dest.display().to_string()]
        } else {
            vec![
                "stage".into(),
                "--arm".into(),
                "ce_review".into(),
                "--digest".into(),
                d.clone(),
                "--dest".into(),
                dest.display().to_string(),
            ]
        };
        let args: Vec<&str> = racer.iter().map(String::as_str).collect();
        let child = spawn(&env, &args);
        std::thread::sleep(delay(round));
        let rm = env.run(["rm", d.as_str()]);
        let made: Output = child.wait_with_output().unwrap();
        let key = format!(
            "{} {:?} / rm {:?}",
            racer[0],
            made.status.code(),
            rm.status.code()
        );
        *outcomes.entry(key.clone()).or_default() += 1;
        match (made.status.code(), rm.status.code()) {
            // The view came first: rm refused while it is recorded.
            (Some(0), Some(6)) => {
                assert!(dest.exists(), "{key}");
                let out = env.run(["discard", dest.to_str().unwrap()]);
                assert_ok(&out);
            }
            // rm came first: the checkout failed and left nothing.
            (Some(code), Some(0)) if code != 0 => {
                assert!(!dest.exists(), "{key}: a view was left: {made:?}");
            }
            _ => panic!("{key}\n{made:?}\n{rm:?}"),
        }
        assert_eq!(leftovers(&env.base), Vec::<String>::new());
        // Forget it if this round left it recorded; exit 4 when rm already did.
        let out = env.run(["rm", "--force", d.as_str()]);
        assert!(matches!(out.status.code(), Some(0 | 4)), "{out:?}");
        assert_ok(&env.run(["gc"]));
    }
    eprintln!("rm racing a view, {rounds} rounds: {outcomes:?}");
}

#[test]
fn concurrent_discards_of_one_view_both_succeed_and_forget_it_once() {
    let (env, src) = util::with_plugin("src", "1.0.0");
    for i in 0..300 {
        write(
            &src.join(format!("skills/ce-plan/f{i:03}.md")),
            format!("{i}\n"),
        );
    }
    let d = env.ingest_digest(&src, "1.0.0");
    let rounds = scale(20, 200);
    for round in 0..rounds {
        let dest = env.path(&format!("v{round}"));
        assert_ok(&env.run(["checkout", d.as_str(), dest.to_str().unwrap()]));
        let a = spawn(&env, &["discard", dest.to_str().unwrap(), "--json"]);
        let b = spawn(&env, &["discard", dest.to_str().unwrap(), "--json"]);
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        assert_ok(&a);
        assert_ok(&b);
        let removed = [&a, &b]
            .iter()
            .filter(|o| parse_json(o)["removed"] == true)
            .count();
        assert_eq!(removed, 1, "round {round}: one of the two removed it");
        assert!(!dest.exists());
        let shown = env.json(["show", d.as_str(), "--json"]);
        assert_eq!(shown["views"], Value::Array(vec![]), "round {round}");
    }
}

/// Runs cestore through `sh -c` with a umask.
fn with_umask(env: &TestEnv, umask: &str, args: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask}; exec \"$0\" {args} --store \"$1\"",))
        .arg(crate::util::bin())
        .arg(&env.store)
        .env_remove("CESTORE_DIR")
        .output()
        .unwrap()
}

#[test]
fn the_store_root_is_0755_whatever_the_umask() {
    let (env, src) = util::with_plugin("src", "1.0.0");
    let out = with_umask(
        &env,
        "000",
        &format!("ingest {} --version 1.0.0", src.display()),
    );
    assert_ok(&out);
    assert_eq!(fs::metadata(&env.store).unwrap().mode() & 0o7777, 0o755);
    assert_eq!(
        fs::metadata(env.store.join("objects")).unwrap().mode() & 0o7777,
        0o755
    );
}

#[test]
fn a_store_others_can_write_or_own_is_refused_unless_trusted() {
    let (env, d) = minimal_store();
    for (what, dir, mode) in [
        ("a world-writable root", env.store.clone(), 0o777),
        ("a group-writable root", env.store.clone(), 0o775),
        (
            "a world-writable objects/",
            env.store.join("objects"),
            0o757,
        ),
    ] {
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
        let out = env.run(["show", d.as_str(), "--json"]);
        let stderr = assert_exit(&out, 7);
        assert!(stderr.contains("--trust-store"), "{what}: {stderr}");
        assert!(stderr.contains("CESTORE_TRUST_STORE=1"), "{what}: {stderr}");
        assert_eq!(parse_json(&out)["error"]["kind"], "bad-store", "{what}");
        assert_ok(&env.run(["show", d.as_str(), "--trust-store"]));
        let out = env
            .cmd(["show", d.as_str()])
            .env("CESTORE_TRUST_STORE", "1")
            .output()
            .unwrap();
        assert_ok(&out);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    if rustix::process::geteuid().is_root() {
        util::chown(&[], "65534:65534", &env.store);
        let stderr = assert_exit(&env.run(["show", d.as_str()]), 7);
        assert!(stderr.contains("is owned by uid 65534"), "{stderr}");
        assert_ok(&env.run(["show", d.as_str(), "--trust-store"]));
    } else {
        crate::util::skip(
            "a_store_others_can_write_or_own_is_refused_unless_trusted (a foreign owner)",
            "not running as root",
        );
    }
}

#[test]
fn a_command_waiting_for_the_lock_says_who_holds_it() {
    let (env, d) = minimal_store();
    let Ok(mut holder) = Command::new("flock")
        .arg("--exclusive")
        .arg(env.store.join(".lock"))
        .args(["sleep", "3"])
        .spawn()
    else {
        crate::util::skip(
            "a_command_waiting_for_the_lock_says_who_holds_it",
            "`flock` is not installed",
        );
        return;
    };
    std::thread::sleep(Duration::from_millis(300));
    let out = env.run(["show", d.as_str()]);
    let _ = holder.wait();
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "cestore: waiting for the store lock held by pid {}",
            holder.id()
        )),
        "{stderr}"
    );
}

/// The objects a manifest names (files with content), as paths under
/// `objects/` such as `ab/<62 hex>` or `ab/<62 hex>.x`.
fn objects_named(manifest: &[u8]) -> BTreeSet<String> {
    let v: Value = serde_json::from_slice(manifest).unwrap();
    crate::util::array(&v["files"])
        .iter()
        .filter(|e| e["size"].as_u64().unwrap() > 0)
        .map(|e| {
            let hex = e["sha256"].as_str().unwrap();
            let x = if e["executable"] == true { ".x" } else { "" };
            format!("{}/{}{x}", &hex[..2], &hex[2..])
        })
        .collect()
}

fn manifest_file(store: &Path, digest: &str) -> PathBuf {
    store.join("manifests").join(&digest[..2]).join(digest)
}

/// Replaces a read-only file's bytes.
fn overwrite(path: &Path, bytes: &[u8]) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o444)).unwrap();
}

/// Removes the catalogue and its log, as a lost disk block or a hand would.
fn lose_catalogue(store: &Path) {
    for name in [
        "catalogue.sqlite",
        "catalogue.sqlite-wal",
        "catalogue.sqlite-shm",
    ] {
        let _ = fs::remove_file(store.join(name));
    }
}

/// The object paths of `gc --json`'s report, relative to `objects/`.
fn gc_objects(store: &Path, gc: &Value) -> BTreeSet<String> {
    let root = format!("{}/", store.join("objects").display());
    crate::util::array(&gc["objects"])
        .iter()
        .map(|p| p.as_str().unwrap().strip_prefix(&root).unwrap().to_string())
        .collect()
}

/// The orphan objects `verify --json` reports, relative to `objects/`.
fn verify_orphans(store: &Path, verify: &Value) -> BTreeSet<String> {
    let root = format!("{}/", store.join("objects").display());
    crate::util::problems(verify)
        .iter()
        .filter(|p| p["kind"] == "orphan-object")
        .map(|p| {
            p["path"]
                .as_str()
                .unwrap()
                .strip_prefix(&root)
                .unwrap()
                .to_string()
        })
        .collect()
}

/// The damage done to snapshot `a`'s manifest file once the catalogue is
/// lost, and which of `a`'s own objects `gc --force` may then lose (those no
/// byte of the damaged file names any more).
type ManifestDamage = fn(&Used, &Path) -> BTreeSet<String>;

/// Catalogue lost, `a`'s manifest damaged: `recover` records `b` and says it
/// keeps `a`'s objects; `gc` refuses, naming the file, and removes nothing;
/// `gc --dry-run` and `verify` report the same plan; `gc --force` sweeps
/// and loses no object a byte of the damaged file still names.
fn damaged_manifest_keeps_its_objects(damage: ManifestDamage) {
    let u = used_store();
    let store = &u.env.store;
    let file = manifest_file(store, &u.a);
    let a_bytes = fs::read(&file).unwrap();
    let b_objects = objects_named(&fs::read(manifest_file(store, &u.b)).unwrap());
    let own: BTreeSet<String> = objects_named(&a_bytes)
        .difference(&b_objects)
        .cloned()
        .collect();
    assert!(own.len() >= 2, "a has objects of its own: {own:?}");
    let before = object_sizes(store);
    lose_catalogue(store);
    let may_lose = damage(&u, &file);

    let r = u.env.run(["recover", "--json"]);
    assert_exit(&r, 1);
    let r = parse_json(&r);
    assert_eq!(r["recovered"], serde_json::json!([u.b]), "{r}");
    let problem = &r["problems"][0];
    assert_eq!(problem["path"], file.to_str().unwrap(), "{r}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("keeps from gc every object named in it"),
        "{r}"
    );

    let out = u.env.run(["gc", "--json"]);
    assert_exit(&out, 6);
    let gc = parse_json(&out);
    assert_eq!(gc["ok"], false);
    assert_eq!(gc["refused"], true);
    assert_eq!(gc["unsafe"][0]["path"], file.to_str().unwrap(), "{gc}");
    assert!(gc["unsafe"][0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("damaged"));
    assert_eq!(object_sizes(store), before, "a refused gc removed objects");
    let human = u.env.run(["gc"]);
    assert_exit(&human, 6);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains(file.to_str().unwrap()), "{text}");
    assert!(text.contains("refused to sweep"), "{text}");

    // The dry run, verify and gc --force plan the same sweep.
    let dry = u.env.json(["gc", "--dry-run", "--json"]);
    assert_eq!(dry["refused"], false);
    assert_eq!(dry["unsafe"], gc["unsafe"]);
    let v = u.env.run(["verify", "--json"]);
    assert_exit(&v, 1);
    let v = parse_json(&v);
    assert!(
        crate::util::problems(&v)
            .iter()
            .any(|p| p["kind"] == "damaged-manifest" && p["path"] == file.to_str().unwrap()),
        "{v}"
    );
    let planned = gc_objects(store, &dry);
    assert_eq!(planned, verify_orphans(store, &v));
    assert_eq!(planned, may_lose, "the objects only the lost names held");
    assert_eq!(gc_objects(store, &gc), planned);

    let forced = u.env.json(["gc", "--force", "--json"]);
    assert_eq!(forced["refused"], false);
    assert_eq!(gc_objects(store, &forced), planned);
    let after = object_sizes(store);
    for o in before.keys() {
        assert_eq!(
            after.contains_key(o),
            !may_lose.contains(o),
            "{o}: kept exactly what a name left in the file or a sound manifest names"
        );
    }
    assert!(file.exists(), "gc never removes a damaged manifest");
    // b is whole.
    let view = u.env.path("b-view");
    assert_ok(
        &u.env
            .run(["checkout", u.b.as_str(), view.to_str().unwrap()]),
    );
}

#[test]
fn a_manifest_cut_short_keeps_every_object_after_recover_and_gc() {
    damaged_manifest_keeps_its_objects(|_, file| {
        let bytes = fs::read(file).unwrap();
        overwrite(file, &bytes[..bytes.len() - 1]);
        BTreeSet::new()
    });
}

#[test]
fn a_manifest_with_a_flipped_hex_digit_keeps_every_other_object() {
    damaged_manifest_keeps_its_objects(|u, file| {
        let bytes = fs::read(file).unwrap();
        let b_objects = objects_named(&fs::read(manifest_file(&u.env.store, &u.b)).unwrap());
        // The big notes file is a's own object.
        let notes = objects_named(&bytes)
            .into_iter()
            .find(|o| !b_objects.contains(o))
            .unwrap();
        let hex = format!("{}{}", &notes[..2], &notes[3..]);
        let text = String::from_utf8(bytes).unwrap();
        let at = text.find(&hex).unwrap() + 10;
        let mut flipped = text.into_bytes();
        flipped[at] = if flipped[at] == b'0' { b'1' } else { b'0' };
        overwrite(file, &flipped);
        BTreeSet::from([notes])
    });
}

#[test]
fn a_manifest_replaced_by_another_snapshots_keeps_its_objects_until_forced() {
    damaged_manifest_keeps_its_objects(|u, file| {
        let a = objects_named(&fs::read(file).unwrap());
        let b_bytes = fs::read(manifest_file(&u.env.store, &u.b)).unwrap();
        let b = objects_named(&b_bytes);
        overwrite(file, &b_bytes);
        a.difference(&b).cloned().collect()
    });
}

#[test]
fn gc_refuses_while_a_recorded_snapshot_lacks_its_manifest() {
    let u = used_store();
    let file = manifest_file(&u.env.store, &u.b);
    fs::remove_file(&file).unwrap();
    let before = object_sizes(&u.env.store);
    let out = u.env.run(["gc", "--json"]);
    assert_exit(&out, 6);
    let gc = parse_json(&out);
    assert_eq!(gc["unsafe"][0]["path"], file.to_str().unwrap(), "{gc}");
    assert!(gc["unsafe"][0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("missing"));
    assert_eq!(object_sizes(&u.env.store), before);
    // recover writes it from the catalogue; gc then runs.
    let r = u.env.json(["recover", "--json"]);
    assert_eq!(r["manifests_written"], serde_json::json!([u.b]), "{r}");
    let gc = u.env.json(["gc", "--json"]);
    assert_eq!(gc["unsafe"], serde_json::json!([]));
    assert_eq!(object_sizes(&u.env.store), before);
}

/// Places a snapshot by hand: each file's bytes as an object, and a
/// manifest of `entries` (path, bytes, executable) in canonical form, named
/// by its digest. `leave_out` names a path whose object is not placed.
fn place_by_hand(store: &Path, entries: &[(&str, &[u8])], leave_out: Option<&str>) -> String {
    let mut files = Vec::new();
    for (path, data) in entries {
        let hex = sha_hex(data);
        if !data.is_empty() && leave_out != Some(*path) {
            let object = store.join("objects").join(&hex[..2]).join(&hex[2..]);
            if !object.exists() {
                write(&object, data);
                fs::set_permissions(&object, fs::Permissions::from_mode(0o444)).unwrap();
            }
        }
        files.push(format!(
            r#"{{"executable":false,"path":{},"sha256":"{hex}","size":{}}}"#,
            serde_json::to_string(path).unwrap(),
            data.len()
        ));
    }
    let bytes = format!(r#"{{"files":[{}],"schema_version":1}}"#, files.join(","));
    let digest = sha_hex(bytes.as_bytes());
    let file = manifest_file(store, &digest);
    write(&file, &bytes);
    fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
    digest
}

const PLUGIN_JSON: &[u8] = br#"{"name": "compound-engineering", "version": "9.9.9"}"#;

/// A release placed by hand (after `a` and `b` were ingested) that `recover`
/// must refuse: not recorded, its manifest set aside with the reason and
/// its objects kept from gc until `--force`, and nothing hands it out.
fn refused_by_recover(entries: &[(&str, &[u8])], leave_out: Option<&str>, rule: &str) {
    let u = used_store();
    let store = &u.env.store;
    let d = place_by_hand(store, entries, leave_out);
    let file = manifest_file(store, &d);
    let bytes = fs::read(&file).unwrap();
    let before = object_sizes(store);

    let out = u.env.run(["recover", "--json"]);
    assert_exit(&out, 1);
    let r = parse_json(&out);
    assert_eq!(r["recovered"], serde_json::json!([]), "{r}");
    let set = &r["manifests_set_aside"][0];
    assert_eq!(set["manifest_digest"], d.as_str(), "{r}");
    assert_eq!(set["rule"], rule, "{r}");
    let moved = PathBuf::from(set["path"].as_str().unwrap());
    assert_eq!(
        moved,
        store.join("manifests-set-aside").join(format!("{d}.1"))
    );
    assert_eq!(fs::read(&moved).unwrap(), bytes, "set aside, not changed");
    assert!(!file.exists(), "no longer under manifests/");
    let why = fs::read_to_string(moved.with_file_name(format!("{d}.1.why"))).unwrap();
    assert!(why.contains(set["detail"].as_str().unwrap()), "{why}");
    let human = u.env.run(["recover"]);
    assert_exit(&human, 0);

    let mut got = u.env.listed();
    got.sort();
    let mut want = vec![u.a.clone(), u.b.clone()];
    want.sort();
    assert_eq!(got, want, "not recorded");
    let view = u.env.path("hand-view");
    assert_exit(
        &u.env.run(["checkout", d.as_str(), view.to_str().unwrap()]),
        4,
    );
    assert!(!view.exists());
    let bundle = u.env.path("hand.bundle");
    assert_exit(
        &u.env
            .run(["export", d.as_str(), "-o", bundle.to_str().unwrap()]),
        4,
    );
    assert!(!bundle.exists());
    assert_exit(&u.env.run(["push", d.as_str(), "127.0.0.1:9/ce/hand"]), 4);

    // verify names it; gc keeps its objects; gc --force lets them go.
    let v = u.env.run(["verify", "--json"]);
    assert_exit(&v, 1);
    let v = parse_json(&v);
    assert!(
        crate::util::problems(&v)
            .iter()
            .any(|p| p["kind"] == "set-aside-manifest" && p["path"] == moved.to_str().unwrap()),
        "{v}"
    );
    let gc = u.env.json(["gc", "--json"]);
    assert_eq!(gc["objects"], serde_json::json!([]), "{gc}");
    assert_eq!(object_sizes(store), before);
    let own: BTreeSet<String> = {
        let mut mine = objects_named(&bytes);
        for s in [&u.a, &u.b] {
            for o in objects_named(&fs::read(manifest_file(store, s)).unwrap()) {
                mine.remove(&o);
            }
        }
        mine.into_iter()
            .filter(|o| before.contains_key(o))
            .collect()
    };
    assert!(!own.is_empty());
    let dry = u.env.json(["gc", "--dry-run", "--force", "--json"]);
    assert_eq!(gc_objects(store, &dry), own, "{dry}");
    assert_eq!(object_sizes(store), before);
    let forced = u.env.json(["gc", "--force", "--json"]);
    assert_eq!(gc_objects(store, &forced), own, "{forced}");
    assert!(moved.exists(), "gc never removes a set-aside manifest");
    assert_ok(&u.env.run(["verify", u.a.as_str(), u.b.as_str()]));
}

fn skills(extra: &[(&'static str, &'static [u8])]) -> Vec<(&'static str, &'static [u8])> {
    let mut v: Vec<(&str, &[u8])> = vec![
        (".claude-plugin/plugin.json", PLUGIN_JSON),
        ("skills/ce-code-review/SKILL.md", b"# review, by hand\n"),
        ("skills/ce-plan/SKILL.md", b"# plan, by hand\n"),
        ("skills/ce-work/SKILL.md", b"# work, by hand\n"),
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn recover_sets_aside_a_manifest_with_a_secret_and_no_plan_or_work_skill() {
    refused_by_recover(
        &[
            (".claude-plugin/plugin.json", PLUGIN_JSON),
            ("skills/ce-code-review/.env", b"API_TOKEN=hunter2\n"),
            ("skills/ce-code-review/SKILL.md", b"# review, by hand\n"),
        ],
        None,
        "forbidden-name",
    );
}

#[test]
fn recover_sets_aside_a_manifest_without_the_required_skills() {
    refused_by_recover(
        &[
            (".claude-plugin/plugin.json", PLUGIN_JSON),
            ("skills/ce-code-review/SKILL.md", b"# review, by hand\n"),
        ],
        None,
        "missing-skill",
    );
}

#[test]
fn recover_sets_aside_a_manifest_with_a_duplicated_path() {
    refused_by_recover(
        &skills(&[("scripts/run.sh", b"one\n"), ("scripts/run.sh", b"two\n")]),
        None,
        "duplicate-path",
    );
}

#[test]
fn recover_sets_aside_a_manifest_with_a_dot_dot_path() {
    refused_by_recover(
        &skills(&[("skills/../../etc/cron.d/x", b"* * * * * root sh\n")]),
        None,
        "dot-component",
    );
}

#[test]
fn recover_sets_aside_a_manifest_with_an_absolute_path() {
    refused_by_recover(
        &skills(&[("/etc/cron.d/x", b"* * * * * root sh\n")]),
        None,
        "absolute-path",
    );
}

#[test]
fn recover_sets_aside_a_manifest_in_the_wrong_order() {
    let mut entries = skills(&[("scripts/a.sh", b"a\n")]);
    entries.swap(1, 2);
    refused_by_recover(&entries, None, "entry-order");
}

#[test]
fn recover_sets_aside_a_manifest_whose_objects_are_missing() {
    refused_by_recover(
        &skills(&[("scripts/gone.sh", b"never stored\n")]),
        Some("scripts/gone.sh"),
        "missing-object",
    );
}

#[test]
fn a_recorded_snapshot_that_breaks_a_rule_is_never_handed_out() {
    let (env, release) = util::with_plugin("release", "1.0.0");
    write(&release.join("skills/ce-code-review/notes.md"), "notes\n");
    let d = env.ingest_digest(&release, "1.0.0");
    // The catalogue's rows say what an older recover could have recorded.
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); \
             c.execute(\"update entries set path='skills/ce-code-review/.env' \
             where path='skills/ce-code-review/notes.md'\"); c.commit()",
        )
        .arg(env.store.join("catalogue.sqlite"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let view = env.path("view");
    let out = env.run(["checkout", d.as_str(), view.to_str().unwrap(), "--json"]);
    assert_exit(&out, 1);
    let message = parse_json(&out)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("breaks a rule"), "{message}");
    assert!(message.contains("skills/ce-code-review/.env"), "{message}");
    assert!(!view.exists());
    assert_exit(&env.run(["path", d.as_str()]), 1);
    let bundle = env.path("b.bundle");
    assert_exit(
        &env.run(["export", d.as_str(), "-o", bundle.to_str().unwrap()]),
        1,
    );
    assert!(!bundle.exists());
    assert_exit(&env.run(["push", d.as_str(), "127.0.0.1:9/ce/x"]), 1);
}

/// The lines of an `strace -f -y` log of `args` run against `env`'s store,
/// tracing `syncfs`, the renames, and the writes and syncs of files; `None` (with the skip printed) when
/// strace cannot run here.
fn traced(env: &TestEnv, test: &str, args: &[&str]) -> Option<Vec<String>> {
    let log = env.path(&format!("strace-{}.log", args[0]));
    let out = Command::new("strace")
        .args([
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=syncfs,rename,renameat,renameat2,pwrite64,fsync,fdatasync",
            "-o",
        ])
        .arg(&log)
        .arg(util::bin())
        .arg("--store")
        .arg(&env.store)
        .args(args)
        .output();
    match out {
        Ok(out) if out.status.success() => Some(
            fs::read_to_string(&log)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect(),
        ),
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("PTRACE") => {
            util::skip(test, "strace cannot trace here (ptrace refused)");
            None
        }
        Ok(out) => panic!("{}", util::describe(&out)),
        Err(e) => {
            util::skip(test, &format!("strace cannot run here: {e}"));
            None
        }
    }
}

/// Checks, in a trace from [`traced`], that a `syncfs` comes before the
/// first rename that names a file in the store (into `objects/`,
/// `manifests/`, `sources/` or `attestations/`), and another after the
/// last: every byte is on the disk before its name, and every name before
/// the catalogue records it.
fn assert_synced_around_names(lines: &[String], what: &str) {
    let names = |l: &String| {
        l.contains("rename")
            && [
                "/objects>",
                "/manifests>",
                "/sources>",
                "/attestations>",
                "/sources/",
                "/attestations/",
            ]
            .iter()
            .any(|d| l.split(',').nth(2).is_some_and(|to| to.contains(d)))
    };
    let first = lines.iter().position(names);
    let last = lines.iter().rposition(names);
    let (Some(first), Some(last)) = (first, last) else {
        panic!(
            "{what}: no file was named in the store:\n{}",
            lines.join("\n")
        );
    };
    assert!(
        lines[..first].iter().any(|l| l.contains("syncfs(")),
        "{what}: a file was named before any syncfs:\n{}",
        lines.join("\n")
    );
    assert!(
        lines[last..].iter().any(|l| l.contains("syncfs(")),
        "{what}: no syncfs after the last name:\n{}",
        lines.join("\n")
    );
    // The new store's schema: its log's last write before the first name
    // is followed by a sync of the log, so that a power loss after the
    // names leaves a catalogue that opens.
    let wal = |l: &String| l.contains("catalogue.sqlite-wal>");
    let written = lines[..first]
        .iter()
        .rposition(|l| wal(l) && l.contains("pwrite64("))
        .unwrap_or_else(|| panic!("{what}: no catalogue log was written before the first name"));
    assert!(
        lines[written..first]
            .iter()
            .any(|l| wal(l) && (l.contains("fsync(") || l.contains("fdatasync("))),
        "{what}: the new catalogue's schema was not synced before a file was named:\n{}",
        lines[..first].join("\n")
    );
}

#[test]
fn ingest_and_pull_sync_every_byte_before_they_name_it() {
    let test = "recovery::ingest_and_pull_sync_every_byte_before_they_name_it";
    let env = TestEnv::new();
    let src = env.path("src");
    util::minimal_plugin(&src, "1.0.0");
    write(&src.join("skills/ce-plan/extra.md"), "extra\n");
    let Some(lines) = traced(
        &env,
        test,
        &[
            "ingest",
            src.to_str().unwrap(),
            "--version",
            "1.0.0",
            "--json",
        ],
    ) else {
        return;
    };
    assert_synced_around_names(&lines, "ingest");
    let Some(reg) = crate::remote::registry(test) else {
        return;
    };
    let digest = env.listed()[0].clone();
    let target = crate::remote::repo(&reg, "synced-names");
    env.json(["push", &digest, &target, "--plain-http", "--json"]);
    let other = TestEnv::new();
    let reference = format!("{target}:sha256-{digest}");
    let Some(lines) = traced(
        &other,
        test,
        &["pull", &reference, "--plain-http", "--json"],
    ) else {
        return;
    };
    assert_synced_around_names(&lines, "pull");
    assert_ok(&other.run(["verify"]));
}
