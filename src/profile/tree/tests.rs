//! The tree digests against upstream's own.
//!
//! Every pinned value below was computed by running upstream's functions
//! (`_manifest_digest`, `_dependency_digests`, `_snapshot_digest` and the
//! sort of `_SnapshotBuilder.finished_entries`, from GitNexus's
//! `eval/workflow_bench/task_assets.py` at commit
//! 22aeeebaf3237f4a05ef28ef73796953f3fe6a65) under CPython 3.11 on the
//! same inputs, built as the harness's `AssetManifestEntry` and
//! `DependencySnapshot` values; each test names the function and input.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::*;
use crate::digest::{
    DependencyContentDigest, DependencyManifestDigest, TreeManifestDigest, TreeSnapshotDigest,
};

fn d(path: &str) -> TreeEntry {
    TreeEntry::directory(path)
}

fn f(path: &str, data: &[u8], mode: u32) -> TreeEntry {
    TreeEntry::file_of(path, data, mode)
}

fn sorted(mut entries: Vec<TreeEntry>) -> Vec<TreeEntry> {
    sort_entries(&mut entries);
    entries
}

fn hex<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse().unwrap()
}

/// A `sandbox_copy` tree: non-ASCII and astral names, a quote, a
/// backslash, a tab and DEL in names, an empty directory, an upper-case
/// name, and `a`, `a-b`, `a.txt`, `a/b`, which a string sort and a sort by
/// components order differently. Recorded out of order (directories
/// first); sorted as `finished_entries` sorts.
fn copy_tree() -> Vec<TreeEntry> {
    sorted(vec![
        d("eval"),
        d("eval/fixtures"),
        d("eval/fixtures/a"),
        d("eval/fixtures/\u{e9}"),
        d("eval/fixtures/empty"),
        f("eval/fixtures/a.txt", b"hello", 0),
        f("eval/fixtures/a/b", b"b\n", 0),
        f("eval/fixtures/a-b", b"dash", 0),
        f("eval/fixtures/Z", b"upper", 0),
        f("eval/fixtures/\u{e9}/\u{fc}.json", b"{}", 0),
        f("eval/fixtures/\u{1d11e} q\"\\.md", b"", 0),
        f("eval/fixtures/tab\there\u{7f}", b"x", 0),
        f("README.md", b"# readme\n", 0),
    ])
}

