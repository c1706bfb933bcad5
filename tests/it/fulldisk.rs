//! A full disk: each command that changes the store, run on a small
//! loop-mounted ext4 (1 KiB and 4 KiB blocks) filled to many levels, either
//! does its work or fails with exit 7 and one JSON object, and then the
//! store is exactly as it was: the same snapshots, manifests, objects, work
//! directories and views, and `verify` clean. No command dies of a signal
//! (SQLite's shared memory on a full disk with 1 KiB blocks sends SIGBUS).
//!
//! The images need root, `mkfs.ext4` and a loop device; without them each
//! test skips with the reason.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::*;

/// How many bytes each case leaves free on the filesystem when it runs the
/// command: from none to enough for most commands to succeed.
const FREE_LEVELS: [u64; 16] = [
    0,
    1 << 10,
    2 << 10,
    3 << 10,
    4 << 10,
    6 << 10,
    8 << 10,
    12 << 10,
    16 << 10,
    24 << 10,
    32 << 10,
    48 << 10,
    64 << 10,
    96 << 10,
    160 << 10,
    512 << 10,
];

/// A small ext4 image, loop-mounted for the test's life.
struct LoopFs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
    block: u64,
}

impl LoopFs {
    /// A fresh 32 MiB ext4 with blocks of `block` bytes; `None` (after a
    /// printed reason) where this machine cannot make one.
    fn new(test: &str, block: u64) -> Option<LoopFs> {
        if skip_unless_root(test, "loop-mounting an ext4 image needs root") {
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let img = dir.path().join("img");
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).expect("mount point");
        let made = fs::File::create(&img)
            .and_then(|f| f.set_len(32 << 20))
            .is_ok()
            && Command::new("mkfs.ext4")
                .args(["-q", "-F", "-b", &block.to_string()])
                .arg(&img)
                .status()
                .is_ok_and(|s| s.success());
        if !made {
            skip(
                test,
                "mkfs.ext4 could not make an image (is e2fsprogs installed?)",
            );
            return None;
        }
        let mounted = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            skip(test, "mount -o loop failed (no loop device here?)");
            return None;
        }
        Some(LoopFs {
            _dir: dir,
            mnt,
            block,
        })
    }

    /// The bytes free to root (reserved blocks included).
    fn free(&self) -> u64 {
        let st = rustix::fs::statvfs(&self.mnt).expect("statvfs");
        st.f_bfree * st.f_frsize
    }

    /// Fills the filesystem so that `left` bytes stay free to a writer (as
    /// close as its blocks allow); returns the filler file. It fills to the
    /// last block first, since ext4 keeps blocks for its own metadata that
    /// `statvfs` counts free, then gives `left` back.
    fn fill_leaving(&self, left: u64) -> PathBuf {
        let filler = self.mnt.join("filler");
        let f = fs::File::create(&filler).expect("create the filler");
        let (mut len, mut chunk) = (0, self.free().max(self.block) / self.block * self.block);
        loop {
            match rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), len, chunk) {
                Ok(()) => len += chunk,
                Err(rustix::io::Errno::NOSPC) if chunk > self.block => {
                    chunk = (chunk / 2 / self.block).max(1) * self.block
                }
                Err(rustix::io::Errno::NOSPC) => break,
                Err(e) => panic!("fallocate the filler: {e}"),
            }
        }
        f.set_len(len.saturating_sub(left)).expect("give room back");
        f.sync_all().expect("sync the filler");
        filler
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

/// Everything a failed command must leave as it was: the store's objects,
/// work directories, snapshots and manifest files, and each view given.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    store: StoreState,
    manifests: Vec<String>,
    beside: Vec<String>,
    views: BTreeMap<PathBuf, Option<Vec<String>>>,
    spares: Vec<String>,
}

fn seen(store: &Path, views: &[PathBuf]) -> Seen {
    let listing = |top: &str| -> Vec<String> {
        let mut out = Vec::new();
        let dir = store.join(top);
        for shard in names_in(&dir) {
            for name in names_in(&dir.join(&shard)) {
                out.push(format!("{shard}/{name}"));
            }
        }
        out
    };
    let mut beside = listing("sources");
    beside.extend(listing("attestations"));
    Seen {
        store: store_state(store),
        manifests: listing("manifests"),
        beside,
        views: views
            .iter()
            .map(|v| (v.clone(), v.exists().then(|| names_in(v))))
            .collect(),
        // A spare is named anew each time it is kept: what counts is how
        // many each snapshot has.
        spares: names_in(&store.join("spare"))
            .into_iter()
            .map(|d| format!("{d}: {}", names_in(&store.join("spare").join(&d)).len()))
            .collect(),
    }
}

