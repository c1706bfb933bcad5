//! Captures of real directories against the harness's own answers for the same trees.
//!
//! Every expected value below (entries, totals, the shared budget, and each
//! rejection's text) was computed by running upstream's own walk on the
//! same tree, built by the same recipe, outside this repository: GitNexus's
//! `eval/workflow_bench/task_assets.py` at commit
//! 22aeeebaf3237f4a05ef28ef73796953f3fe6a65 under CPython 3.11.7 on Linux,
//! its `_open_relative` and `_SnapshotBuilder.copy_descriptor` for each
//! `sandbox_copy` declaration (one builder for all), then, as its
//! `TaskAssetCache.prepare` does, one builder per dependency at `payload`
//! (`allow_symlinks`, `preserve_modes`), `ensure_directory` of
//! `payload/.vite-temp` for a directory mounted at a `node_modules` target,
//! `finished_entries` and `_validate_dependency_symlinks`, all sharing one
//! `_SnapshotBudget`; lowered bounds by setting the module's
//! `MAX_TASK_ASSET_*` constants, as upstream's tests monkeypatch them.

use std::os::fd::AsFd;
use std::path::Path;

use super::capture::{
    capture_dependency, Budget, Builder, CaptureError, DeferredFault, DeferredFile, FileSink,
    Flavour, Limits,
};
use super::TreeEntry;
use crate::digest::ObjectId;

/// One item of a fixture tree.
enum Item {
    /// A file with its text and mode.
    F(&'static str, &'static str, u32),
    /// A directory with its mode.
    D(&'static str, u32),
    /// A symlink with its target.
    L(&'static str, &'static str),
    /// A FIFO.
    P(&'static str),
}
use Item::{D, F, L, P};

/// An entry as the harness's `AssetManifestEntry` fields: path, kind,
/// size, sha256, mode, link_target.
type E = (
    &'static str,
    &'static str,
    u64,
    &'static str,
    u32,
    &'static str,
);

/// A directory entry: no size, no digest, mode 0.
const fn dir(path: &'static str) -> E {
    (path, "directory", 0, "", 0o0, "")
}

/// A regular file's entry with its size, SHA-256 and recorded mode.
const fn file(path: &'static str, size: u64, sha256: &'static str, mode: u32) -> E {
    (path, "file", size, sha256, mode, "")
}

/// A symlink's entry: its target's length and SHA-256, mode 0.
const fn link(path: &'static str, size: u64, sha256: &'static str, target: &'static str) -> E {
    (path, "symlink", size, sha256, 0o0, target)
}

/// Which of the harness's bounds a case lowers, as upstream's tests
/// monkeypatch one `MAX_TASK_ASSET_*` constant.
#[derive(Clone, Copy)]
enum Lowered {
    /// Upstream's own bounds.
    Upstream,
    /// `MAX_TASK_ASSET_ENTRIES`.
    Entries(u64),
    /// `MAX_TASK_ASSET_PATH_BYTES`.
    PathBytes(u64),
    /// `MAX_TASK_ASSET_BYTES`.
    TotalBytes(u64),
}
use Lowered::{Entries, PathBytes, TotalBytes, Upstream};

impl Lowered {
    fn limits(self) -> Limits {
        let upstream = Limits::default();
        match self {
            Upstream => upstream,
            Entries(n) => Limits {
                max_entries: n,
                ..upstream
            },
            PathBytes(n) => Limits {
                max_path_bytes: n,
                ..upstream
            },
            TotalBytes(n) => Limits {
                max_total_bytes: n,
                ..upstream
            },
        }
    }
}

struct Answer {
    copy: &'static [E],
    copy_total: u64,
    deps: &'static [(&'static [E], u64)],
    budget: (u64, u64),
}

struct Case {
    tree: &'static [Item],
    copy: &'static [&'static str],
    deps: &'static [(&'static str, &'static str)],
    limits: Lowered,
    expect: Result<Answer, &'static str>,
}

fn build(root: &Path, tree: &[Item]) {
    use std::os::unix::fs::PermissionsExt;
    let set = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let mut dirs = Vec::new();
    for item in tree {
        let (F(path, ..) | D(path, _) | L(path, _) | P(path)) = item;
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        match item {
            F(_, data, mode) => {
                std::fs::write(&p, data).unwrap();
                set(&p, *mode);
            }
            D(_, mode) => {
                std::fs::create_dir_all(&p).unwrap();
                dirs.push((p, *mode));
            }
            L(_, target) => std::os::unix::fs::symlink(target, &p).unwrap(),
            P(_) => rustix::fs::mknodat(
                rustix::fs::CWD,
                &p,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o644),
                0,
            )
            .unwrap(),
        }
    }
    for (p, mode) in dirs.iter().rev() {
        set(p, *mode);
    }
}

fn fields(e: &TreeEntry) -> (String, &'static str, u64, String, u32, String) {
    (
        e.path.clone(),
        e.kind(),
        e.size(),
        e.sha256().map(|s| s.to_hex()).unwrap_or_default(),
        e.mode(),
        e.link_target().to_string(),
    )
}

fn expected(entries: &[E]) -> Vec<(String, &'static str, u64, String, u32, String)> {
    entries
        .iter()
        .map(|(p, k, s, h, m, l)| (p.to_string(), *k, *s, h.to_string(), *m, l.to_string()))
        .collect()
}

type Got = (Vec<TreeEntry>, u64, Vec<(Vec<TreeEntry>, u64)>, Budget);

