//! Criterion benchmarks of cestore's hot paths, on trees the benchmark makes.
//!
//! Shapes: a release at the reference's bounds (2,048 files, 16 MiB), the
//! shape of a real release (about 400 files, 5 MB, 30 executables, a few
//! repeated files), and a scaling series of 16, 128, 512 and 2,048 files of
//! 8 KiB. Run with `cargo bench --bench store`.
//!
//! Beside the operations run their floors, the least the same work takes
//! with plain std calls on the same files: `floor-link` makes the tree's
//! directories and hard-links its files with `std::fs::hard_link`, then
//! removes them (against `checkout-hardlink`, which checks out and
//! discards); `floor-read` reads and hashes every file (against
//! `ingest-warm` and `verify`).

// criterion_group! and criterion_main! define undocumented functions.
#![allow(missing_docs)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use cestore::catalogue::resolve;
use cestore::digest::ObjectId;
use cestore::profile::ce::manifest::{canonical_bytes, Entry};
use cestore::store::ingest::{ingest_into, open_source, IngestOptions, IngestReport};
use cestore::store::upkeep::verify::{verify_store, VerifyOptions};
use cestore::store::views::build::Method;
use cestore::store::views::{
    checkout_into, discard_view, shared_view, Destination, DiscardOptions,
};
use cestore::store::{LockMode, Store};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use sha2::{Digest as _, Sha256};

const VERSION: &str = "1.0.0";

/// A deterministic byte stream (xorshift), so trees are the same every run.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn put(root: &Path, rel: &str, data: &[u8], exec: bool) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(&p, data).expect("write");
    if exec {
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}

/// Writes a release of `files` files (the plugin.json and three SKILL.md
/// included) with `size(i)` bytes each; `exec(i)` marks executables under
/// scripts/, and `same(i)` repeats an earlier file's bytes.
fn tree(
    root: &Path,
    files: usize,
    size: impl Fn(usize) -> usize,
    exec: impl Fn(usize) -> bool,
    same: impl Fn(usize) -> Option<usize>,
) {
    let manifest = format!(r#"{{"name":"compound-engineering","version":"{VERSION}"}}"#);
    put(
        root,
        ".claude-plugin/plugin.json",
        manifest.as_bytes(),
        false,
    );
    for s in ["ce-plan", "ce-work", "ce-code-review"] {
        put(
            root,
            &format!("skills/{s}/SKILL.md"),
            format!("# {s}\n").as_bytes(),
            false,
        );
    }
    for i in 4..files {
        let seed = same(i).unwrap_or(i) as u64;
        let data = bytes(seed, size(i));
        let rel = if exec(i) {
            format!("scripts/tool{i:04}.sh")
        } else {
            format!("skills/s{:02}/d{}/f{i:04}.md", i % 40, (i / 40) % 5)
        };
        put(root, &rel, &data, exec(i));
    }
}

fn bounds_tree(root: &Path) {
    // 2,044 files sharing what remains of 16 MiB after the four small ones.
    let small = 51 + 3 * 12;
    let per = (16 * 1024 * 1024 - small) / 2044;
    tree(root, 2048, |_| per, |_| false, |_| None);
}

fn real_tree(root: &Path) {
    tree(
        root,
        400,
        |i| 4_000 + (i * 7_919) % 20_000,
        |i| i % 13 == 0,
        |i| (i % 50 == 7).then_some(8),
    );
}

fn scaling_tree(root: &Path, files: usize) {
    tree(root, files, |_| 8 * 1024, |_| false, |_| None);
}

struct Fixture {
    _dir: tempfile::TempDir,
    src: PathBuf,
    store: PathBuf,
    digest: String,
    /// The source's directories (parents first) and files, relative to it.
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

/// Lists a tree's directories, parents first, and its files, relative to `root`.
fn walk(root: &Path, rel: &Path, dirs: &mut Vec<PathBuf>, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(root.join(rel))
        .expect("read_dir")
        .map(|e| e.expect("entry"))
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let r = rel.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            dirs.push(r.clone());
            walk(root, &r, dirs, files);
        } else {
            files.push(r);
        }
    }
}

/// The floor of checkout plus discard: the same tree as hard links, made and removed with plain std calls.
fn link_tree(f: &Fixture, dest: &Path) {
    fs::create_dir(dest).expect("mkdir");
    for d in &f.dirs {
        fs::create_dir(dest.join(d)).expect("mkdir");
    }
    for file in &f.files {
        fs::hard_link(f.src.join(file), dest.join(file)).expect("hard_link");
    }
    fs::remove_dir_all(dest).expect("remove");
}

/// The floor of a warm ingest and of verify: read and hash every file.
fn read_tree(f: &Fixture) -> usize {
    let mut total = 0;
    for file in &f.files {
        let data = fs::read(f.src.join(file)).expect("read");
        total += Sha256::digest(&data)[0] as usize;
    }
    total
}

/// Opens the store as a command does.
fn open(store: &Path, create: bool) -> Store {
    Store::open(store, LockMode::Shared, create).expect("open the store")
}

/// Ingests a release as `cestore ingest` does: the source first, then the store.
fn ingest(store: &Path, source: &Path) -> IngestReport {
    let opts = IngestOptions {
        source,
        git: None,
        version: VERSION,
        bounds: cestore::profile::ce::rules::Bounds::REFERENCE,
        sign_with: None,
        refuse_secrets: false,
    };
    let source = open_source(&opts).expect("source");
    ingest_into(&mut open(store, true), &source, &opts).expect("ingest")
}

