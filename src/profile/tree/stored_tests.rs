//! Tree-kind manifests: parse dispatch, canonical re-encoding, the harness's digests through `Manifest`, stored checks.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use serde_json::Value;

use super::stored::{check, CheckError, Kind, Stored, TaskRecord};
use super::{dependency_digests, manifest_digest, Dependency, Node, TreeEntry};
use crate::digest::{ManifestDigest, ObjectId};
use crate::profile::ce::manifest::{Entry, Manifest, ManifestError};

const ANSWERS: &str = include_str!("../../../tests/data/task-assets/answers.json");

fn tree() -> Vec<TreeEntry> {
    vec![
        TreeEntry::directory("assets"),
        TreeEntry::file_of("assets/a b.txt", b"a\n", 0),
        TreeEntry::directory("assets/empty"),
        TreeEntry::file_of("é.md", b"x", 0),
    ]
}

fn deps() -> Vec<Dependency> {
    vec![
        Dependency {
            source: "gitnexus/node_modules".into(),
            target: "gitnexus/node_modules".into(),
            entries: vec![
                TreeEntry::directory("payload"),
                TreeEntry::directory("payload/.bin"),
                TreeEntry::symlink("payload/.bin/cli", "../pkg/cli.js"),
                TreeEntry::directory("payload/.vite-temp"),
                TreeEntry::directory("payload/pkg"),
                TreeEntry::file_of("payload/pkg/cli.js", b"#!/bin/sh\n", 0o755),
                TreeEntry::file_of("payload/pkg/index.js", b"x", 0o644),
            ],
        },
        Dependency {
            source: "tools/run.sh".into(),
            target: "run.sh".into(),
            entries: vec![TreeEntry::file_of("payload", b"echo\n", 0o700)],
        },
    ]
}

fn record(repo: PathBuf, harness: Option<PathBuf>) -> TaskRecord {
    TaskRecord {
        declarations: vec!["assets".into(), "./é.md".into()],
        repo_identity: repo,
        resolved_sha: "0123456789abcdef0123456789abcdef01234567".into(),
        harness_identity: harness,
        manifest_digest: manifest_digest(&tree()),
        dependencies: dependency_digests(&deps()),
    }
}

fn round_trips(m: &Manifest) {
    let parsed = Manifest::parse(&m.bytes).unwrap_or_else(|e| panic!("{e}: {m}"));
    assert_eq!(&parsed, m);
}