fn run(root: &Path, case: &Case) -> Result<Got, CaptureError> {
    let repo = rustix::fs::open(
        root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::NOFOLLOW,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let limits = case.limits.limits();
    let mut budget = Budget::default();
    let mut builder = Builder::new(Flavour::SandboxCopy, limits, &mut budget);
    for declaration in case.copy {
        builder.capture(repo.as_fd(), declaration)?;
    }
    let copy = builder.finished_entries();
    let copy_total = builder.total_bytes();
    let mut deps = Vec::new();
    for (source, target) in case.deps {
        let dep = capture_dependency(repo.as_fd(), source, target, limits, &mut budget)?;
        deps.push((dep.entries, dep.total_bytes));
    }
    Ok((copy, copy_total, deps, budget))
}

/// Builds `case`'s tree, captures it, and compares all with the harness's
/// answer, `name` in every message.
fn check(name: &str, case: &Case) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    build(&root, case.tree);
    let got = run(&root, case);
    match (&case.expect, got) {
        (Err(message), Err(e)) => assert_eq!(e.to_string(), *message, "{name}: the refusal"),
        (Ok(answer), Ok((copy, copy_total, deps, budget))) => {
            let copy: Vec<_> = copy.iter().map(fields).collect();
            assert_eq!(copy, expected(answer.copy), "{name}: the copy's entries");
            assert_eq!(copy_total, answer.copy_total, "{name}: the copy's total");
            assert_eq!(deps.len(), answer.deps.len(), "{name}: the dependencies");
            for (i, ((entries, total), (want, want_total))) in
                deps.iter().zip(answer.deps).enumerate()
            {
                let entries: Vec<_> = entries.iter().map(fields).collect();
                assert_eq!(entries, expected(want), "{name}: dependency {i}'s entries");
                assert_eq!(total, want_total, "{name}: dependency {i}'s total");
            }
            assert_eq!(
                (budget.entries, budget.total_bytes),
                answer.budget,
                "{name}: the budget"
            );
        }
        (Err(message), Ok(_)) => panic!("{name}: accepted a tree upstream refuses with: {message}"),
        (Ok(_), Err(e)) => panic!("{name}: refused a tree upstream accepts: {e}"),
    }
}