/// A `node_modules` dependency: symlinks (one with a non-ASCII target),
/// modes 0o755, 0o644 and setuid 0o4755, the `.vite-temp` directory.
fn node_modules() -> Vec<TreeEntry> {
    sorted(vec![
        d("payload"),
        d("payload/.bin"),
        TreeEntry::symlink("payload/.bin/tool", "../pkg/cli.js"),
        d("payload/pkg"),
        f("payload/pkg/cli.js", b"#!/usr/bin/env node\n", 0o755),
        f("payload/pkg/package.json", br#"{"name":"pkg"}"#, 0o644),
        f("payload/pkg/setuid", b"s", 0o4755),
        TreeEntry::symlink("payload/pkg/\u{f1}", "../pkg/\u{f1}o\u{f1}o"),
        d("payload/.vite-temp"),
    ])
}

/// A file dependency: its one entry is `payload` itself.
fn file_dependency() -> Dependency {
    Dependency {
        source: "tools/run.sh".into(),
        target: "bin/r\u{fc}n.sh".into(),
        entries: vec![f("payload", b"#!/bin/sh\necho hi\n", 0o755)],
    }
}

fn dependencies() -> Vec<Dependency> {
    vec![
        Dependency {
            source: "eval/deps/node_modules".into(),
            target: "node_modules".into(),
            entries: node_modules(),
        },
        file_dependency(),
    ]
}

const SHA: &str = "22aeeebaf3237f4a05ef28ef73796953f3fe6a65";

#[test]
fn entries_sort_by_path_string_as_the_harness_sorts_them() {
    let paths: Vec<String> = copy_tree().into_iter().map(|e| e.path).collect();
    // Upstream's order for the same entries (`[e.path.as_posix() for e in finished(...)]`).
    assert_eq!(
        paths,
        [
            "README.md",
            "eval",
            "eval/fixtures",
            "eval/fixtures/Z",
            "eval/fixtures/a",
            "eval/fixtures/a-b",
            "eval/fixtures/a.txt",
            "eval/fixtures/a/b",
            "eval/fixtures/empty",
            "eval/fixtures/tab\there\u{7f}",
            "eval/fixtures/\u{e9}",
            "eval/fixtures/\u{e9}/\u{fc}.json",
            "eval/fixtures/\u{1d11e} q\"\\.md",
        ]
    );
    let paths: Vec<String> = node_modules().into_iter().map(|e| e.path).collect();
    assert_eq!(
        paths,
        [
            "payload",
            "payload/.bin",
            "payload/.bin/tool",
            "payload/.vite-temp",
            "payload/pkg",
            "payload/pkg/cli.js",
            "payload/pkg/package.json",
            "payload/pkg/setuid",
            "payload/pkg/\u{f1}",
        ]
    );
}

#[test]
fn what_each_kind_records() {
    let dir = d("x");
    assert_eq!(
        (
            dir.kind(),
            dir.size(),
            dir.sha256(),
            dir.mode(),
            dir.link_target()
        ),
        ("directory", 0, None, 0, "")
    );
    let link = TreeEntry::symlink("l", "\u{f1}");
    assert_eq!(link.kind(), "symlink");
    assert_eq!(link.size(), 2, "the target's UTF-8 bytes");
    assert_eq!(
        link.sha256(),
        Some(crate::digest::ObjectId::of("\u{f1}".as_bytes()))
    );
    assert_eq!((link.mode(), link.link_target()), (0, "\u{f1}"));
    let file = f("p", b"abc", 0o4755);
    assert_eq!(
        (file.kind(), file.size(), file.mode(), file.link_target()),
        ("file", 3, 0o4755, "")
    );
}

#[test]
fn manifest_bytes_are_upstreams_for_one_non_ascii_entry() {
    // json.dumps of _manifest_digest's payload for
    // (AssetManifestEntry(P("eval/fixtures/é/ü.json"), "file", 2, sha256(b"{}")),).
    let one = [f("eval/fixtures/\u{e9}/\u{fc}.json", b"{}", 0)];
    assert_eq!(
        String::from_utf8(manifest_bytes(&one)).unwrap(),
        concat!(
            r#"[{"kind":"file","link_target":"","mode":0,"#,
            r#""path":"eval/fixtures/\u00e9/\u00fc.json","#,
            r#""sha256":"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}]"#
        )
    );
    assert_eq!(
        manifest_digest(&one),
        hex::<TreeManifestDigest>(
            "670813f496eb4741af0d3695d400b78b2bfff10ba98643a77149ba93fca9b2bf"
        )
    );
}

#[test]
fn manifest_digests_are_upstreams() {
    // _manifest_digest(()): the SHA-256 of `[]`.
    assert_eq!(
        manifest_digest(&[]),
        hex::<TreeManifestDigest>(
            "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
        )
    );
    // _manifest_digest(finished(copy_tree)).
    assert_eq!(
        manifest_digest(&copy_tree()),
        hex::<TreeManifestDigest>(
            "7ee3990af3a0c03665d10faec14ef226c932fb34d0b2758c1c58ba3a5ae6b14e"
        )
    );
}

#[test]
fn dependency_digests_are_upstreams() {
    // _dependency_digests((node_modules, file dependency)).
    let both = dependency_digests(&dependencies());
    assert_eq!(
        both.content,
        hex::<DependencyContentDigest>(
            "688066427f5f578c4de8eabe894c9bb4039c3374cb1a3c3ad261509a62a4c937"
        )
    );
    assert_eq!(
        both.manifest,
        hex::<DependencyManifestDigest>(
            "c188fd178913bfed5431efe2567fd4257debf1d8a52c9d80378b5c5ee40fa206"
        )
    );
    // _dependency_digests(()).
    let none = dependency_digests(&[]);
    assert_eq!(
        none.content,
        hex::<DependencyContentDigest>(
            "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
        )
    );
    assert_eq!(
        none.manifest,
        hex::<DependencyManifestDigest>(
            "d3b4762162da14671a9ab386aaf94b5ccd89eea18eb33b637134a52cdec1557b"
        )
    );
    assert_eq!(
        String::from_utf8(dependency_manifest_bytes(&[])).unwrap(),
        r#"{"dependencies":[],"schema_version":1}"#
    );
    // _dependency_digests((file dependency,)).
    let file = dependency_digests(&[file_dependency()]);
    assert_eq!(
        file.content,
        hex::<DependencyContentDigest>(
            "87086b01a062e69dbccee53cde6b598f0f9ba96cd7c5fa9c833d006568503bd4"
        )
    );
    assert_eq!(
        file.manifest,
        hex::<DependencyManifestDigest>(
            "0b86ba718fb92f8c1d3c4bc0ec281a4ff9069d8c14397eefc87db6c6120cb768"
        )
    );
}

#[test]
fn the_content_digest_ignores_declarations_and_the_manifest_digest_does_not() {
    // _dependency_digests with node_modules declared as
    // other/node_modules -> web/node_modules.
    let mut renamed = dependencies();
    renamed[0].source = "other/node_modules".into();
    renamed[0].target = "web/node_modules".into();
    let digests = dependency_digests(&renamed);
    assert_eq!(digests.content, dependency_digests(&dependencies()).content);
    assert_eq!(
        digests.manifest,
        hex::<DependencyManifestDigest>(
            "3ee40ad47f4c956d8bc15ef8f4515c64251edb75d5ecede9953e3c8809a26687"
        )
    );
}

/// The fixture's snapshot of the GitNexus checkout at `SHA`: `copy_tree()`
/// under `declarations`, both `dependencies()`, no harness checkout.
fn plain_identity(declarations: &[String]) -> SnapshotIdentity<'_> {
    SnapshotIdentity {
        repo_identity: Path::new("/work/repos/GitNexus"),
        resolved_sha: SHA,
        declarations,
        manifest_digest: manifest_digest(&copy_tree()),
        dependencies: dependency_digests(&dependencies()),
        harness_identity: None,
    }
}

