//! No credential of a repository's URL anywhere: whatever form an origin
//! URL takes (three slashes, percent-encoded, scp-like with a token for a
//! user, a query, a helper), no user, password, query or fragment of it
//! reaches a report, an error, a JSON object, a file of the store, the
//! catalogue or a bundle; and a URL given on the command line where a local
//! repository, directory or file is read is refused (exit 2) showing it
//! redacted.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::git::{commit_all, git, init};
use crate::json::one_object;
use crate::util::{self, assert_exit, minimal_plugin, os, TestEnv};

const V: &str = "1.0.0";

/// Origin URLs in every form git reads, each with what of it must appear
/// nowhere: its user, its password, its query and fragment.
const HOSTILE: &[(&str, &[&str])] = &[
    (
        "https:///credUserA:credPassA@example.com/o/r.git",
        &["credUserA", "credPassA"],
    ),
    (
        "https://credUserB:credPassB@example.com/o/r.git",
        &["credUserB", "credPassB"],
    ),
    (
        "HTTPS://credUserC%3AcredPassC@EXAMPLE.com/o/r.git",
        &["credUserC", "credPassC"],
    ),
    (
        "https:////credUserD:cred%40PassD@example.com:8443/o/r.git",
        &["credUserD", "PassD"],
    ),
    (
        "ssh://credUserE:credPassE@example.com/o/r.git",
        &["credUserE", "credPassE"],
    ),
    (
        "git+ssh://credUserF@example.com:2222/o/r.git",
        &["credUserF"],
    ),
    ("credUserG@example.com:o/r.git", &["credUserG"]),
    (
        "credUserH:credPassH@example.com:o/r.git",
        &["credUserH", "credPassH"],
    ),
    (
        "https://example.com/o/r.git?access_token=credQueryI#credFragI",
        &["credQueryI", "credFragI"],
    ),
    (
        "https::https://credUserJ:credPassJ@example.com/o/r.git",
        &["credUserJ", "credPassJ"],
    ),
    (
        "http:/credUserK:credPassK@example.com/r",
        &["credUserK", "credPassK"],
    ),
    (
        "file://credUserL:credPassL@localhost/srv/r.git",
        &["credUserL", "credPassL"],
    ),
    ("ghp_credUserM@github.com:o/r", &["credUserM"]),
    ("ssh://ssh.example.com/o/r.git#credFragN", &["credFragN"]),
];

/// Registry references holding a user part, a query or a fragment.
const HOSTILE_REFERENCES: &[(&str, &[&str])] = &[
    (
        "credUserR:credPassR@127.0.0.1:9/cestore/ce:1.0.0",
        &["credUserR", "credPassR"],
    ),
    (
        "https://credUserS:credPassS@127.0.0.1:9/cestore/ce",
        &["credUserS", "credPassS"],
    ),
    (
        "oci://credUserT@127.0.0.1:9/cestore/ce:1.0.0",
        &["credUserT"],
    ),
    (
        "127.0.0.1:9/cestore/ce:1.0.0?token=credQueryU",
        &["credQueryU"],
    ),
    ("127.0.0.1:9/cestore/ce#credFragV", &["credFragV"]),
];

/// Every piece of every hostile URL and reference.
fn secrets() -> Vec<&'static str> {
    HOSTILE
        .iter()
        .chain(HOSTILE_REFERENCES)
        .flat_map(|(_, s)| s.iter().copied())
        .collect()
}

/// The secrets found in `bytes`.
fn found_in(bytes: &[u8]) -> Vec<&'static str> {
    secrets()
        .into_iter()
        .filter(|s| bytes.windows(s.len()).any(|w| w == s.as_bytes()))
        .collect()
}

/// Everything a run printed, and the verdict on it.
struct Seen {
    texts: Vec<(String, Vec<u8>)>,
}

impl Seen {
    /// Keeps a run's stdout and stderr, and checks that a `--json` run
    /// printed exactly one JSON object.
    fn run(&mut self, env: &TestEnv, args: &[&OsStr]) -> Output {
        let out = env.run(args);
        self.keep(args, out)
    }