/// Every pinned tree, by name: its recipe, its inputs, the bounds it
/// lowers, and the harness's answer or refusal.
// Laid out by hand, one entry a line: rustfmt gives up on a table whose
// rows (a path and a SHA-256) are wider than its width.
#[rustfmt::skip]
const CASES: &[(&str, Case)] = &[
    ("copy_nested_and_single_file", Case {
        tree: &[
            F("README.md", "readme\n", 0o644), F("assets/index.json", "{\"graph\":1}\n", 0o644),
            F("assets/nested/deep/leaf.txt", "leaf\n", 0o600),
            F("assets/nested/tool.sh", "#!/bin/sh\necho tool\n", 0o755), D("assets/empty", 0o755),
            F("assets/a-b", "dash\n", 0o644), F("assets/a.txt", "dot\n", 0o644),
            F("assets/a/b", "slash\n", 0o644), F("config/settings.json", "{}\n", 0o644),
            F("config/other.txt", "not declared\n", 0o644),
            F("docs/guide/\u{fc}n\u{ef}code.md", "unicode name\n", 0o644),
        ], copy: &["assets", "config/settings.json", "./docs//guide/"], deps: &[], limits: Upstream,
        expect: Ok(Answer {
            copy: &[
                dir("assets"), dir("assets/a"),
                file("assets/a-b", 5, "f8359416cedbf4b44bd1cab71b791b4121e3b33748187c530e70207af87c3f39", 0o0),
                file("assets/a.txt", 4, "5ddbce254c08372e429a250112c6f4593868687ab01e9a126193e5a83560362b", 0o0),
                file("assets/a/b", 6, "8578a26bad9cf662e6e0cd91540eea63fb2ed5b5b2cebc471364c137b12931e6", 0o0),
                dir("assets/empty"),
                file("assets/index.json", 12, "4c5b736d484a1bfe8d92aed5534fdc52681c2eebeca0e302041c2a972f0d66d4", 0o0),
                dir("assets/nested"), dir("assets/nested/deep"),
                file("assets/nested/deep/leaf.txt", 5, "26d0bac9f0c7a35b2f3322a0f4ad4517265f56b2c0f4b2ed7cb5cbd30c5868e2", 0o0),
                file("assets/nested/tool.sh", 20, "bf664cf84f00f6ed76164c8457fdeaf8e4dee547226e9ffcf8274e2d2246fed9", 0o0),
                dir("config"),
                file("config/settings.json", 3, "ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356", 0o0),
                dir("docs"), dir("docs/guide"),
                file("docs/guide/\u{fc}n\u{ef}code.md", 13, "f682a5ef26796a5f98678d3a028d07c8853e6c5fc01005b55bd95852d00fc917", 0o0),
            ], copy_total: 68, deps: &[], budget: (16, 68),
        }),
    }),
    ("copy_refuses_a_symlink", Case {
        tree: &[F("assets/a.txt", "a\n", 0o644), L("assets/link", "a.txt")], copy: &["assets"],
        deps: &[], limits: Upstream,
        expect: Err("sandbox_copy must not traverse a symlink: assets/link"),
    }),
    ("copy_refuses_a_symlinked_declaration", Case {
        tree: &[F("real/a.txt", "a\n", 0o644), L("assets", "real")], copy: &["assets/a.txt"],
        deps: &[], limits: Upstream,
        expect: Err("sandbox_copy must not traverse a symlink: assets"),
    }),
    ("copy_refuses_a_fifo", Case {
        tree: &[F("assets/a.txt", "a\n", 0o644), P("assets/pipe")], copy: &["assets"], deps: &[],
        limits: Upstream,
        expect: Err("sandbox_copy accepts only regular files and directories: assets/pipe"),
    }),
    ("copy_parent_not_a_directory", Case {
        tree: &[F("README.md", "r\n", 0o644)], copy: &["README.md/x"], deps: &[], limits: Upstream,
        expect: Err("sandbox_copy parent must be a directory: README.md"),
    }),
    ("copy_missing_declaration", Case {
        tree: &[F("README.md", "r\n", 0o644)], copy: &["missing/x"], deps: &[], limits: Upstream,
        expect: Err("sandbox_copy path is unavailable: missing: [Errno 2] No such file or directory: 'missing'"),
    }),
    ("dependency_node_modules", Case {
        tree: &[
            F("README.md", "workspace readme\n", 0o644),
            F("gitnexus/node_modules/pkg-a/package.json", "{\"name\":\"pkg-a\"}\n", 0o644),
            F("gitnexus/node_modules/pkg-a/bin/cli.js", "#!/usr/bin/env node\nconsole.log('a')\n", 0o755),
            F("gitnexus/node_modules/pkg-a/lib/owner.txt", "owner only\n", 0o600),
            D("gitnexus/node_modules/pkg-a/empty", 0o755),
            F("gitnexus/node_modules/pkg-b/index.js", "module.exports = require('pkg-a')\n", 0o644),
            L("gitnexus/node_modules/pkg-b/node_modules/pkg-a", "../../pkg-a"),
            F("gitnexus/node_modules/pkg-c/run", "#!/bin/sh\nexit 0\n", 0o750),
            F("gitnexus/node_modules/pkg-c/setuid", "x\n", 0o4755),
            L("gitnexus/node_modules/.bin/cli", "../pkg-a/bin/cli.js"),
            L("gitnexus/node_modules/.bin/pkg-b", "../pkg-b/index.js"),
            L("gitnexus/node_modules/.bin/workspace-readme", "../../README.md"),
            D("gitnexus/node_modules/.cache", 0o700), F("assets/graph.bin", "GITNEXUS\n", 0o644),
        ], copy: &["assets"], deps: &[("gitnexus/node_modules", "gitnexus/node_modules")],
        limits: Upstream, expect: Ok(Answer {
            copy: &[
                dir("assets"),
                file("assets/graph.bin", 9, "59072e20c5e57257746bafbfb5f4de64899614ede08bc634c28282f9cff1f992", 0o0),
            ], copy_total: 9, deps: &[(&[
                dir("payload"), dir("payload/.bin"),
                link("payload/.bin/cli", 19, "643998e6ef1fa7960ed3fc4d5900582552a3a3bbf2f6c4f7738ee693dbcf566f", "../pkg-a/bin/cli.js"),
                link("payload/.bin/pkg-b", 17, "980c8cac40866e41d9d63d0aa2944984679bf5f522ae2df57270055c5ccc080a", "../pkg-b/index.js"),
                link("payload/.bin/workspace-readme", 15, "4cc4e4c8a5120617ab0800cd8f722a9797f7a9c04d4a159fd42a4419f82c7c30", "../../README.md"),
                dir("payload/.cache"), dir("payload/.vite-temp"), dir("payload/pkg-a"),
                dir("payload/pkg-a/bin"),
                file("payload/pkg-a/bin/cli.js", 37, "9dd792327ea0ebdb5ead5204da185d6331e5dcc7faced42effed06c9c8af8727", 0o755),
                dir("payload/pkg-a/empty"), dir("payload/pkg-a/lib"),
                file("payload/pkg-a/lib/owner.txt", 11, "978de8977233c2143ed9a3425ca70b9988db5ae925d39872016d2431cb7a5980", 0o600),
                file("payload/pkg-a/package.json", 17, "a4e38772f3cdc9ff98977d3728df486f300cd455ba905506e2b6c7b3bf72fd22", 0o644),
                dir("payload/pkg-b"),
                file("payload/pkg-b/index.js", 34, "c22621a47b1c20a52174ed9ffb7a0fd3be2bf52989942a0afda95e620f3763bd", 0o644),
                dir("payload/pkg-b/node_modules"),
                link("payload/pkg-b/node_modules/pkg-a", 11, "ddf5c2ae71ca752c8c7a8a57b345068b299eb027c250e2e55c3e8457be2b4d57", "../../pkg-a"),
                dir("payload/pkg-c"),
                file("payload/pkg-c/run", 17, "306c6ca7407560340797866e077e053627ad409277d1b9da58106fce4cf717cb", 0o750),
                file("payload/pkg-c/setuid", 2, "73cb3858a687a8494ca3323053016282f3dad39d42cf62ca4e79dda2aac7d9ac", 0o4755),
            ], 180)], budget: (23, 189),
        }),
    }),
    ("dependency_vendor_and_file", Case {
        tree: &[
            F("third_party/lib/a.txt", "a\n", 0o644), F("third_party/lib/sub/b.txt", "b\n", 0o640),
            L("third_party/lib/link", "sub/b.txt"), L("third_party/lib/dirlink", "sub"),
            L("third_party/lib/through", "dirlink/../a.txt"), D("third_party/lib/empty", 0o700),
            F("tools/run.sh", "#!/bin/sh\necho run\n", 0o755),
        ], copy: &[],
        deps: &[("third_party/lib", "vendor/lib"), ("tools/run.sh", "bin/node_modules")],
        limits: Upstream, expect: Ok(Answer {
            copy: &[], copy_total: 0, deps: &[
                (&[
                    dir("payload"),
                    file("payload/a.txt", 2, "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7", 0o644),
                    link("payload/dirlink", 3, "ddc6e2b224d0fd821669202258386936fc9ce2899e215eec6322b95f8dd96d6a", "sub"),
                    dir("payload/empty"),
                    link("payload/link", 9, "8792787d36836ac259ca93c2cd818a852c2cd1009b0243010c188f028c99a040", "sub/b.txt"),
                    dir("payload/sub"),
                    file("payload/sub/b.txt", 2, "0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f", 0o640),
                    link("payload/through", 16, "c368fd40da6caab5c0531efe134bb3a5c2eb62b060f9f7596c64bf5e087a69e3", "dirlink/../a.txt"),
                ], 32), (
                    &[
                        file("payload", 19, "a4e0317eafab5cf1bc4a0041c7c8aeb6ece56fe72e7b2b3017a8a6574614cd35", 0o755),
                    ], 19,
                ),
            ], budget: (9, 51),
        }),
    }),
    ("dependency_vite_temp_present", Case {
        tree: &[F("node_modules/pkg/index.js", "x\n", 0o644), D("node_modules/.vite-temp", 0o755)],
        copy: &[], deps: &[("node_modules", "web/node_modules/")], limits: Upstream,
        expect: Ok(Answer {
            copy: &[], copy_total: 0, deps: &[(&[
                dir("payload"), dir("payload/.vite-temp"), dir("payload/pkg"),
                file("payload/pkg/index.js", 2, "73cb3858a687a8494ca3323053016282f3dad39d42cf62ca4e79dda2aac7d9ac", 0o644),
            ], 2)], budget: (4, 2),
        }),
    }),
    ("dependency_link_escaping_the_workspace", Case {
        tree: &[F("nm/a.js", "a\n", 0o644), L("nm/.bin/x", "../../../../etc/passwd")], copy: &[],
        deps: &[("nm", "node_modules")], limits: Upstream,
        expect: Err("dependency symlink escapes the sandbox workspace: payload/.bin/x"),
    }),
    ("dependency_link_leaving_the_payload_inside_the_workspace", Case {
        tree: &[F("nm/a.js", "a\n", 0o644), L("nm/.bin/x", "../../../README.md")], copy: &[],
        deps: &[("nm", "a/node_modules")], limits: Upstream, expect: Ok(Answer {
            copy: &[], copy_total: 0, deps: &[(&[
                dir("payload"), dir("payload/.bin"),
                link("payload/.bin/x", 18, "648796239e6678506879bb030cb15c62b8c9b66c50849be9b2560cfa81e1c525", "../../../README.md"),
                dir("payload/.vite-temp"),
                file("payload/a.js", 2, "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7", 0o644),
            ], 20)], budget: (5, 20),
        }),
    }),
    ("dependency_dangling_link", Case {
        tree: &[F("nm/a.js", "a\n", 0o644), L("nm/.bin/x", "../missing.js")], copy: &[],
        deps: &[("nm", "node_modules")], limits: Upstream,
        expect: Err("dependency symlink is dangling or escapes its snapshot: payload/.bin/x"),
    }),
    ("dependency_link_dangling_through_a_symlinked_directory", Case {
        tree: &[
            F("nm/a.js", "a\n", 0o644), F("nm/sub/deep/b.js", "b\n", 0o644), L("nm/dl", "sub/deep"),
            L("nm/x", "dl/../a.js"),
        ], copy: &[], deps: &[("nm", "node_modules")], limits: Upstream,
        expect: Err("dependency symlink is dangling or escapes its snapshot: payload/x"),
    }),
    ("dependency_link_resolving_through_a_symlinked_directory", Case {
        tree: &[
            F("nm/sub/a.js", "a\n", 0o644), F("nm/sub/deep/b.js", "b\n", 0o644),
            L("nm/dl", "sub/deep"), L("nm/x", "dl/../a.js"),
        ], copy: &[], deps: &[("nm", "node_modules")], limits: Upstream, expect: Ok(Answer {
            copy: &[], copy_total: 0, deps: &[(&[
                dir("payload"), dir("payload/.vite-temp"),
                link("payload/dl", 8, "9ea08fe777e8a60fe5ace6ccb4d800c7f06dfc0262236cc0a3c91b4e120405ac", "sub/deep"),
                dir("payload/sub"),
                file("payload/sub/a.js", 2, "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7", 0o644),
                dir("payload/sub/deep"),
                file("payload/sub/deep/b.js", 2, "0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f", 0o644),
                link("payload/x", 10, "d043827bf9afab3457782c43c4cca10be44779971c2dfd34d3eadbc973ffa1bf", "dl/../a.js"),
            ], 22)], budget: (8, 22),
        }),
    }),
    ("dependency_symlink_loop", Case {
        tree: &[L("nm/l1", "l2"), L("nm/l2", "l1")], copy: &[], deps: &[("nm", "node_modules")],
        limits: Upstream,
        expect: Err("dependency symlink is dangling or escapes its snapshot: payload/l1"),
    }),
    ("dependency_link_to_itself_through_the_payload", Case {
        tree: &[F("nm/a.js", "a\n", 0o644), L("nm/x", "../nm/a.js")], copy: &[],
        deps: &[("nm", "node_modules")], limits: Upstream, expect: Ok(Answer {
            copy: &[], copy_total: 0, deps: &[(&[
                dir("payload"), dir("payload/.vite-temp"),
                file("payload/a.js", 2, "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7", 0o644),
                link("payload/x", 10, "65dc2527d9e1b29075ef2ef953243569534127d6a491415e7265c4bd0acd9c37", "../nm/a.js"),
            ], 12)], budget: (4, 12),
        }),
    }),
    ("dependency_absolute_link", Case {
        tree: &[L("nm/x", "/etc/passwd")], copy: &[], deps: &[("nm", "node_modules")],
        limits: Upstream,
        expect: Err("dependency symlink must be a bounded relative link: payload/x"),
    }),
    ("dependency_fifo", Case {
        tree: &[P("nm/pipe")], copy: &[], deps: &[("nm", "node_modules")], limits: Upstream,
        expect: Err("sandbox_copy accepts only regular files and directories: payload/pipe"),
    }),
    ("dependency_symlink_declaration", Case {
        tree: &[F("real/a.js", "a\n", 0o644), L("nm", "real")], copy: &[],
        deps: &[("nm", "node_modules")], limits: Upstream,
        expect: Err("sandbox_copy must not traverse a symlink: nm"),
    }),
    ("entry_limit", Case {
        tree: &[
            F("assets/a", "a\n", 0o644), F("assets/b", "b\n", 0o644), F("assets/c", "c\n", 0o644),
        ], copy: &["assets"], deps: &[], limits: Entries(3),
        expect: Err("sandbox_copy exceeds the entry limit"),
    }),
    ("entry_limit_shared_with_a_dependency", Case {
        tree: &[F("assets/a", "a\n", 0o644), F("nm/b", "b\n", 0o644)], copy: &["assets"],
        deps: &[("nm", "node_modules")], limits: Entries(4),
        expect: Err("sandbox_copy exceeds the entry limit"),
    }),
    ("entry_limit_met_exactly", Case {
        tree: &[F("assets/a", "a\n", 0o644), F("nm/b", "b\n", 0o644)], copy: &["assets"],
        deps: &[("nm", "node_modules")], limits: Entries(5), expect: Ok(Answer {
            copy: &[
                dir("assets"),
                file("assets/a", 2, "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7", 0o0),
            ], copy_total: 2, deps: &[(&[
                dir("payload"), dir("payload/.vite-temp"),
                file("payload/b", 2, "0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f", 0o644),
            ], 2)], budget: (5, 4),
        }),
    }),
    ("path_byte_limit", Case {
        tree: &[F("assets/short", "s\n", 0o644), F("assets/longer-name", "l\n", 0o644)],
        copy: &["assets"], deps: &[], limits: PathBytes(12),
        expect: Err("sandbox_copy exceeds the path byte limit"),
    }),
    ("symlink_target_path_limit", Case {
        tree: &[F("nm/ab", "x\n", 0o644), L("nm/x", "./././././ab")], copy: &[],
        deps: &[("nm", "node_modules")], limits: PathBytes(11),
        expect: Err("dependency symlink target exceeds the path limit: payload/x"),
    }),
    ("symlink_target_path_limit_met_exactly", Case {
        tree: &[F("nm/ab", "x\n", 0o644), L("nm/x", "./././././ab")], copy: &[],
        deps: &[("nm", "node_modules")], limits: PathBytes(18), expect: Ok(Answer {
            copy: &[], copy_total: 0, deps: &[(&[
                dir("payload"), dir("payload/.vite-temp"),
                file("payload/ab", 2, "73cb3858a687a8494ca3323053016282f3dad39d42cf62ca4e79dda2aac7d9ac", 0o644),
                link("payload/x", 12, "ebfcdad89b396806df2769b4cb9dff25377e5efcc53b1ee47dfbed2ec407bef0", "./././././ab"),
            ], 14)], budget: (4, 14),
        }),
    }),
    ("total_byte_limit_shared", Case {
        tree: &[F("assets/a", "0123456789", 0o644), F("nm/b", "01234", 0o644)], copy: &["assets"],
        deps: &[("nm", "node_modules")], limits: TotalBytes(14),
        expect: Err("sandbox_copy exceeds the total byte limit"),
    }),
    ("total_byte_limit_met_exactly_with_a_symlink", Case {
        tree: &[F("assets/a", "0123456789", 0o644), F("nm/b", "0", 0o644), L("nm/l", "b")],
        copy: &["assets"], deps: &[("nm", "node_modules")], limits: TotalBytes(12),
        expect: Ok(Answer {
            copy: &[
                dir("assets"),
                file("assets/a", 10, "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882", 0o0),
            ], copy_total: 10, deps: &[(&[
                dir("payload"), dir("payload/.vite-temp"),
                file("payload/b", 1, "5feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e9", 0o644),
                link("payload/l", 1, "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d", "b"),
            ], 2)], budget: (6, 12),
        }),
    }),
    ("total_byte_limit_counts_symlink_targets", Case {
        tree: &[F("assets/a", "0123456789", 0o644), F("nm/b", "0", 0o644), L("nm/l", "b")],
        copy: &["assets"], deps: &[("nm", "node_modules")], limits: TotalBytes(11),
        expect: Err("sandbox_copy exceeds the total byte limit"),
    }),
    ("dependency_vite_temp_file_collides", Case {
        tree: &[F("node_modules/.vite-temp", "x\n", 0o644)], copy: &[],
        deps: &[("node_modules", "node_modules")], limits: Upstream,
        expect: Err("sandbox_copy paths collide at payload/.vite-temp"),
    }),
    ("dependency_vite_temp_symlink_collides", Case {
        tree: &[F("node_modules/a", "x\n", 0o644), L("node_modules/.vite-temp", "a")], copy: &[],
        deps: &[("node_modules", "node_modules")], limits: Upstream,
        expect: Err("sandbox_copy paths collide at payload/.vite-temp"),
    }),
    ("copy_two_declarations_sharing_a_parent", Case {
        tree: &[F("x/a/f", "f\n", 0o644), F("x/b", "b\n", 0o644), F("x/c", "c\n", 0o644)],
        copy: &["x/b", "x/a"], deps: &[], limits: Upstream, expect: Ok(Answer {
            copy: &[
                dir("x"), dir("x/a"),
                file("x/a/f", 2, "092fcfbbcfca3b5be7ae1b5e58538e92c35ab273ae13664fed0d67484c8e78a6", 0o0),
                file("x/b", 2, "0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f", 0o0),
            ], copy_total: 4, deps: &[], budget: (4, 4),
        }),
    }),
    ("dependency_links_to_the_payload_and_above_it", Case {
        tree: &[
            F("nm/a.js", "a\n", 0o644), L("nm/self", "."), L("nm/up", ".."), L("nm/slash", "a.js/"),
            L("nm/via-self", "self/self/a.js"),
        ], copy: &[], deps: &[("nm", "node_modules")], limits: Upstream, expect: Ok(Answer {
            copy: &[], copy_total: 0, deps: &[(&[
                dir("payload"), dir("payload/.vite-temp"),
                file("payload/a.js", 2, "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7", 0o644),
                link("payload/self", 1, "cdb4ee2aea69cc6a83331bbe96dc2caa9a299d21329efb0336fc02a82e1839a8", "."),
                link("payload/slash", 5, "aecfb21216f8177598d46f8c646386a7a563f4b731df3f38cf58cf3404e40a9f", "a.js/"),
                link("payload/up", 2, "5ec1f7e700f37c3d0b2981d04855fc34b94aaa15457b05ca571817442d228f81", ".."),
                link("payload/via-self", 14, "c469fd6e9c2e50760dd79f22c4f1dc44d573ec63231da6367c0bdbf7d698e17f", "self/self/a.js"),
            ], 24)], budget: (7, 24),
        }),
    }),
    ("dependency_link_chains", Case {
        tree: &[
            F("nm/a/c/f", "f\n", 0o644), L("nm/l1", "a"), L("nm/l2", "l1/c/f"),
            L("nm/b/l3", "../l2"), L("nm/b/l4", "../l1/c/../c/f"),
        ], copy: &[], deps: &[("nm", "a/b/c/vendor")], limits: Upstream, expect: Ok(Answer {
            copy: &[], copy_total: 0, deps: &[(&[
                dir("payload"), dir("payload/a"), dir("payload/a/c"),
                file("payload/a/c/f", 2, "092fcfbbcfca3b5be7ae1b5e58538e92c35ab273ae13664fed0d67484c8e78a6", 0o644),
                dir("payload/b"),
                link("payload/b/l3", 5, "7e75ceea66e84eb22fe008f711221d750d1ecde2d349a84e7fc735070156aa60", "../l2"),
                link("payload/b/l4", 14, "d66161a4b4aaf19ee19f99eb9c5ec03735cd4274b0de101d49ea743085da65cd", "../l1/c/../c/f"),
                link("payload/l1", 1, "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb", "a"),
                link("payload/l2", 6, "a9747fb8ff698d26beac72a6d462c48f7c7766599dace3acc6885383f76408e6", "l1/c/f"),
            ], 28)], budget: (9, 28),
        }),
    }),
    ("dependency_link_chain_dangling_at_its_end", Case {
        tree: &[
            F("nm/a/c/f", "f\n", 0o644), L("nm/l1", "a"), L("nm/l2", "l1/c/missing"),
            L("nm/b/l3", "../l2"),
        ], copy: &[], deps: &[("nm", "a/b/c/vendor")], limits: Upstream,
        expect: Err("dependency symlink is dangling or escapes its snapshot: payload/b/l3"),
    }),
];