#[test]
fn snapshot_digests_are_upstreams() {
    let declarations = ["eval/fixtures".to_string(), "README.md".to_string()];
    // _snapshot_digest(repo_identity=Path("/work/repos/GitNexus"),
    // resolved_sha=SHA, declarations=("eval/fixtures", "README.md"),
    // manifest_digest=copy_tree's, both dependencies' digests).
    let plain = plain_identity(&declarations);
    assert_eq!(
        snapshot_digest(&plain),
        hex::<TreeSnapshotDigest>(
            "ecf99df1f65a44dee935df2d24f9f4ee7a89d8303300c46915a0f62762b95977"
        )
    );

    // A harness identity, non-ASCII paths, `unbound`, no dependencies, and
    // a declaration kept exactly as written (`./eval//fixtures/`).
    let declarations = [
        "eval/workflow_bench/review_cases/case-1".to_string(),
        "./eval//fixtures/".to_string(),
    ];
    let harness = SnapshotIdentity {
        repo_identity: Path::new("/home/r\u{e9}mi/GitNexus"),
        resolved_sha: "unbound",
        declarations: &declarations,
        manifest_digest: manifest_digest(&copy_tree()),
        dependencies: dependency_digests(&[]),
        harness_identity: Some(Path::new("/opt/harness/\u{e9}val")),
    };
    assert_eq!(
        snapshot_digest(&harness),
        hex::<TreeSnapshotDigest>(
            "b26fbb2cc1424dc0fbcf89f757a371fd6ec83f029bf58bc55ccb9952913ec784"
        )
    );

    // A repository path that is not UTF-8: Path(os.fsdecode(b"/tmp/r\xffpo\xed\xa0\x80/\xc3")),
    // which Python holds as '/tmp/r\udcffpo\udced\udca0\udc80/\udcc3'.
    let raw = Path::new(OsStr::from_bytes(b"/tmp/r\xffpo\xed\xa0\x80/\xc3"));
    let odd = SnapshotIdentity {
        repo_identity: raw,
        resolved_sha: SHA,
        declarations: &[],
        manifest_digest: manifest_digest(&[]),
        dependencies: dependency_digests(&[]),
        harness_identity: None,
    };
    let bytes = String::from_utf8(snapshot_bytes(&odd)).unwrap();
    assert!(
        bytes.contains(r#""repo_identity":"/tmp/r\udcffpo\udced\udca0\udc80/\udcc3""#),
        "{bytes}"
    );
    assert_eq!(
        snapshot_digest(&odd),
        hex::<TreeSnapshotDigest>(
            "3a87d149d3f930b90335ae76b228847706457b6b24b7fa6ff2b06740c8432494"
        )
    );
}

/// Python's `json.dumps` of the same values, for many generated inputs.
mod against_python {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use proptest::prelude::*;
    use proptest::strategy::ValueTree as _;
    use proptest::test_runner::TestRunner;

    use super::*;
    use crate::digest::ObjectId;

    /// How many generated inputs one run checks.
    const CASES: usize = 300;

    /// Characters with their own escapes or at the edges of the ranges:
    /// quotes, backslashes, control characters, DEL, the BMP's edges, astral.
    const SPECIAL: &str = concat!(
        "\"\\/\0\n\r\t\u{8}\u{c}\u{1f}\u{7f}",
        "\u{80}\u{e9}\u{2028}\u{d7ff}\u{e000}\u{fffd}\u{ffff}",
        "\u{10000}\u{1d11e}\u{10ffff}",
    );

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                any::<char>(),
                prop::sample::select(SPECIAL.chars().collect::<Vec<_>>()),
                prop::char::range(' ', '~'),
            ],
            0..12,
        )
        .prop_map(|c| c.into_iter().collect())
    }

    fn entry() -> impl Strategy<Value = TreeEntry> {
        let node = prop_oneof![
            Just(Node::Directory),
            (any::<u64>(), any::<[u8; 32]>(), 0u32..0o10000).prop_map(|(size, sha, mode)| {
                Node::File {
                    size,
                    sha256: ObjectId::from_bytes(sha),
                    mode,
                }
            }),
            text().prop_map(|target| Node::Symlink { target }),
        ];
        (text(), node).prop_map(|(path, node)| TreeEntry { path, node })
    }

    fn dependency() -> impl Strategy<Value = Dependency> {
        (text(), text(), prop::collection::vec(entry(), 0..4)).prop_map(
            |(source, target, entries)| Dependency {
                source,
                target,
                entries,
            },
        )
    }

    #[derive(Debug)]
    struct Case {
        entries: Vec<TreeEntry>,
        dependencies: Vec<Dependency>,
        repo: Vec<u8>,
        harness: Option<Vec<u8>>,
        sha: String,
        declarations: Vec<String>,
    }

    fn case() -> impl Strategy<Value = Case> {
        let path_bytes = prop::collection::vec(
            prop_oneof![
                any::<u8>(),
                prop::sample::select(b"/a\xc3\xa9\xff".to_vec())
            ],
            0..16,
        );
        (
            prop::collection::vec(entry(), 0..5),
            prop::collection::vec(dependency(), 0..3),
            path_bytes.clone(),
            prop::option::of(path_bytes),
            text(),
            prop::collection::vec(text(), 0..3),
        )
            .prop_map(
                |(entries, dependencies, repo, harness, sha, declarations)| Case {
                    entries,
                    dependencies,
                    repo: [b"/".as_slice(), &repo]
                        .concat()
                        .into_iter()
                        .filter(|b| *b != 0)
                        .collect(),
                    harness: harness.map(|h| {
                        [b"/".as_slice(), &h]
                            .concat()
                            .into_iter()
                            .filter(|b| *b != 0)
                            .collect()
                    }),
                    sha,
                    declarations,
                },
            )
    }

    fn hex_of(bytes: &[u8]) -> String {
        let mut s = String::new();
        crate::digest::encode_hex(bytes, &mut s);
        s
    }

    /// An entry as the script reads it: kind, path, size, sha256, mode,
    /// link target, each string as the hex of its UTF-8.
    fn entry_line(e: &TreeEntry) -> String {
        format!(
            "{} {} {} {} {} {}",
            e.kind(),
            hex_of(e.path.as_bytes()),
            e.size(),
            e.sha256().map(|s| s.to_hex()).unwrap_or_else(|| "-".into()),
            e.mode(),
            hex_of(e.link_target().as_bytes()),
        )
    }

    /// Builds, from the lines it is given, the payloads the harness builds
    /// and prints `ok` or the first line whose bytes differ from ours.
    const SCRIPT: &str = r#"