    fn keep(&mut self, args: &[&OsStr], out: Output) -> Output {
        let what = format!("cestore {args:?}");
        if args.contains(&os("--json")) {
            let _: serde_json::Value = one_object(&out, &what);
        }
        self.texts
            .push((format!("{what}: stdout"), out.stdout.clone()));
        self.texts
            .push((format!("{what}: stderr"), out.stderr.clone()));
        out
    }

    /// Fails naming every output that holds a secret.
    fn assert_clean(&self) {
        let dirty: Vec<String> = self
            .texts
            .iter()
            .filter_map(|(what, bytes)| {
                let found = found_in(bytes);
                (!found.is_empty()).then(|| {
                    format!(
                        "{what} holds {found:?}:\n{}",
                        String::from_utf8_lossy(bytes)
                    )
                })
            })
            .collect();
        assert!(dirty.is_empty(), "{}", dirty.join("\n\n"));
    }
}

/// Every file below `dir`, read whole (symlinks not followed).
fn every_file(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in fs::read_dir(dir).expect("read a directory") {
        let path = entry.expect("a directory entry").path();
        let meta = fs::symlink_metadata(&path).expect("stat");
        if meta.is_dir() {
            every_file(&path, out);
        } else if meta.is_file() {
            out.push((path.clone(), fs::read(&path).expect("read a file")));
        }
    }
}

/// Fails naming every file below `dir` that holds a secret.
fn assert_no_secret_below(dir: &Path) {
    let mut files = Vec::new();
    every_file(dir, &mut files);
    assert!(!files.is_empty(), "nothing below {}", dir.display());
    let dirty: Vec<String> = files
        .iter()
        .filter_map(|(path, bytes)| {
            let found = found_in(bytes);
            (!found.is_empty()).then(|| format!("{} holds {found:?}", path.display()))
        })
        .collect();
    assert!(dirty.is_empty(), "{}", dirty.join("\n"));
}

/// Reads every file of the store, then checkpoints the catalogue's
/// write-ahead log into the database file and reads that again.
fn assert_store_clean(store: &Path) {
    assert_no_secret_below(store);
    let db =
        rusqlite::Connection::open(store.join("catalogue.sqlite")).expect("open the catalogue");
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    drop(db);
    let bytes = fs::read(store.join("catalogue.sqlite")).expect("read the catalogue");
    assert!(found_in(&bytes).is_empty(), "{:?}", found_in(&bytes));
    assert_no_secret_below(store);
}

/// A repository holding the minimal release at its root, committed, whose
/// origin is `origin`.
fn repository(env: &TestEnv, name: &str, origin: &str) -> PathBuf {
    let repo = env.path(name);
    init(&repo);
    minimal_plugin(&repo, V);
    commit_all(&repo, "release");
    git(&repo, &["remote", "add", "origin", origin]);
    assert_eq!(git(&repo, &["config", "remote.origin.url"]), origin);
    repo
}

/// A results file naming `digest` once.
fn results(env: &TestEnv, digest: &str) -> PathBuf {
    let file = env.path("results.jsonl");
    util::write(
        &file,
        format!(
            "{{\"arm\": \"ce_workflow\", \"ce_plugin_version\": \"{V}\", \"ce_plugin_manifest_digest\": \"{digest}\"}}\n"
        ),
    );
    file
}