#[test]
fn each_pinned_tree_gets_the_harness_answer() {
    let names: std::collections::BTreeSet<_> = CASES.iter().map(|(name, _)| name).collect();
    assert_eq!(names.len(), CASES.len(), "every case has its own name");
    for (name, case) in CASES {
        check(name, case);
    }
    assert_eq!(CASES.len(), 34);
}

/// A tree changed by `change` (given the repository's root) after the
/// walk's first read of a file's bytes: the harness's answer, from its own
/// walk with `_read_source_chunk` patched to make the same change after its
/// first call.
fn changed_mid_walk(change: impl FnOnce(&Path) + 'static) -> String {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    build(
        &root,
        &[
            F("assets/sub/a.txt", "a\n", 0o644),
            F("assets/z.txt", "z\n", 0o644),
        ],
    );
    let repo = rustix::fs::open(
        &root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let mut budget = Budget::default();
    let mut builder = Builder::new(Flavour::SandboxCopy, Limits::default(), &mut budget);
    let at = root.clone();
    builder.after_first_read = Some(Box::new(move || change(&at)));
    builder
        .capture(repo.as_fd(), "assets")
        .unwrap_err()
        .to_string()
}

#[test]
fn a_file_that_grows_while_read_is_refused() {
    let message = changed_mid_walk(|root| {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(root.join("assets/sub/a.txt"))
            .unwrap();
        file.write_all(b"more\n").unwrap();
    });
    assert_eq!(
        message,
        "sandbox_copy file changed while snapshotting: assets/sub/a.txt"
    );
}