import json, os, sys
from pathlib import Path
def s(h): return bytes.fromhex(h).decode("utf-8")
def dumps(v): return json.dumps(v, sort_keys=True, separators=(",", ":")).encode()
def entry(w):
    return {"kind": w[0], "path": s(w[1]), "size": int(w[2]), "sha256": "" if w[3] == "-" else w[3],
            "mode": int(w[4]), "link_target": s(w[5])}
lines = sys.stdin.read().split("\n")
i, n, bad = 0, 0, []
while i < len(lines) and lines[i]:
    k = int(lines[i]); i += 1
    entries = [entry(lines[i + j].split(" ")) for j in range(k)]; i += k
    deps = []
    for _ in range(int(lines[i][5:])):
        i += 1
        _, src, tgt, k = lines[i].split(" ")
        es = [entry(lines[i + 1 + j].split(" ")) for j in range(int(k))]
        deps.append((s(src), s(tgt), es)); i += int(k)
    i += 1
    assert lines[i] == "end"; i += 1
    w = lines[i].split(" "); i += 1
    content = [{"entries": es} for _, _, es in deps]
    snap = {"declarations": tuple(s(x) for x in w[5:]), "dependency_content_digest": w[0],
            "dependency_manifest_digest": w[1], "harness_identity": "" if w[2] == "-" else str(Path(os.fsdecode(bytes.fromhex(w[2])))),
            "manifest_digest": w[3], "repo_identity": str(Path(os.fsdecode(bytes.fromhex(w[4])))), "resolved_sha": s(lines[i]), "schema_version": 3}
    i += 1
    ours = [bytes.fromhex(lines[i + j]) for j in range(4)]; i += 4
    theirs = [dumps(entries), dumps(content),
              dumps({"dependencies": [{"content": c, "source": src, "target": tgt} for (src, tgt, _), c in zip(deps, content)], "schema_version": 1}),
              dumps(snap)]
    for a, b in zip(ours, theirs):
        if a != b: bad.append((n, a, b))
    n += 1