#[test]
fn no_credential_of_an_origin_reaches_the_output_the_store_or_a_bundle() {
    let env = TestEnv::new();
    let mut seen = Seen { texts: Vec::new() };
    let mut digest = String::new();
    for (i, (origin, _)) in HOSTILE.iter().enumerate() {
        let repo = repository(&env, &format!("r{i}"), origin);
        // A work-tree ingest, as JSON and as text, and an ingest of the
        // repository's objects.
        let out = seen.run(
            &env,
            &[
                os("ingest"),
                repo.as_os_str(),
                os("--version"),
                os(V),
                os("--json"),
            ],
        );
        util::assert_ok(&out);
        let report = util::parse_json(&out);
        digest = util::digest_of(&report);
        let record = &report["ingest"]["sources"][0]["record"];
        assert_eq!(record["read_from"], "work-tree", "{report}");
        let repository = record["repository"].as_str().expect("a repository");
        assert_eq!(
            repository,
            cestore::source::url::redact_url(origin),
            "{origin}"
        );
        util::assert_ok(&seen.run(
            &env,
            &[os("ingest"), repo.as_os_str(), os("--version"), os(V)],
        ));
        for json in [true, false] {
            let mut args = util::git_ingest(&repo, "HEAD", V, &[]);
            if json {
                args.push(os("--json"));
            }
            util::assert_ok(&seen.run(&env, &args));
        }
    }
    let results = results(&env, &digest);
    for args in [
        &["show", &digest, "--json"][..],
        &["show", &digest],
        &["list", "--json"],
        &["list"],
        &["log", "--json"],
        &["log"],
        &["verify", "--json"],
    ] {
        let args: Vec<&OsStr> = args.iter().map(|a| os(a)).collect();
        util::assert_ok(&seen.run(&env, &args));
    }
    // The newest record's commit may be another repository's: 0 or 1.
    let audit = seen.run(
        &env,
        &[
            os("audit"),
            results.as_os_str(),
            os("--require-clean-source"),
            os("--source-repo"),
            env.path("r0").as_os_str(),
            os("--json"),
        ],
    );
    assert!(
        matches!(audit.status.code(), Some(0 | 1)),
        "{}",
        util::describe(&audit)
    );
    let bundle = env.path("b.tar");
    util::assert_ok(&seen.run(
        &env,
        &[
            os("export"),
            os(&digest),
            os("-o"),
            bundle.as_os_str(),
            os("--json"),
        ],
    ));
    let bundle_bytes = fs::read(&bundle).expect("read the bundle");
    assert!(
        found_in(&bundle_bytes).is_empty(),
        "{:?}",
        found_in(&bundle_bytes)
    );
    assert!(
        String::from_utf8_lossy(&bundle_bytes).contains("https:///example.com/o/r.git"),
        "the bundle carries the records"
    );
    seen.assert_clean();
    assert_store_clean(&env.store);
}

#[test]
fn a_url_given_for_a_local_repository_is_refused_showing_it_redacted() {
    let env = TestEnv::new();
    let (digest, results) = {
        let src = env.plugin("src", V);
        let digest = env.ingest_digest(&src, V);
        let results = results(&env, &digest);
        (digest, results)
    };
    let before = util::store_state(&env.store);
    let mut seen = Seen { texts: Vec::new() };
    for (url, _) in HOSTILE {
        let shown = cestore::source::url::redact_url(url);
        let commands: Vec<Vec<&OsStr>> = vec![
            vec![
                os("ingest"),
                os("--git"),
                os(url),
                os("--rev"),
                os("HEAD"),
                os("--version"),
                os(V),
            ],
            vec![
                os("digest"),
                os("--git"),
                os(url),
                os("--rev"),
                os("HEAD"),
                os("--version"),
                os(V),
            ],
            vec![os("verify"), os("--source"), os(url), os(&digest)],
            vec![
                os("audit"),
                results.as_os_str(),
                os("--source-repo"),
                os(url),
            ],
            vec![os("ingest"), os(url), os("--version"), os(V)],
            vec![
                os("stage"),
                os("--arm"),
                os("ce_workflow"),
                os("--plugin-dir"),
                os(url),
                os("--plugin-version"),
                os(V),
            ],
            vec![os("audit"), os(url)],
            vec![os("import"), os(url)],
            vec![os("sign"), os(&digest), os("--key"), os(url)],
            vec![
                os("attestations"),
                os(&digest),
                os("--trusted-key"),
                os(url),
            ],
        ];
        for args in commands {
            for json in [false, true] {
                let mut args = args.clone();
                if json {
                    args.push(os("--json"));
                }
                let out = seen.run(&env, &args);
                let stderr = assert_exit(&out, 2);
                let message = if json {
                    let v = util::parse_json(&out);
                    assert_eq!(v["error"]["kind"], "usage", "{v}");
                    v["error"]["message"]
                        .as_str()
                        .expect("a message")
                        .to_string()
                } else {
                    stderr
                };
                assert!(
                    message.contains(&format!("'{shown}' is a URL")),
                    "{args:?}: {message}"
                );
            }
        }
        // A URL on the command line the parser refuses is redacted too.
        seen.run(&env, &[os("list"), os(url)]);
        seen.run(&env, &[os("list"), os(url), os("--json")]);
    }
    for (reference, _) in HOSTILE_REFERENCES {
        for args in [
            vec![os("pull"), os(reference)],
            vec![os("push"), os(&digest), os(reference)],
            vec![
                os("audit"),
                results.as_os_str(),
                os("--registry"),
                os(reference),
            ],
        ] {
            for json in [false, true] {
                let mut args = args.clone();
                if json {
                    args.push(os("--json"));
                }
                let out = seen.run(&env, &args);
                let stderr = assert_exit(&out, 2);
                assert!(stderr.contains("holds a user part"), "{stderr}");
            }
        }
    }
    seen.assert_clean();
    // Refused before anything was done.
    assert_eq!(util::store_state(&env.store), before);
    assert_store_clean(&env.store);
}