#[test]
fn a_file_whose_mtime_changes_while_read_is_refused() {
    let message = changed_mid_walk(|root| {
        let file = std::fs::File::open(root.join("assets/sub/a.txt")).unwrap();
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(1);
        file.set_times(
            std::fs::FileTimes::new()
                .set_modified(old)
                .set_accessed(old),
        )
        .unwrap();
    });
    assert_eq!(
        message,
        "sandbox_copy file changed while snapshotting: assets/sub/a.txt"
    );
}

#[test]
fn a_directory_that_gains_an_entry_while_walked_is_refused() {
    // A new entry within the filesystem's timestamp tick may leave the
    // directory's mtime and ctime as they were (and its size, on some
    // filesystems): its mtime is then set apart, so the change is seen
    // wherever the test runs.
    fn gain(dir: &Path) {
        std::fs::write(dir.join("new.txt"), "n\n").unwrap();
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(1);
        std::fs::File::open(dir)
            .unwrap()
            .set_times(
                std::fs::FileTimes::new()
                    .set_modified(old)
                    .set_accessed(old),
            )
            .unwrap();
    }
    let message = changed_mid_walk(|root| gain(&root.join("assets/sub")));
    assert_eq!(
        message,
        "sandbox_copy directory changed while snapshotting: assets/sub"
    );
    let message = changed_mid_walk(|root| gain(&root.join("assets")));
    assert_eq!(
        message,
        "sandbox_copy directory changed while snapshotting: assets"
    );
}