print("ok %d" % n if not bad else ("differ %r" % (bad[0],))[:4000])
"#;

    #[test]
    fn the_encodings_are_pythons_json_dumps() {
        if !python3_runs() {
            eprintln!(
                "skipped: python3 is not on PATH; the pinned digests above still hold the encoding"
            );
            return;
        }
        let mut runner = TestRunner::deterministic();
        let strategy = case();
        let mut input = String::new();
        for _ in 0..CASES {
            let c = strategy.new_tree(&mut runner).unwrap().current();
            input.push_str(&format!("{}\n", c.entries.len()));
            for e in &c.entries {
                input.push_str(&entry_line(e));
                input.push('\n');
            }
            input.push_str(&format!("deps {}\n", c.dependencies.len()));
            for dep in &c.dependencies {
                input.push_str(&format!(
                    "dep {} {} {}\n",
                    hex_of(dep.source.as_bytes()),
                    hex_of(dep.target.as_bytes()),
                    dep.entries.len()
                ));
                for e in &dep.entries {
                    input.push_str(&entry_line(e));
                    input.push('\n');
                }
            }
            let digests = dependency_digests(&c.dependencies);
            let manifest = manifest_digest(&c.entries);
            let repo = Path::new(OsStr::from_bytes(&c.repo));
            let harness = c
                .harness
                .as_deref()
                .map(|h| Path::new(OsStr::from_bytes(h)));
            input.push_str("end\n");
            input.push_str(&format!(
                "{} {} {} {} {}",
                digests.content,
                digests.manifest,
                harness
                    .map(|_| hex_of(c.harness.as_deref().unwrap_or_default()))
                    .unwrap_or_else(|| "-".into()),
                manifest,
                hex_of(&c.repo),
            ));
            for d in &c.declarations {
                input.push(' ');
                input.push_str(&hex_of(d.as_bytes()));
            }
            input.push('\n');
            input.push_str(&hex_of(c.sha.as_bytes()));
            input.push('\n');
            let identity = SnapshotIdentity {
                repo_identity: repo,
                resolved_sha: &c.sha,
                declarations: &c.declarations,
                manifest_digest: manifest,
                dependencies: digests,
                harness_identity: harness,
            };
            for bytes in [
                manifest_bytes(&c.entries),
                dependency_content_bytes(&c.dependencies),
                dependency_manifest_bytes(&c.dependencies),
                snapshot_bytes(&identity),
            ] {
                assert!(bytes.is_ascii());
                input.push_str(&hex_of(&bytes));
                input.push('\n');
            }
        }
        let mut child = Command::new("python3")
            .args(["-c", SCRIPT])
            .env("PYTHONUTF8", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("ok {CASES}")
        );
    }
}

