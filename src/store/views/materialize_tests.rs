//! Materializing into a clone: roots replaced exactly, hazards refused in
//! the harness's words, and a failure at any step leaving the clone as it was.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use super::*;
use crate::digest::{ObjectId, ObjectKey};

/// Everything below `root`: path -> (kind, mode, bytes or link target).
fn tree_of(root: &Path) -> BTreeMap<String, (char, u32, Vec<u8>)> {
    fn walk(dir: &Path, rel: &str, out: &mut BTreeMap<String, (char, u32, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let md = std::fs::symlink_metadata(e.path()).unwrap();
            let mode = md.permissions().mode() & 0o7777;
            if md.file_type().is_symlink() {
                let t = std::fs::read_link(e.path()).unwrap();
                out.insert(rel, ('l', 0, t.into_os_string().into_encoded_bytes()));
            } else if md.is_dir() {
                out.insert(rel.clone(), ('d', mode, Vec::new()));
                walk(&e.path(), &rel, out);
            } else if md.is_file() {
                out.insert(rel, ('f', mode, std::fs::read(e.path()).unwrap()));
            } else {
                out.insert(rel, ('o', mode, Vec::new()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, "", &mut out);
    out
}

struct Setup {
    tmp: tempfile::TempDir,
    objects: PathBuf,
    clone: PathBuf,
}

impl Setup {
    fn new(files: &[&[u8]]) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let objects = tmp.path().join("store/objects");
        for data in files {
            let key = ObjectKey {
                id: ObjectId::of(data),
                executable: false,
            };
            let path = objects.join(key.rel_path());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, data).unwrap();
        }
        std::fs::create_dir_all(&objects).unwrap();
        let clone = tmp.path().join("work/clone");
        std::fs::create_dir_all(&clone).unwrap();
        Setup {
            tmp,
            objects,
            clone,
        }
    }

    fn run(
        &self,
        entries: &[TreeEntry],
        roots: &[&str],
        budget: u64,
    ) -> crate::error::Result<Written> {
        let fd = crate::fsutil::open_dir(rustix::fs::CWD, &self.objects).unwrap();
        let roots: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
        materialize_tree(
            ObjectSource {
                dir: fd.as_fd(),
                path: &self.objects,
            },
            entries,
            &roots,
            &self.clone,
            &mut FallbackBudget::new(budget),
            |_| Ok(()),
        )
    }

    /// The clone's siblings: none but the clone once a command is over.
    fn siblings(&self) -> Vec<String> {
        std::fs::read_dir(self.tmp.path().join("work"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

fn stale_clone_entries() -> Vec<TreeEntry> {
    vec![
        TreeEntry::file_of("asset", b"new\n", 0),
        TreeEntry::directory("assets"),
        TreeEntry::file_of("assets/current", b"current\n", 0),
        TreeEntry::directory("dir"),
        TreeEntry::file_of("dir/child", b"child\n", 0),
    ]
}

fn stale_clone_objects() -> Vec<&'static [u8]> {
    vec![b"new\n", b"current\n", b"child\n"]
}

/// Upstream's `materialize-over-stale-clone` fixture.
#[test]
fn roots_are_replaced_exactly_and_the_rest_is_kept() {
    let s = Setup::new(&stale_clone_objects());
    let c = &s.clone;
    std::fs::create_dir_all(c.join("assets/nested")).unwrap();
    std::fs::write(c.join("assets/current"), "old").unwrap();
    std::fs::write(c.join("assets/stale"), "stale").unwrap();
    std::fs::write(c.join("assets/nested/stale"), "stale").unwrap();
    let outside = s.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("kept"), "x").unwrap();
    symlink(&outside, c.join("assets/stale-link")).unwrap();
    std::fs::create_dir(c.join("asset")).unwrap();
    std::fs::write(c.join("asset/stale"), "stale").unwrap();
    std::fs::write(c.join("dir"), "stale file").unwrap();
    std::fs::write(c.join("keep.txt"), "kept\n").unwrap();
    std::fs::set_permissions(c.join("keep.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let written = s
        .run(&stale_clone_entries(), &["assets", "asset", "dir"], 1 << 20)
        .unwrap();
    assert_eq!(written.reflinked + written.copied, 3);
    let got = tree_of(c);
    let want: BTreeMap<String, (char, u32, Vec<u8>)> = [
        ("asset", ('f', 0o600, b"new\n".to_vec())),
        ("assets", ('d', 0o700, vec![])),
        ("assets/current", ('f', 0o600, b"current\n".to_vec())),
        ("dir", ('d', 0o700, vec![])),
        ("dir/child", ('f', 0o600, b"child\n".to_vec())),
        ("keep.txt", ('f', 0o640, b"kept\n".to_vec())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(got, want);
    // The stale link was removed, not followed.
    assert!(outside.join("kept").exists());
    assert_eq!(s.siblings(), ["clone"]);
}

#[test]
fn missing_parents_are_made_and_a_file_in_their_way_replaced() {
    let s = Setup::new(&[b"patch\n"]);
    let entries = vec![
        TreeEntry::directory("eval"),
        TreeEntry::directory("eval/cases"),
        TreeEntry::file_of("eval/cases/pr-1.patch", b"patch\n", 0),
    ];
    std::fs::write(s.clone.join("eval"), "a file where a directory belongs").unwrap();
    s.run(&entries, &["eval/cases/pr-1.patch"], 1 << 20)
        .unwrap();
    let got = tree_of(&s.clone);
    assert_eq!(got["eval"], ('d', 0o700, vec![]));
    assert_eq!(got["eval/cases"], ('d', 0o700, vec![]));
    assert_eq!(
        got["eval/cases/pr-1.patch"],
        ('f', 0o600, b"patch\n".to_vec())
    );
    assert_eq!(got.len(), 3);
}

fn refused(s: &Setup, roots: &[&str], message: &str, rule: &str) {
    let before = tree_of(&s.clone);
    let err = s
        .run(&stale_clone_entries(), roots, 1 << 20)
        .expect_err(message);
    assert_eq!(err.to_string(), message);
    assert_eq!(err.rule(), Some(rule));
    assert_eq!(err.exit_code(), 3);
    assert_eq!(tree_of(&s.clone), before, "the clone is as it was");
    assert_eq!(s.siblings(), ["clone"], "no staging directory is left");
}

#[test]
fn a_symlink_at_or_above_a_root_is_refused_in_the_harness_s_words() {
    let s = Setup::new(&stale_clone_objects());
    symlink(s.tmp.path(), s.clone.join("assets")).unwrap();
    refused(
        &s,
        &["asset", "assets"],
        "sandbox_copy target cannot be a symlink: assets",
        "sandbox-copy-target-symlink",
    );
    let s = Setup::new(&stale_clone_objects());
    symlink(s.tmp.path(), s.clone.join("docs")).unwrap();
    refused(
        &s,
        &["asset", "docs/guide"],
        "sandbox_copy target has a symlink parent: docs/guide",
        "sandbox-copy-target-symlink-parent",
    );
}

#[test]
fn a_special_file_at_or_inside_a_root_is_refused_before_anything_changes() {
    let mkfifo = |p: &Path| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap()
    };
    let s = Setup::new(&stale_clone_objects());
    std::fs::create_dir_all(s.clone.join("assets/deep")).unwrap();
    std::fs::write(s.clone.join("assets/old"), "old").unwrap();
    mkfifo(&s.clone.join("assets/deep/pipe"));
    refused(
        &s,
        &["asset", "assets"],
        "sandbox_copy target has an unsupported type: assets/deep/pipe",
        "sandbox-copy-target-unsupported-type",
    );
    let s = Setup::new(&stale_clone_objects());
    mkfifo(&s.clone.join("dir"));
    refused(
        &s,
        &["asset", "dir"],
        "sandbox_copy target has an unsupported type: dir",
        "sandbox-copy-target-unsupported-type",
    );
    let s = Setup::new(&stale_clone_objects());
    mkfifo(&s.clone.join("dir"));
    refused(
        &s,
        &["asset", "dir/child"],
        "sandbox_copy target parent has an unsupported type: dir/child",
        "sandbox-copy-target-parent-unsupported-type",
    );
}

#[test]
fn over_the_fallback_budget_nothing_changes() {
    let s = Setup::new(&stale_clone_objects());
    std::fs::write(s.clone.join("asset"), "old").unwrap();
    let before = tree_of(&s.clone);
    let err = s
        .run(&stale_clone_entries(), &["assets", "asset", "dir"], 4)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "task asset filesystem cannot reflink the snapshot and the buffered fallback limit would be exceeded"
    );
    assert_eq!(tree_of(&s.clone), before);
    assert_eq!(s.siblings(), ["clone"]);
}

/// A root that fails after others were replaced: every change is taken
/// back, parents made are removed, what was set aside comes back.
#[test]
fn a_failure_after_some_roots_were_replaced_puts_the_clone_back() {
    let s = Setup::new(&stale_clone_objects());
    let c = &s.clone;
    std::fs::create_dir_all(c.join("assets")).unwrap();
    std::fs::write(c.join("assets/mine"), "mine").unwrap();
    std::fs::write(c.join("asset"), "my asset").unwrap();
    std::fs::write(c.join("dir"), "a file").unwrap();
    let before = tree_of(c);
    // `dir/missing` was never staged: its publication fails after
    // `assets` and `asset` are in place, the file `dir` was set aside and
    // a directory `dir` made in its place.
    let err = s
        .run(
            &stale_clone_entries(),
            &["assets", "asset", "dir/missing"],
            1 << 20,
        )
        .unwrap_err();
    assert_eq!(err.exit_code(), 7, "{err}");
    assert_eq!(tree_of(c), before);
    assert_eq!(s.siblings(), ["clone"]);
}

#[test]
fn the_clone_must_be_a_real_directory() {
    let s = Setup::new(&[]);
    let link = s.tmp.path().join("work/link");
    symlink(&s.clone, &link).unwrap();
    let err = real_clone(&link).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "asset-staging clone must be a real directory: {}",
            link.display()
        )
    );
    let missing = s.tmp.path().join("work/missing");
    let err = real_clone(&missing).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "asset-staging clone must be a real directory: {0}: [Errno 2] No such file or directory: '{0}'",
            missing.display()
        )
    );
    let via = s.tmp.path().join("via");
    symlink(s.tmp.path().join("work"), &via).unwrap();
    let err = real_clone(&via.join("clone")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "asset-staging clone must not traverse symlinks: {}",
            via.join("clone").display()
        )
    );
}