/// A file whose `fstat` size is not what reading it gives: upstream's walk
/// of `/proc/self` declared `status` said the same.
#[test]
fn a_file_read_to_another_length_than_its_size_is_refused() {
    let proc_self = rustix::fs::open(
        "/proc/self",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    );
    let Ok(proc_self) = proc_self else {
        eprintln!("skipped: /proc/self cannot be opened here");
        return;
    };
    let mut budget = Budget::default();
    let mut builder = Builder::new(Flavour::SandboxCopy, Limits::default(), &mut budget);
    let message = builder
        .capture(proc_self.as_fd(), "status")
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "sandbox_copy file changed while snapshotting: status"
    );
}

#[test]
fn each_rejection_names_a_rule() {
    let errors = [
        CaptureError::TotalBytes,
        CaptureError::Entries,
        CaptureError::PathBytes,
        CaptureError::Symlink("a".into()),
        CaptureError::SymlinkDangling("payload/a".into()),
        CaptureError::SymlinkEscapesWorkspace("payload/a".into()),
    ];
    let rules: std::collections::BTreeSet<_> = errors.iter().map(CaptureError::rule).collect();
    assert_eq!(rules.len(), errors.len());
}

/// A symlink replaced by one of another target between the walk's
/// `readlink` and its second look: upstream's walk, with `os.readlink`
/// patched to make the same change after its first call, said the same.
#[test]
fn a_symlink_retargeted_while_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    // No file: the hook runs at the first read, which must be the link's.
    build(&root, &[L("nm/z", "a.txt")]);
    let repo = rustix::fs::open(
        &root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let nm = super::capture::open_relative(repo.as_fd(), "nm").unwrap();
    let mut budget = Budget::default();
    let mut builder = Builder::new(Flavour::Dependency, Limits::default(), &mut budget);
    let link = root.join("nm/z");
    builder.after_first_read = Some(Box::new(move || {
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("b.txt", &link).unwrap();
    }));
    let message = builder
        .copy_descriptor(nm.as_fd(), b"payload")
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "dependency symlink changed while snapshotting: payload/z"
    );
}