#[test]
fn a_path_git_would_read_as_a_url_is_a_local_path_when_it_exists() {
    let env = TestEnv::new();
    let repo = env.path("host:r");
    init(&repo);
    minimal_plugin(&repo, V);
    commit_all(&repo, "release");
    let mut cmd = env.cmd([
        "ingest",
        "--git",
        "host:r",
        "--rev",
        "HEAD",
        "--version",
        V,
        "--json",
    ]);
    cmd.current_dir(&env.base);
    let out = cmd.output().expect("run cestore");
    util::assert_ok(&out);
    // And the same name, absent, is a URL.
    let mut cmd = env.cmd([
        "ingest",
        "--git",
        "host:s",
        "--rev",
        "HEAD",
        "--version",
        V,
        "--json",
    ]);
    cmd.current_dir(&env.base);
    let out = cmd.output().expect("run cestore");
    assert_exit(&out, 2);
}

/// Source records as a careless or hostile sender carries them (in a
/// bundle's `sources.json`, a registry's `dev.cestore.sources`): one per
/// hostile URL.
fn hostile_records() -> String {
    let carried: Vec<serde_json::Value> = HOSTILE
        .iter()
        .enumerate()
        .map(|(i, (url, _))| {
            serde_json::json!({
                "at": format!("2026-01-01T00:00:{i:02}.000Z"),
                "record": {
                    "read_from": "git", "repository": url, "commit": "a".repeat(40),
                    "path": "", "tree": null, "tag": null, "clean": true,
                }
            })
        })
        .collect();
    serde_json::to_string(&carried).expect("records")
}

/// A bundle like `bundle` whose `sources.json` is `sources`.
fn with_sources(bundle: &[u8], sources: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut archive = tar::Archive::new(bundle);
    let mut builder = tar::Builder::new(Vec::new());
    let mut replaced = false;
    for entry in archive.entries().expect("entries") {
        let mut entry = entry.expect("an entry");
        let mut header = entry.header().clone();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).expect("read an entry");
        if entry.path().expect("a name").as_os_str() == "sources.json" {
            data = sources.to_vec();
            header.set_size(data.len() as u64);
            header.set_cksum();
            replaced = true;
        }
        builder.append(&header, &data[..]).expect("append");
    }
    assert!(replaced, "the bundle has no sources.json");
    builder.into_inner().expect("the archive")
}