#[test]
fn paths_are_written_as_pythons_str_of_a_path() {
    // str(Path(x)) under CPython 3.11 for each x.
    for (raw, python) in [
        ("/a//./b/", "/a/b"),
        ("//a", "//a"),
        ("///a", "/a"),
        ("", "."),
        ("a/./", "a"),
        ("/", "/"),
        ("//", "//"),
        ("/.", "/"),
        ("/a/../b", "/a/../b"),
    ] {
        assert_eq!(
            digests::python_path_str(raw.as_bytes()),
            python.as_bytes(),
            "{raw:?}"
        );
    }
}

/// Whether `python3` is on PATH and runs; the tests that ask it skip, with
/// a printed reason, where it does not (the pinned digests still hold).
fn python3_runs() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_documented_example_is_what_the_functions_write() {
    // docs/format.md, "Tree manifests and digests", "Example".
    let file = [file_dependency()];
    assert_eq!(
        String::from_utf8(dependency_content_bytes(&file)).unwrap(),
        concat!(
            r#"[{"entries":[{"kind":"file","link_target":"","mode":493,"path":"payload","#,
            r#""sha256":"299001868fb8c02fd431c336c6d058f5558c5dff5b5af5e6fe04b870a6a9cbba","size":18}]}]"#
        )
    );
    assert_eq!(
        String::from_utf8(dependency_manifest_bytes(&file)).unwrap(),
        concat!(
            r#"{"dependencies":[{"content":{"entries":[{"kind":"file","link_target":"","mode":493,"path":"payload","#,
            r#""sha256":"299001868fb8c02fd431c336c6d058f5558c5dff5b5af5e6fe04b870a6a9cbba","size":18}]},"#,
            r#""source":"tools/run.sh","target":"bin/r\u00fcn.sh"}],"schema_version":1}"#
        )
    );
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/format.md")).unwrap();
    let digests = dependency_digests(&file);
    for hex in [digests.content.to_hex(), digests.manifest.to_hex()] {
        assert!(doc.contains(&hex), "docs/format.md lacks {hex}");
    }
}