/// Names and a target that are not UTF-8. Upstream's answers: `sandbox_copy
/// path is not valid UTF-8: assets/\udcff.txt` (after `assets/ok.txt`, which
/// sorts first), `... assets/\udcfe` for a directory, and `dependency symlink
/// is unreadable or not UTF-8: payload/x`; Python's message holds the byte as
/// a lone surrogate, which a Rust string shows as U+FFFD.
#[test]
fn names_and_targets_that_are_not_utf8_are_refused() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("assets")).unwrap();
    std::fs::write(root.join("assets/ok.txt"), "o").unwrap();
    std::fs::write(
        root.join("assets").join(OsStr::from_bytes(b"\xff.txt")),
        "x",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("other").join(OsStr::from_bytes(b"\xfe"))).unwrap();
    std::fs::write(root.join("other").join(OsStr::from_bytes(b"\xfe/a")), "x").unwrap();
    std::fs::create_dir_all(root.join("nm")).unwrap();
    std::os::unix::fs::symlink(OsStr::from_bytes(b"\xff.js"), root.join("nm/x")).unwrap();
    let repo = rustix::fs::open(
        root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let copy = |declaration: &str| {
        let mut budget = Budget::default();
        let mut builder = Builder::new(Flavour::SandboxCopy, Limits::default(), &mut budget);
        builder.capture(repo.as_fd(), declaration).unwrap_err()
    };
    let e = copy("assets");
    assert_eq!(
        e.to_string(),
        "sandbox_copy path is not valid UTF-8: assets/\u{fffd}.txt"
    );
    assert_eq!(e.rule(), "task-asset-path-not-utf8");
    let e = copy("other");
    assert_eq!(
        e.to_string(),
        "sandbox_copy path is not valid UTF-8: other/\u{fffd}"
    );
    let mut budget = Budget::default();
    let e = capture_dependency(
        repo.as_fd(),
        "nm",
        "node_modules",
        Limits::default(),
        &mut budget,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "dependency symlink is unreadable or not UTF-8: payload/x"
    );
    assert_eq!(e.rule(), "dependency-symlink-unreadable");
}

/// Files longer than one read (1 MiB), one after another through the same
/// buffer: each records its own length and its bytes' SHA-256.
#[test]
fn files_longer_than_one_read_record_their_own_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("nm")).unwrap();
    let big: Vec<u8> = (0..(5 << 19) + 7)
        .map(|i: u32| (i * 31 % 251) as u8)
        .collect();
    let small = b"after the big one\n";
    std::fs::write(root.join("nm/a.bin"), &big).unwrap();
    std::fs::write(root.join("nm/b.txt"), small).unwrap();
    let repo = rustix::fs::open(
        root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let mut budget = Budget::default();
    let dep =
        capture_dependency(repo.as_fd(), "nm", "vendor", Limits::default(), &mut budget).unwrap();
    let files: Vec<_> = dep
        .entries
        .iter()
        .filter(|e| e.kind() == "file")
        .map(|e| (e.path.as_str(), e.size(), e.sha256()))
        .collect();
    assert_eq!(
        files,
        [
            ("payload/a.bin", big.len() as u64, Some(ObjectId::of(&big))),
            (
                "payload/b.txt",
                small.len() as u64,
                Some(ObjectId::of(small))
            ),
        ]
    );
    assert_eq!(dep.total_bytes, (big.len() + small.len()) as u64);
}