/// Sets a store up (with room to spare); returns the command's arguments and
/// the views whose presence must not change on failure.
type Setup = fn(&TestEnv, &Path) -> (Vec<String>, Vec<PathBuf>);

/// One command under test: what to set up, what to run, and what holds
/// after it succeeded.
struct Case {
    name: &'static str,
    /// Sets the store up.
    setup: Setup,
    /// Checks what a success did.
    done: fn(&TestEnv, &[PathBuf]),
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ce-plugin-1.0.0")
}

fn ingest_example(env: &TestEnv) -> String {
    env.ingest_digest(&example(), "1.0.0")
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "ingest",
            setup: |env, mnt| {
                let other = mnt.join("other");
                minimal_plugin(&other, "2.0.0");
                env.ingest_digest(&other, "2.0.0");
                (
                    vec![
                        "ingest".into(),
                        s(&example()),
                        "--version".into(),
                        "1.0.0".into(),
                    ],
                    Vec::new(),
                )
            },
            done: |env, _| {
                assert_eq!(env.listed().len(), 2);
            },
        },
        Case {
            name: "list",
            setup: |env, _| {
                ingest_example(env);
                (vec!["list".into()], Vec::new())
            },
            done: |_, _| {},
        },
        Case {
            name: "rm",
            setup: |env, _| {
                let d = ingest_example(env);
                (vec!["rm".into(), d], Vec::new())
            },
            done: |env, _| assert!(env.listed().is_empty()),
        },
        Case {
            name: "discard",
            setup: |env, mnt| {
                let d = ingest_example(env);
                let view = mnt.join("view");
                env.checkout_ok(&d, &view, &[]);
                (vec!["discard".into(), s(&view)], vec![view])
            },
            done: |env, views| {
                assert!(!views[0].exists());
                assert!(env.views(&env.listed()[0]).is_empty());
            },
        },
        Case {
            name: "discard --spare",
            setup: |env, mnt| {
                let d = ingest_example(env);
                let view = mnt.join("view");
                env.checkout_ok(&d, &view, &[]);
                (
                    vec!["discard".into(), "--spare".into(), s(&view)],
                    vec![view],
                )
            },
            done: |env, views| {
                assert!(!views[0].exists());
                assert!(env.views(&env.listed()[0]).is_empty());
            },
        },
        Case {
            name: "checkout taking a spare",
            setup: |env, mnt| {
                let d = ingest_example(env);
                let view = mnt.join("view");
                env.checkout_ok(&d, &view, &[]);
                env.json([
                    "discard".to_string(),
                    "--spare".into(),
                    s(&view),
                    "--json".into(),
                ]);
                (vec!["checkout".into(), d, s(&view)], vec![view])
            },
            done: |env, views| {
                assert!(views[0].join(".claude-plugin/plugin.json").exists());
                assert_eq!(env.views(&env.listed()[0]).len(), 1);
            },
        },
        Case {
            name: "gc",
            setup: |env, mnt| {
                let keep = ingest_example(env);
                let other = mnt.join("other");
                minimal_plugin(&other, "2.0.0");
                let gone = env.ingest_digest(&other, "2.0.0");
                env.json(["rm", &gone, "--json"]);
                let _ = keep;
                (vec!["gc".into()], Vec::new())
            },
            done: |env, _| {
                let (code, report) = env.verify(&[]);
                assert_eq!(code, 0, "{report}");
            },
        },
        Case {
            name: "recover",
            setup: |env, _| {
                ingest_example(env);
                for ext in ["", "-wal", "-shm"] {
                    let _ = fs::remove_file(env.store.join(format!("catalogue.sqlite{ext}")));
                }
                (vec!["recover".into()], Vec::new())
            },
            done: |env, _| assert_eq!(env.listed().len(), 1),
        },
    ]
}