#[test]
fn the_documented_python_recomputes_every_digest() {
    use std::process::Command;
    if !python3_runs() {
        eprintln!("skipped: python3 is not on PATH; the pinned digests still hold");
        return;
    }
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/format.md")).unwrap();
    let section = doc.split("### Recomputing them").nth(1).unwrap();
    let recipe = section
        .split("```python\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap();
    let json = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    let deps = dependencies();
    let deps_py: Vec<String> = deps
        .iter()
        .map(|d| {
            format!(
                "({:?}, {:?}, json.loads({:?}))",
                d.source,
                d.target,
                json(manifest_bytes(&d.entries)),
            )
        })
        .collect();
    let script = format!(
        "import json\nentries = json.loads({:?})\ndeps = [{}]\ndeclarations = [\"eval/fixtures\", \"README.md\"]\n\
         harness = None\nrepo = \"/work/repos/GitNexus\"\nsha = {:?}\n{}\n\
         print(manifest, dependency_content, dependency_manifest, snapshot)\n",
        json(manifest_bytes(&copy_tree())),
        deps_py.join(", "),
        SHA,
        recipe,
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let declarations = ["eval/fixtures".to_string(), "README.md".to_string()];
    let identity = plain_identity(&declarations);
    let ours = format!(
        "{} {} {} {}",
        identity.manifest_digest,
        identity.dependencies.content,
        identity.dependencies.manifest,
        snapshot_digest(&identity)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ours);
}

#[test]
fn a_node_modules_dependency_gets_the_vite_temp_directory_as_the_harness_gives_it() {
    // node_modules() is the list upstream's builder finishes with after its
    // ensure_directory(payload/.vite-temp); its digests are pinned above.
    let captured: Vec<TreeEntry> = node_modules()
        .into_iter()
        .filter(|e| e.path != "payload/.vite-temp")
        .collect();
    for target in ["node_modules", "web/node_modules/", "./a//node_modules/."] {
        let mut entries = captured.clone();
        add_vite_temp(&mut entries, target).unwrap();
        assert_eq!(entries, node_modules(), "{target}");
        // A second time changes nothing: the directory is there.
        add_vite_temp(&mut entries, target).unwrap();
        assert_eq!(entries, node_modules(), "{target}");
    }
    // Another target's last component, or a root that is a file: nothing.
    for target in ["vendor", "node_modules/x", "node_modules.bak", "/"] {
        let mut entries = captured.clone();
        add_vite_temp(&mut entries, target).unwrap();
        assert_eq!(entries, captured, "{target}");
    }
    let mut file = file_dependency().entries;
    add_vite_temp(&mut file, "node_modules").unwrap();
    assert_eq!(file, file_dependency().entries);
    // A file where the directory goes is refused, as the harness refuses it.
    let mut clash = captured.clone();
    clash.push(f("payload/.vite-temp", b"", 0o644));
    sort_entries(&mut clash);
    assert_eq!(
        add_vite_temp(&mut clash, "node_modules"),
        Err(TreeError::Collides("payload/.vite-temp".into()))
    );
    // With the directory added, the dependency digests are upstream's.
    let mut deps = dependencies();
    deps[0].entries = captured;
    let target = deps[0].target.clone();
    add_vite_temp(&mut deps[0].entries, &target).unwrap();
    assert_eq!(
        dependency_digests(&deps).manifest,
        hex::<DependencyManifestDigest>(
            "c188fd178913bfed5431efe2567fd4257debf1d8a52c9d80378b5c5ee40fa206"
        )
    );
}