/// A sink that takes every file it is offered, as the store's hashing
/// threads do, to be judged after the walk.
#[derive(Default)]
struct Deferring {
    taken: Vec<DeferredFile>,
}

impl FileSink for Deferring {
    fn start(&mut self, _: u64, _: bool, _: Option<rustix::fd::BorrowedFd<'_>>) {}
    fn bytes(&mut self, _: &[u8]) {}
    fn finish(&mut self) -> ObjectId {
        ObjectId::of(b"read by the walk")
    }
    fn abandon(&mut self) {}
    fn defer(&mut self, file: Box<DeferredFile>) -> Result<ObjectId, Box<DeferredFile>> {
        self.taken.push(*file);
        Ok(ObjectId::of(b"stand-in"))
    }
}

fn open_dir(root: &Path) -> rustix::fd::OwnedFd {
    rustix::fs::open(
        root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap()
}

/// What the walk answers for `assets/sub/a.txt` ("a\n") changed by
/// `change` after its first read, and what a deferred file of it, changed
/// so after the walk, answers when copied and when read: each the error's
/// text, or the bytes copied or read.
fn judged_both_ways(limits: Limits, change: fn(&Path)) -> [Result<Vec<u8>, String>; 3] {
    let dir = tempfile::tempdir().unwrap();
    let walked = dir.path().join("walked");
    let deferred = dir.path().join("deferred");
    for root in [&walked, &deferred] {
        std::fs::create_dir(root).unwrap();
        build(root, &[F("assets/sub/a.txt", "a\n", 0o644)]);
    }
    let by_walk = {
        let mut budget = Budget::default();
        let mut builder = Builder::new(Flavour::SandboxCopy, limits, &mut budget);
        let at = walked.clone();
        builder.after_first_read = Some(Box::new(move || change(&at)));
        builder
            .capture(open_dir(&walked).as_fd(), "assets")
            .map(|()| b"a\n".to_vec())
            .map_err(|e| e.to_string())
    };
    let mut sink = Deferring::default();
    let mut budget = Budget::default();
    let mut builder = Builder::new(Flavour::SandboxCopy, limits, &mut budget).with_sink(&mut sink);
    builder
        .capture(open_dir(&deferred).as_fd(), "assets")
        .unwrap();
    let entry = builder.entry("assets/sub/a.txt").cloned().unwrap();
    assert_eq!(
        (entry.size(), entry.sha256()),
        (2, Some(ObjectId::of(b"stand-in")))
    );
    drop(builder);
    change(&deferred);
    let [file] = &sink.taken[..] else {
        panic!("one file deferred")
    };
    assert_eq!(file.size(), 2);
    let copy = dir.path().join("copy");
    let out = std::fs::File::create_new(&copy).unwrap();
    let copied = match file.copy_into(out.as_fd()) {
        Ok(()) => Ok(std::fs::read(&copy).unwrap()),
        Err(DeferredFault::Capture(e)) => Err(e.to_string()),
        Err(DeferredFault::Write(e)) => panic!("writing the copy failed: {e}"),
    };
    let mut read = Vec::new();
    let mut chunk = [0u8; 1];
    let read = file
        .read_into(&mut chunk, &mut |d| read.extend_from_slice(d))
        .map(|()| read)
        .map_err(|e| e.to_string());
    [by_walk, copied, read]
}

fn append(root: &Path) {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("assets/sub/a.txt"))
        .unwrap()
        .write_all(b"more\n")
        .unwrap();
}

/// A file left to the sink is judged as the walk judges it: unchanged,
/// grown, grown past the total bound, touched, cut short.
#[test]
fn a_deferred_file_is_judged_as_the_walk_judges_it() {
    let changed =
        || Err("sandbox_copy file changed while snapshotting: assets/sub/a.txt".to_string());
    let [walk, copied, read] = judged_both_ways(Limits::default(), |_| {});
    assert_eq!(
        (&walk, &copied, &read),
        (&Ok(b"a\n".to_vec()), &walk, &walk)
    );
    let [walk, copied, read] = judged_both_ways(Limits::default(), append);
    assert_eq!((&walk, &copied, &read), (&changed(), &walk, &walk));
    let tight = Limits {
        max_total_bytes: 4,
        ..Limits::default()
    };
    let [walk, copied, read] = judged_both_ways(tight, append);
    assert_eq!(
        (&walk, &copied, &read),
        (
            &Err("sandbox_copy exceeds the total byte limit".to_string()),
            &walk,
            &walk
        )
    );
    let [walk, copied, read] = judged_both_ways(Limits::default(), |root| {
        let file = std::fs::File::options()
            .write(true)
            .open(root.join("assets/sub/a.txt"))
            .unwrap();
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(1);
        file.set_times(std::fs::FileTimes::new().set_modified(old))
            .unwrap();
    });
    assert_eq!((&walk, &copied, &read), (&changed(), &walk, &walk));
    let [walk, copied, read] = judged_both_ways(Limits::default(), |root| {
        std::fs::File::options()
            .write(true)
            .open(root.join("assets/sub/a.txt"))
            .unwrap()
            .set_len(1)
            .unwrap();
    });
    assert_eq!((&walk, &copied, &read), (&changed(), &walk, &walk));
}