#[test]
fn records_arriving_in_a_bundle_lose_every_credential() {
    let a = TestEnv::new();
    let repo = repository(&a, "r", "https://example.com/o/r.git");
    let digest = util::digest_of(&a.json([
        os("ingest"),
        repo.as_os_str(),
        os("--version"),
        os(V),
        os("--json"),
    ]));
    let bundle = a.path("b.tar");
    a.json([
        os("export"),
        os(&digest),
        os("-o"),
        bundle.as_os_str(),
        os("--json"),
    ]);
    let hostile = with_sources(
        &fs::read(&bundle).expect("read the bundle"),
        hostile_records().as_bytes(),
    );
    assert!(!found_in(&hostile).is_empty());
    let file = a.path("hostile.tar");
    fs::write(&file, hostile).expect("write the bundle");

    let b = TestEnv::new();
    let mut seen = Seen { texts: Vec::new() };
    for args in [
        vec![os("import"), file.as_os_str(), os("--check"), os("--json")],
        vec![os("import"), file.as_os_str(), os("--json")],
        vec![os("show"), os(&digest), os("--json")],
        vec![os("show"), os(&digest)],
    ] {
        util::assert_ok(&seen.run(&b, &args));
    }
    let shown = util::parse_json(&b.run([os("show"), os(&digest), os("--json")]));
    assert!(
        shown.to_string().contains("https:///example.com/o/r.git"),
        "the records were kept: {shown}"
    );
    let again = b.path("again.tar");
    util::assert_ok(&seen.run(
        &b,
        &[
            os("export"),
            os(&digest),
            os("-o"),
            again.as_os_str(),
            os("--json"),
        ],
    ));
    seen.assert_clean();
    assert_store_clean(&b.store);
    let bytes = fs::read(&again).expect("read the bundle");
    assert!(found_in(&bytes).is_empty(), "{:?}", found_in(&bytes));
}

#[test]
fn records_arriving_from_a_registry_lose_every_credential() {
    let Some(reg) = crate::remote::registry("records_arriving_from_a_registry") else {
        return;
    };
    use cestore::remote::oci::mapping::{SOURCES_ANNOTATION, SOURCE_ANNOTATION};
    let a = TestEnv::new();
    let repo = repository(&a, "r", "https://example.com/o/r.git");
    let digest = util::digest_of(&a.json([
        os("ingest"),
        repo.as_os_str(),
        os("--version"),
        os(V),
        os("--json"),
    ]));
    let target = crate::remote::repo(&reg, "hostile-records");
    a.json(["push", &digest, &target, "--plain-http", "--json"]);
    let mut manifest = crate::remote::get_manifest(&target, &format!("sha256-{digest}"));
    manifest["annotations"][SOURCES_ANNOTATION] = hostile_records().into();
    manifest["annotations"][SOURCE_ANNOTATION] = HOSTILE[0].0.into();
    crate::remote::put_manifest(&target, "hostile", &manifest);

    let b = TestEnv::new();
    let mut seen = Seen { texts: Vec::new() };
    let reference = format!("{target}:hostile");
    util::assert_ok(&seen.run(
        &b,
        &[os("pull"), os(&reference), os("--plain-http"), os("--json")],
    ));
    util::assert_ok(&seen.run(&b, &[os("show"), os(&digest), os("--json")]));
    let shown = util::parse_json(&b.run([os("show"), os(&digest), os("--json")]));
    assert!(
        shown.to_string().contains("https:///example.com/o/r.git"),
        "the records were kept: {shown}"
    );
    // Pushed on, they carry nothing either.
    let onward = crate::remote::repo(&reg, "hostile-records-onward");
    util::assert_ok(&seen.run(
        &b,
        &[
            os("push"),
            os(&digest),
            os(&onward),
            os("--plain-http"),
            os("--json"),
        ],
    ));
    let published = crate::remote::get_manifest(&onward, &format!("sha256-{digest}"));
    let published = published.to_string();
    assert!(found_in(published.as_bytes()).is_empty(), "{published}");
    seen.assert_clean();
    assert_store_clean(&b.store);
}