fn fixture(make: impl Fn(&Path)) -> Fixture {
    let dir = tempfile::tempdir_in(
        std::env::var_os("CESTORE_BENCH_DIR").unwrap_or_else(|| "/var/tmp".into()),
    )
    .expect("tempdir");
    let src = dir.path().join("src");
    make(&src);
    let store = dir.path().join("store");
    let report = ingest(&store, &src);
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    walk(&src, Path::new(""), &mut dirs, &mut files);
    Fixture {
        digest: report.provenance.manifest_digest.to_hex(),
        _dir: dir,
        src,
        store,
        dirs,
        files,
    }
}

fn shapes() -> Vec<(String, Fixture)> {
    let mut out = vec![
        ("bounds".to_string(), fixture(bounds_tree)),
        ("real".to_string(), fixture(real_tree)),
    ];
    for n in [16, 128, 512, 2048] {
        out.push((format!("scale-{n}"), fixture(|r| scaling_tree(r, n))));
    }
    out
}

fn bench_manifest(c: &mut Criterion) {
    let entries: Vec<Entry> = (0..2048u32)
        .map(|i| Entry {
            executable: i % 13 == 0,
            path: format!("skills/s{:02}/dé{}/f{i:04}.md", i % 40, (i / 40) % 5),
            sha256: ObjectId::of(&i.to_le_bytes()),
            size: 8192,
        })
        .collect();
    c.bench_function("manifest/encode-2048", |b| {
        b.iter(|| canonical_bytes(&entries))
    });
}

fn bench_store(c: &mut Criterion) {
    let shapes = shapes();
    let mut g = c.benchmark_group("store");
    g.sample_size(10);
    for (name, f) in &shapes {
        g.bench_function(format!("ingest-warm/{name}"), |b| {
            b.iter(|| ingest(&f.store, &f.src))
        });
        g.bench_function(format!("ingest-cold/{name}"), |b| {
            b.iter_batched(
                || tempfile::tempdir_in(f.store.parent().expect("parent")).expect("tempdir"),
                |fresh| ingest(&fresh.path().join("s"), &f.src),
                BatchSize::PerIteration,
            )
        });
        for (label, method) in [("hardlink", Method::Hardlink), ("copy", Method::Copy)] {
            g.bench_function(format!("checkout-{label}/{name}"), |b| {
                b.iter_batched(
                    || {
                        f.store
                            .parent()
                            .expect("parent")
                            .join(format!("view-{}", std::process::id()))
                    },
                    |dest| {
                        let mut store = open(&f.store, false);
                        let digest = resolve(store.catalogue(), &f.digest).expect("digest");
                        let to = Destination::check(&store, &dest).expect("destination");
                        checkout_into(&mut store, digest, &to, method).expect("checkout");
                        let discard = DiscardOptions {
                            dest: &dest,
                            force_digest: None,
                            spare: false,
                        };
                        discard_view(&mut store, &discard).expect("discard");
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        g.bench_function(format!("floor-link/{name}"), |b| {
            b.iter_batched(
                || {
                    f.store
                        .parent()
                        .expect("parent")
                        .join(format!("links-{}", std::process::id()))
                },
                |dest| link_tree(f, &dest),
                BatchSize::PerIteration,
            )
        });
        g.bench_function(format!("floor-read/{name}"), |b| b.iter(|| read_tree(f)));
        let path = || {
            let mut store = open(&f.store, false);
            let digest = resolve(store.catalogue(), &f.digest).expect("digest");
            shared_view(&mut store, digest).expect("path")
        };
        path();
        g.bench_function(format!("path-existing/{name}"), |b| b.iter(path));
        g.bench_function(format!("verify/{name}"), |b| {
            let opts = VerifyOptions {
                digests: &[],
                repair_from: None,
                trusted: &[],
                progress: false,
            };
            b.iter(|| verify_store(&open(&f.store, false), &opts).expect("verify"))
        });
    }
    g.finish();
}

fn bench_show(c: &mut Criterion) {
    let one = fixture(|r| scaling_tree(r, 16));
    let many = fixture(|r| scaling_tree(r, 16));
    // 999 more releases that differ in one file each.
    for i in 0..999 {
        put(
            &many.src,
            "skills/ce-plan/SKILL.md",
            format!("# release {i}\n").as_bytes(),
            false,
        );
        ingest(&many.store, &many.src);
    }
    let mut g = c.benchmark_group("show");
    for (name, f) in [("1-snapshot", &one), ("1000-snapshots", &many)] {
        // What `show --files` reads: the snapshot, its ingests, views and files.
        g.bench_function(name, |b| {
            b.iter(|| {
                let store = open(&f.store, false);
                let cat = store.catalogue();
                let digest = resolve(cat, &f.digest).expect("digest");
                (
                    cat.snapshot(&digest).expect("snapshot"),
                    cat.ingest_summary(&digest).expect("ingests"),
                    cat.views(Some(&digest)).expect("views"),
                    cat.files(&digest).expect("files"),
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_manifest, bench_store, bench_show);
criterion_main!(benches);