/// Runs every case at every level on a filesystem with `block`-byte blocks.
fn every_command_at_every_level(test: &str, block: u64) {
    let Some(fs) = LoopFs::new(test, block) else {
        return;
    };
    let mut tally: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for case in cases() {
        for (n, left) in FREE_LEVELS.iter().enumerate() {
            let store = fs.mnt.join(format!("store-{n}"));
            let env = TestEnv::with_store(store.clone()).within(Duration::from_secs(120));
            let (mut args, views) = (case.setup)(&env, &fs.mnt);
            args.push("--json".into());
            let recover = case.name == "recover";
            let before = (!recover).then(|| seen(&store, &views));
            let filler = fs.fill_leaving(*left);
            let out = env.run(&args);
            fs::remove_file(&filler).expect("remove the filler");
            let what = format!("{} with {left} bytes free ({block}-byte blocks)", case.name);
            // A death by signal fails inside `run` (the deadline's check).
            let code = out.status.code().expect("an exit code");
            let json = parse_json(&out);
            assert!(
                code == 0 || code == 7,
                "{what}: exit {code}: {}",
                describe(&out)
            );
            let entry = tally.entry(case.name).or_default();
            if code == 0 {
                entry.0 += 1;
                (case.done)(&env, &views);
            } else {
                entry.1 += 1;
                assert_eq!(json["ok"], false, "{what}: {json}");
                assert_eq!(json["error"]["code"], 7, "{what}: {json}");
                // SIGBUS (a page of SQLite's shared memory the disk could
                // not back) stops the command where it stood, as a kill
                // would: the store is then as a crash leaves it, which the
                // `verify` below checks, not as it was.
                let crashed = json["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("SIGBUS"));
                match before {
                    Some(_) if crashed => {}
                    // An ingest that failed may leave objects it published
                    // (unrecorded, for gc to sweep: another ingest may have
                    // found them meanwhile); every object there before is
                    // untouched, and nothing else changed.
                    Some(mut before) if case.name == "ingest" => {
                        let mut after = seen(&store, &views);
                        after.store.files.objects.retain(|k, v| {
                            before.store.files.objects.get(k).is_some_and(|b| b == v)
                        });
                        assert_eq!(
                            after.store.files.objects.len(),
                            before.store.files.objects.len(),
                            "{what}: an object changed"
                        );
                        before.store.files.objects.clear();
                        after.store.files.objects.clear();
                        assert_eq!(after, before, "{what}: the store changed");
                    }
                    Some(before) => {
                        assert_eq!(seen(&store, &views), before, "{what}: the store changed")
                    }
                    // A failed recover keeps every manifest and object; it
                    // is then run again with room.
                    None => {
                        assert!(!store_files(&store).objects.is_empty(), "{what}");
                        assert_eq!(
                            names_in(&store.join("manifests")).len(),
                            1,
                            "{what}: a manifest went"
                        );
                        env.json(["recover", "--json"]);
                    }
                }
            }
            let (code, report) = env.verify(&[]);
            assert_eq!(code, 0, "{what}: verify after it: {report}");
            for v in &views {
                remove_tree(v);
            }
            remove_tree(&fs.mnt.join("other"));
            remove_tree(&store);
        }
    }
    // Each command that writes both failed on a full disk and succeeded
    // with room; gc, which only removes, needs no room and always succeeds;
    // `list` only reads (with 1 KiB blocks, SQLite's shared memory may still
    // fail it: exit 7, never a signal).
    for (name, (ok, failed)) in &tally {
        if *name == "gc" {
            assert_eq!(*failed, 0, "gc failed on a full disk");
        } else if *name == "list" {
            assert!(*ok > 0, "list never succeeded");
        } else {
            assert!(
                *ok > 0 && *failed > 0,
                "{name}: {ok} succeeded, {failed} failed"
            );
        }
    }
}

#[test]
fn every_command_on_a_full_disk_with_1k_blocks_fails_cleanly_or_succeeds() {
    every_command_at_every_level(
        "fulldisk::every_command_on_a_full_disk_with_1k_blocks_fails_cleanly_or_succeeds",
        1024,
    );
}

#[test]
fn every_command_on_a_full_disk_with_4k_blocks_fails_cleanly_or_succeeds() {
    every_command_at_every_level(
        "fulldisk::every_command_on_a_full_disk_with_4k_blocks_fails_cleanly_or_succeeds",
        4096,
    );
}