#[test]
fn each_kind_round_trips_through_parse() {
    let t = Manifest::tree(tree());
    assert_eq!(t.profile(), "tree");
    assert_eq!(t.digest.as_bytes(), manifest_digest(&tree()).as_bytes());
    assert_eq!(
        t.entries,
        [
            Entry::of("assets/a b.txt", b"a\n", false),
            Entry::of("é.md", b"x", false)
        ]
    );
    round_trips(&t);

    let d = Manifest::dependencies(deps());
    assert_eq!(d.profile(), "dependencies");
    let digests = dependency_digests(&deps());
    assert_eq!(d.digest.as_bytes(), digests.manifest.as_bytes());
    assert_eq!(
        d.tree.as_ref().unwrap().content_digest(),
        Some(digests.content)
    );
    assert_eq!(
        d.entries,
        [
            Entry::of("00000/payload/pkg/cli.js", b"#!/bin/sh\n", true),
            Entry::of("00000/payload/pkg/index.js", b"x", false),
            Entry::of("00001/payload", b"echo\n", true),
        ]
    );
    round_trips(&d);

    // A repository path that is not UTF-8 is written as Python writes it.
    let raw = PathBuf::from(OsString::from_vec(b"/tmp/r\xffepo".to_vec()));
    for (repo, harness) in [
        (PathBuf::from("/tmp/repo"), None),
        (raw, Some(PathBuf::from("/tmp/harness"))),
    ] {
        let task = Manifest::task(record(repo, harness));
        assert_eq!(task.profile(), "task");
        assert!(task.entries.is_empty());
        assert_eq!(
            task.tree.as_ref().unwrap().named(),
            [
                ManifestDigest::from_bytes(*t.digest.as_bytes()),
                ManifestDigest::from_bytes(*d.digest.as_bytes())
            ]
        );
        round_trips(&task);
    }
    assert!(String::from_utf8_lossy(
        &Manifest::task(record(
            PathBuf::from(OsString::from_vec(b"/r\xff".to_vec())),
            None
        ))
        .bytes
    )
    .contains(r#""repo_identity":"/r\udcff""#));

    // The empty lists are manifests too.
    let empty = Manifest::dependencies(Vec::new());
    assert_eq!(empty.bytes, br#"{"dependencies":[],"schema_version":1}"#);
    round_trips(&empty);
    let empty = Manifest::tree(Vec::new());
    assert_eq!(empty.bytes, b"[]");
    round_trips(&empty);
    // A CE manifest is still a CE manifest.
    let ce = Manifest::new(vec![Entry::of("a", b"a", false)]);
    assert_eq!(ce.profile(), "ce");
    assert!(ce.tree.is_none());
    round_trips(&ce);
}

fn refused_as_not_canonical(bytes: &[u8]) {
    match Manifest::parse(bytes) {
        Err(ManifestError::NotCanonical) => {}
        other => panic!(
            "{}: {other:?}, wanted NotCanonical",
            String::from_utf8_lossy(bytes)
        ),
    }
}

#[test]
fn bytes_that_do_not_re_encode_to_themselves_are_refused() {
    let t = String::from_utf8(Manifest::tree(tree()).bytes).unwrap();
    let d = String::from_utf8(Manifest::dependencies(deps()).bytes).unwrap();
    let task = String::from_utf8(Manifest::task(record("/tmp/repo".into(), None)).bytes).unwrap();
    for text in [&t, &d, &task] {
        refused_as_not_canonical(text.replace(',', ", ").as_bytes());
        refused_as_not_canonical(format!("{text}\n").as_bytes());
    }
    // The fields must agree with each other and with Python's encoding.
    refused_as_not_canonical(
        t.replace(
            "\"mode\":0,\"path\":\"assets\"",
            "\"mode\":1,\"path\":\"assets\"",
        )
        .as_bytes(),
    );
    refused_as_not_canonical(t.replace("\\u00e9", "é").as_bytes());
    refused_as_not_canonical(d.replace("\"size\":13", "\"size\":12").as_bytes());
    refused_as_not_canonical(task.replace("\"/tmp/repo\"", "\"/tmp//repo/\"").as_bytes());
    refused_as_not_canonical(
        task.replace("\"/tmp/repo\"", "\"/tmp/\\udcc3\\udca9\"")
            .as_bytes(),
    );
    // Fields out of order, or one too many, are no manifest of the kind.
    let swapped = t.replacen(
        "{\"kind\":\"directory\",\"link_target\":\"\"",
        "{\"link_target\":\"\",\"kind\":\"directory\"",
        1,
    );
    refused_as_not_canonical(swapped.as_bytes());
    assert!(matches!(
        Manifest::parse(
            t.replacen("\"size\":0}", "\"size\":0,\"x\":1}", 1)
                .as_bytes()
        ),
        Err(ManifestError::TreeShape(_))
    ));
    assert!(matches!(
        Manifest::parse(
            task.replace("\"schema_version\":3", "\"schema_version\":3,\"x\":1")
                .as_bytes()
        ),
        Err(ManifestError::TreeShape(_))
    ));
    assert!(matches!(
        Manifest::parse(
            d.replace("\"schema_version\":1", "\"schema_version\":2")
                .as_bytes()
        ),
        Err(ManifestError::TreeShape(_))
    ));
    // Bytes of no kind are refused as a CE manifest always refused them.
    assert!(matches!(
        Manifest::parse(b"{}"),
        Err(ManifestError::Shape(_))
    ));
}

fn entry_of(v: &Value) -> TreeEntry {
    let path = v["path"].as_str().unwrap().to_string();
    let node = match v["kind"].as_str().unwrap() {
        "directory" => Node::Directory,
        "symlink" => Node::Symlink {
            target: v["link_target"].as_str().unwrap().into(),
        },
        "file" => Node::File {
            size: v["size"].as_u64().unwrap(),
            sha256: v["sha256"].as_str().unwrap().parse::<ObjectId>().unwrap(),
            mode: v["mode"].as_u64().unwrap() as u32,
        },
        other => panic!("{other}"),
    };
    TreeEntry { path, node }
}

/// Every accepted answer of the harness, its entries recorded through
/// `Manifest`, gives the harness's four digests as store digests, and its
/// manifests parse back to themselves and pass the stored checks.
#[test]
fn the_harness_answers_give_their_digests_through_the_manifest() {
    let answers: Value = serde_json::from_str(ANSWERS).unwrap();
    let mut replayed = 0;
    for (name, answer) in answers["answers"].as_object().unwrap() {
        if answer["outcome"] == "rejected" {
            continue;
        }
        let entries: Vec<TreeEntry> = answer["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(entry_of)
            .collect();
        let dependencies: Vec<Dependency> = answer["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| Dependency {
                source: d["source"].as_str().unwrap().into(),
                target: d["target"].as_str().unwrap().into(),
                entries: d["entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(entry_of)
                    .collect(),
            })
            .collect();
        let tree = Manifest::tree(entries);
        assert_eq!(tree.digest.to_string(), answer["manifest_digest"], "{name}");
        let deps = Manifest::dependencies(dependencies);
        assert_eq!(
            deps.digest.to_string(),
            answer["dependency_manifest_digest"],
            "{name}"
        );
        let content = deps.tree.as_ref().unwrap().content_digest().unwrap();
        assert_eq!(
            content.to_string(),
            answer["dependency_content_digest"],
            "{name}"
        );
        let harness = answer["harness_identity"].as_str().unwrap();
        let task = Manifest::task(TaskRecord {
            declarations: answer["declarations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_str().unwrap().to_string())
                .collect(),
            repo_identity: answer["repo_identity"].as_str().unwrap().into(),
            resolved_sha: answer["resolved_sha"].as_str().unwrap().into(),
            harness_identity: (!harness.is_empty()).then(|| harness.into()),
            manifest_digest: answer["manifest_digest"].as_str().unwrap().parse().unwrap(),
            dependencies: super::DependencyDigests {
                content,
                manifest: answer["dependency_manifest_digest"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            },
        });
        assert_eq!(task.digest.to_string(), answer["digest"], "{name}");
        let present =
            |d: &ManifestDigest| (*d == tree.digest || *d == deps.digest).then_some(Kind::Tree);
        for m in [&tree, &deps, &task] {
            let parsed = Manifest::parse(&m.bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&parsed, m, "{name}");
            check(m.tree.as_ref().unwrap(), &present).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        replayed += 1;
    }
    assert_eq!(replayed, 13);
}

#[test]
fn stored_checks_refuse_what_no_capture_records() {
    let none = |_: &ManifestDigest| Some(Kind::Tree);
    let refused = |entries: Vec<TreeEntry>| check(&Stored::Tree(entries), &none).unwrap_err();
    assert!(check(&Stored::Tree(tree()), &none).is_ok());
    // A runtime's tree: permission bits and relative symlinks.
    let runtime = vec![
        TreeEntry::file_of("a", b"", 0o644),
        TreeEntry::symlink("b", "a"),
        TreeEntry::file_of("c", b"", 0o755),
    ];
    assert!(check(&Stored::Tree(runtime), &none).is_ok());
    assert!(check(&Stored::Dependencies(deps()), &none).is_ok());
    for bad in [
        vec![TreeEntry::file_of("a/b", b"", 0)],
        vec![TreeEntry::file_of("/a", b"", 0)],
        vec![TreeEntry::file_of("a//b", b"", 0)],
        vec![TreeEntry::file_of("..", b"", 0)],
        vec![
            TreeEntry::file_of("b", b"", 0),
            TreeEntry::file_of("a", b"", 0),
        ],
        vec![
            TreeEntry::file_of("a", b"", 0),
            TreeEntry::file_of("a", b"", 0),
        ],
        vec![TreeEntry::file_of("a", b"", 0o10644)],
        vec![TreeEntry::symlink("a", "/etc/passwd")],
        vec![TreeEntry::file_of("a".repeat(4097), b"", 0)],
    ] {
        assert!(matches!(refused(bad), CheckError::Path { .. }));
    }
    let mut d = deps();
    d[0].entries[2] = TreeEntry::symlink("payload/.bin/cli", "/etc/passwd");
    let e = check(&Stored::Dependencies(d), &none).unwrap_err();
    assert_eq!(e.to_string(), "could not accept the entry '00000/payload/.bin/cli': the symlink's target is not a relative path");
    let mut d = deps();
    d[1].entries[0].path = "other".into();
    assert!(check(&Stored::Dependencies(d), &none).is_err());
    let mut d = deps();
    d[1].entries[0] = TreeEntry::file_of("payload", b"", 0o17777);
    assert!(check(&Stored::Dependencies(d), &none).is_err());
    let huge = vec![TreeEntry {
        path: "a".into(),
        node: Node::File {
            size: 3 << 30,
            sha256: ObjectId::of(b""),
            mode: 0,
        },
    }];
    assert_eq!(refused(huge).rule(), "tree-manifest-bytes");
    // Sizes whose sum wraps around to 0 in 64 bits are still too many bytes.
    let half = |path: &str| TreeEntry {
        path: path.into(),
        node: Node::File {
            size: 1 << 63,
            sha256: ObjectId::of(b""),
            mode: 0,
        },
    };
    let wrapping = vec![half("a"), half("b")];
    assert_eq!(Stored::Tree(wrapping.clone()).total_bytes(), u64::MAX);
    assert_eq!(refused(wrapping).rule(), "tree-manifest-bytes");
    let task = Stored::Task(record("/r".into(), None));
    let tree_digest = task.named()[0];
    let e = check(&task, &|d: &ManifestDigest| {
        (*d == tree_digest).then_some(Kind::Tree)
    })
    .unwrap_err();
    assert_eq!(e.rule(), "tree-task-names-missing");
    assert!(check(&task, &none).is_ok());
}

/// An environment's manifest: read back from its bytes, refused when out
/// of (role, digest) order, with a pair twice, a bad role, a nested
/// environment, no member or a kind unknown; `check` wants each member
/// recorded with its kind; `closure` lists what is named before what names
/// it.
#[test]
fn an_environment_is_read_back_and_refused_by_its_rules() {
    use super::stored::{check_members, closure, parse, sort_members, MemberError};
    use super::EnvironmentMember;
    let d = |n: u8| ManifestDigest::from_bytes([n; 32]);
    let m = |role: &str, n: u8, kind: Kind| EnvironmentMember {
        role: role.into(),
        digest: d(n),
        kind,
    };
    let mut members = vec![
        m("b", 1, Kind::Tree),
        m("a", 2, Kind::Ce),
        m("a", 1, Kind::Task),
    ];
    sort_members(&mut members);
    assert_eq!(members[0], m("a", 1, Kind::Task));
    let env = Stored::Environment(members.clone());
    let bytes = env.bytes();
    assert!(bytes.starts_with(b"{\"members\":[{\"digest\":\"0101"));
    assert_eq!(Kind::of(&bytes), Kind::Environment);
    assert_eq!(parse(Kind::Environment, &bytes).unwrap(), env);
    let manifest = Manifest::parse(&bytes).unwrap();
    assert_eq!(manifest.profile(), "environment");
    assert!(manifest.entries.is_empty());
    assert_eq!(env.named(), vec![d(1), d(2), d(1)]);
    // Out of order, twice, bad role, nested, empty.
    let refused = |ms: Vec<EnvironmentMember>| {
        let bytes = Stored::Environment(ms).bytes();
        parse(Kind::Environment, &bytes).unwrap_err().to_string()
    };
    assert!(refused(vec![m("b", 1, Kind::Tree), m("a", 1, Kind::Tree)]).contains("order"));
    assert!(refused(vec![m("a", 1, Kind::Tree), m("a", 1, Kind::Tree)]).contains("twice"));
    assert!(refused(vec![m("A", 1, Kind::Tree)]).contains("role"));
    assert!(refused(vec![m("a", 1, Kind::Environment)]).contains("unknown kind"));
    assert!(refused(Vec::new()).contains("at least one"));
    assert_eq!(
        check_members(&[m("a", 1, Kind::Environment)]),
        Err(MemberError::Nested {
            role: "a".into(),
            digest: d(1)
        })
    );
    assert!(check_members(&[m(&"r".repeat(65), 1, Kind::Ce)]).is_err());
    // At most 65,536 members.
    let many = |n: usize| -> Vec<EnvironmentMember> {
        let mut v: Vec<EnvironmentMember> = (0..n)
            .map(|i| EnvironmentMember {
                role: format!("r{i:06}"),
                digest: d(1),
                kind: Kind::Tree,
            })
            .collect();
        sort_members(&mut v);
        v
    };
    assert!(check_members(&many(super::MAX_ENVIRONMENT_MEMBERS)).is_ok());
    assert_eq!(
        check_members(&many(super::MAX_ENVIRONMENT_MEMBERS + 1)),
        Err(MemberError::TooMany(super::MAX_ENVIRONMENT_MEMBERS + 1))
    );
    let other = br#"{"members":[],"schema_version":2}"#;
    assert!(parse(Kind::Environment, other).is_err());
    let spaced = String::from_utf8(bytes.clone())
        .unwrap()
        .replace(":[", ": [");
    assert!(parse(Kind::Environment, spaced.as_bytes()).is_err());
    // Recorded with its kind, or refused naming the member.
    let all = |_: &ManifestDigest| Some(Kind::Task);
    let e = check(&env, &all).unwrap_err();
    assert_eq!(e.rule(), "environment-member-kind");
    let kinds = |x: &ManifestDigest| {
        if *x == d(1) {
            Some(Kind::Task)
        } else {
            None
        }
    };
    let only_task = Stored::Environment(vec![m("a", 1, Kind::Task)]);
    assert!(check(&only_task, &kinds).is_ok());
    let e = check(&env, &kinds).unwrap_err();
    assert_eq!(e.rule(), "environment-member-missing");
    assert!(e.to_string().contains(&d(2).to_string()), "{e}");
    // What names comes after what it names, each once.
    let order = closure(&d(9), &mut |x| {
        Ok::<_, ()>(match x.as_bytes()[0] {
            9 => vec![d(3), d(1), d(2)],
            3 => vec![d(1), d(2)],
            _ => Vec::new(),
        })
    })
    .unwrap();
    assert_eq!(order, vec![d(1), d(2), d(3)]);
}
