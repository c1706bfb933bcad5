//! Auditing: `show`, `list`, `log`, `find`, `diff`, `verify` (store and
//! `--tree`), `rm` and `gc`, run as an auditor would run them (docs/audit.md).
//!
//! * `manifest_bytes_hash_to_the_digest`: `show --manifest` piped to SHA-256
//!   (in process and through the real `sha256sum`) is the digest, for 20
//!   generated trees; the manifest is also checked against Python's
//!   `json.dumps` of the entries the generator wrote.
//! * `show_*`, `list_log_and_find_*`: the catalogue queries.
//! * `verify_finds_*`, `verify_clean_*`, `verify_repair_*`: one test per kind
//!   of damage, each naming the right snapshots and views.
//! * `verify_tree_*`: one test per kind of difference.
//! * `gc_*`, `rm_*`: what gc removes and keeps, and gc racing ingests.
//! * `diff_lists_exactly_the_changes`: diff against the changes made.
//! * `audit_*`: `cestore audit` of a generated results file over three
//!   real-size releases (one not stored): statuses and line numbers in text,
//!   JSON and Markdown; gzip, zstd and standard input; dotted fields;
//!   `--verify`; `--registry` against the real local registry; the bounds.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cestore::digest::ManifestDigest;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::gen::Rng;
use crate::util::{
    self, assert_exit, assert_ok, chmod, find_matches, ingest_sharing_four_digits, mode_of,
    object_path, parse_json, problems, s, sha_hex, write, FileRow, TestEnv,
};

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

/// Queries only the audit tests use.
impl TestEnv {
    /// Writes `release` at `rel` and ingests it.
    fn add(&self, release: &Release, rel: &str) -> String {
        let src = self.path(rel);
        release.write(&src);
        self.ingest_digest(&src, &release.version)
    }

    /// The file row at `path` of a snapshot.
    fn file(&self, digest: &str, path: &str) -> FileRow {
        self.files(digest)
            .into_iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("{path} is not in {digest}"))
    }

    /// A human-mode `verify` that must be clean: exit 0, and only its
    /// summary line, which finds no problems.
    fn verify_clean(&self, extra: &[&str]) {
        let mut args = vec!["verify"];
        args.extend_from_slice(extra);
        let out = self.run(&args);
        assert_exit(&out, 0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with("verified ")
                && stdout.ends_with(": no problems\n")
                && stdout.lines().count() == 1,
            "verify printed more than its summary on a clean store:\n{stdout}"
        );
    }
}

/// The distinct objects (non-empty files) of a set of snapshot files, with sizes.
fn objects_of<'a>(files: impl IntoIterator<Item = &'a FileRow>) -> BTreeMap<(String, bool), u64> {
    files
        .into_iter()
        .filter(|f| f.size > 0)
        .map(|f| (f.key(), f.size))
        .collect()
}

/// A JSON array of strings as a set.
fn str_set(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_str().expect("string").to_string())
        .collect()
}

fn set<const N: usize>(items: [&str; N]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The one problem of `kind` at `path`; panics unless there is exactly one.
fn problem<'a>(report: &'a Value, kind: &str, path: &str) -> &'a Value {
    let found: Vec<&Value> = problems(report)
        .iter()
        .filter(|p| p["kind"] == kind && p["path"] == path)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {kind} problem at {path}:\n{report:#}"
    );
    found[0]
}

/// The problems' kinds, sorted.
fn kinds(report: &Value) -> Vec<String> {
    let mut k: Vec<String> = problems(report)
        .iter()
        .map(|p| p["kind"].as_str().expect("kind").to_string())
        .collect();
    k.sort();
    k
}

/// Runs one SQL statement on the store's catalogue with Python's `sqlite3`
/// module; returns the row count it reports.
fn python_sql(store: &Path, sql: &str, params: &[&str]) -> i64 {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             cur = c.execute(sys.argv[2], sys.argv[3:])\n\
             c.commit()\n\
             print(cur.rowcount)\n\
             c.close()\n",
        )
        .arg(store.join("catalogue.sqlite"))
        .arg(sql)
        .args(params)
        .output()
        .expect("run python3");
    assert_ok(&out);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("row count")
}

/// Makes an object writable, flips one bit of its first byte, restores its mode.
fn flip_byte(object: &Path) {
    let mode = mode_of(object);
    chmod(object, mode | 0o200);
    let mut bytes = fs::read(object).expect("read object");
    bytes[0] ^= 0x01;
    fs::write(object, &bytes).expect("write object");
    chmod(object, mode);
    assert_eq!(mode_of(object), mode);
}

/// Makes an object writable, drops its last byte, restores its mode.
fn truncate_object(object: &Path) {
    let mode = mode_of(object);
    chmod(object, mode | 0o200);
    let len = fs::metadata(object).expect("stat object").len();
    assert!(len >= 2, "object too short to truncate");
    fs::OpenOptions::new()
        .write(true)
        .open(object)
        .expect("open object")
        .set_len(len - 1)
        .expect("truncate object");
    chmod(object, mode);
    assert_eq!(mode_of(object), mode);
}

/// Copies a view into a fresh, writable tree: directories 0755, files 0644
/// or 0755 as their exec bit says. Never touches the view itself.
fn writable_copy(src: &Path, dst: &Path) {
    fs::create_dir(dst).expect("create copy root");
    chmod(dst, 0o755);
    let mut names: Vec<_> = fs::read_dir(src)
        .expect("read view dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    for name in names {
        let (from, to) = (src.join(&name), dst.join(&name));
        let meta = fs::symlink_metadata(&from).expect("stat view entry");
        if meta.is_dir() {
            writable_copy(&from, &to);
        } else {
            assert!(meta.is_file(), "unexpected entry {}", from.display());
            fs::write(&to, fs::read(&from).expect("read view file")).expect("write copy");
            chmod(
                &to,
                if meta.permissions().mode() & 0o111 != 0 {
                    0o755
                } else {
                    0o644
                },
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Releases
// ---------------------------------------------------------------------------

/// A plugin release to write: every file's bytes and mode, by relative path.
#[derive(Clone, Debug)]
struct Release {
    version: String,
    files: BTreeMap<String, (Vec<u8>, u32)>,
}

impl Release {
    /// The smallest accepted release at `version`.
    fn new(version: &str) -> Release {
        let mut r = Release {
            version: version.to_string(),
            files: BTreeMap::new(),
        };
        r.add(
            ".claude-plugin/plugin.json",
            format!(r#"{{"name": "compound-engineering", "version": "{version}"}}"#),
            false,
        );
        for skill in ["ce-plan", "ce-work", "ce-code-review"] {
            r.add(
                &format!("skills/{skill}/SKILL.md"),
                format!("# {skill}\n"),
                false,
            );
        }
        r
    }

    fn add(&mut self, path: &str, bytes: impl AsRef<[u8]>, executable: bool) {
        let mode = if executable { 0o755 } else { 0o644 };
        self.add_mode(path, bytes, mode);
    }

    fn add_mode(&mut self, path: &str, bytes: impl AsRef<[u8]>, mode: u32) {
        self.files
            .insert(path.to_string(), (bytes.as_ref().to_vec(), mode));
    }

    fn set_exec(&mut self, path: &str, executable: bool) {
        let slot = self.files.get_mut(path).expect("file in release");
        slot.1 = if executable { 0o755 } else { 0o644 };
    }

    fn executable(&self, path: &str) -> bool {
        self.files[path].1 & 0o111 != 0
    }

    /// Writes the release into a new directory `root`.
    fn write(&self, root: &Path) {
        fs::create_dir_all(root).expect("create release root");
        for (path, (bytes, mode)) in &self.files {
            let p = root.join(path);
            write(&p, bytes);
            chmod(&p, *mode);
        }
    }

    /// The manifest entries, in the reference's walk order.
    fn entries(&self) -> Vec<Value> {
        let mut paths: Vec<&String> = self.files.keys().collect();
        paths.sort_by(|a, b| manifest_key(a).cmp(&manifest_key(b)));
        paths
            .into_iter()
            .map(|p| {
                let (bytes, mode) = &self.files[p];
                json!({
                    "executable": mode & 0o111 != 0,
                    "path": p,
                    "sha256": sha_hex(bytes),
                    "size": bytes.len(),
                })
            })
            .collect()
    }
}

/// Sort key of the reference's walk: the manifests, then skills, scripts,
/// assets, each depth first with names in code point order.
fn manifest_key(path: &str) -> (usize, Vec<&str>) {
    let top = path.split('/').next().unwrap_or("");
    let rank = match (top, path) {
        (_, ".claude-plugin/plugin.json") => 0,
        (_, ".claude-plugin/marketplace.json") => 1,
        ("skills", _) => 2,
        ("scripts", _) => 3,
        ("assets", _) => 4,
        _ => panic!("{path} is not a kept path"),
    };
    (rank, path.split('/').collect())
}

/// Name pieces: non-ASCII (composed, decomposed, astral), quotes, backslash,
/// spaces, control characters, and prefixes of each other (`a`, `a-b`). None
/// can make a name the filter drops.
const SYLLABLES: [&str; 18] = [
    "a", "-b", "_c", "ka", "zu", "mé", "e\u{301}", "名前", "o\"q", "x'y", "r b", "ñ", "ß", "🎵",
    "a\\b", "t\tab", "\u{7f}", "Ω",
];

const MODES: [u32; 8] = [0o644, 0o644, 0o755, 0o744, 0o654, 0o645, 0o600, 0o700];

fn random_name(rng: &mut Rng) -> String {
    let n = 1 + rng.below(3);
    (0..n).map(|_| *rng.pick(&SYLLABLES)).collect()
}

/// A release with 6 to 16 extra files of random names, bytes and modes.
fn random_release(seed: u64, version: &str) -> Release {
    let mut rng = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xA0D1_7E57);
    let mut r = Release::new(version);
    if rng.below(3) == 0 {
        r.add(
            ".claude-plugin/marketplace.json",
            r#"{"plugins": []}"#,
            false,
        );
    }
    let want = 6 + rng.below(11) as usize;
    let mut contents: Vec<Vec<u8>> = Vec::new();
    let mut made = 0;
    while made < want {
        let mut path = rng.pick(&["skills", "scripts", "assets"]).to_string();
        for _ in 0..rng.below(3) {
            path.push_str("/d-");
            path.push_str(&random_name(&mut rng));
        }
        path.push_str("/f-");
        path.push_str(&random_name(&mut rng));
        if rng.below(2) == 0 {
            path.push_str(".md");
        }
        if r.files.contains_key(&path) {
            continue;
        }
        let bytes = if !contents.is_empty() && rng.below(5) == 0 {
            rng.pick(&contents).clone()
        } else if rng.below(8) == 0 {
            Vec::new()
        } else {
            let len = rng.below(300) as usize;
            (0..len).map(|_| rng.next_u64() as u8).collect()
        };
        contents.push(bytes.clone());
        let mode = *rng.pick(&MODES);
        r.add_mode(&path, bytes, mode);
        made += 1;
    }
    r
}

/// Two releases that share most files: `skills/shared/s.md`,
/// `scripts/tool.sh` and the required skills are in both; `skills/a/a.md`
/// and plugin.json 1.0.0 only in A; `skills/b/b.md` and plugin.json 1.0.1
/// only in B.
struct Pair {
    env: TestEnv,
    a: String,
    b: String,
    src_a: PathBuf,
}

const ONLY_A: &str = "skills/a/a.md";
const SHARED: &str = "skills/shared/s.md";
const SHARED_EXEC: &str = "scripts/tool.sh";

fn pair() -> Pair {
    pair_with(false)
}

/// [`pair`], with an empty `skills/a/empty.md` in A when `empty` is set.
fn pair_with(empty: bool) -> Pair {
    let env = TestEnv::new();
    let mut ra = Release::new("1.0.0");
    ra.add(SHARED, "shared between A and B\n".repeat(20), false);
    ra.add(SHARED_EXEC, "#!/bin/sh\necho shared tool\n", true);
    ra.add(ONLY_A, "only in release A\n".repeat(10), false);
    if empty {
        ra.add("skills/a/empty.md", "", false);
    }
    let mut rb = Release::new("1.0.1");
    rb.add(SHARED, "shared between A and B\n".repeat(20), false);
    rb.add(SHARED_EXEC, "#!/bin/sh\necho shared tool\n", true);
    rb.add("skills/b/b.md", "only in release B\n".repeat(10), false);
    let src_a = env.path("src-a");
    let a = env.add(&ra, "src-a");
    let b = env.add(&rb, "src-b");
    Pair { env, a, b, src_a }
}

// ---------------------------------------------------------------------------
// 1. show --manifest | sha256sum
// ---------------------------------------------------------------------------

#[test]
fn manifest_bytes_hash_to_the_digest() {
    let env = TestEnv::new();
    let mut expected_lists = Vec::new();
    let mut digests = Vec::new();
    for seed in 0..20u64 {
        let release = random_release(seed, &format!("1.{seed}.0"));
        let d = env.add(&release, &format!("src-{seed}"));

        // In process.
        let out = env.run(["show", &d, "--manifest"]);
        assert_ok(&out);
        assert!(out.stdout.is_ascii(), "seed {seed}: manifest is not ASCII");
        assert_eq!(
            ManifestDigest::of(&out.stdout).to_hex(),
            d,
            "seed {seed}: the manifest bytes do not hash to the digest"
        );

        // Through the real sha256sum.
        let piped = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" show "$1" --manifest --store "$2" | sha256sum"#)
            .arg(util::bin())
            .arg(&d)
            .arg(&env.store)
            .env_remove("CESTORE_DIR")
            .output()
            .expect("run sh");
        assert_ok(&piped);
        let text = String::from_utf8_lossy(&piped.stdout);
        assert_eq!(
            text.split_whitespace().next(),
            Some(d.as_str()),
            "seed {seed}: sha256sum printed {text:?}"
        );

        // The manifest lists exactly the files written, in walk order.
        let manifest: Value = serde_json::from_slice(&out.stdout).expect("manifest is JSON");
        let expected = release.entries();
        assert_eq!(
            manifest["files"],
            Value::Array(expected.clone()),
            "seed {seed}"
        );
        assert_eq!(manifest["schema_version"], 1);

        // The JSON form carries the same bytes.
        let j = env.json(["show", &d, "--manifest", "--json"]);
        assert_eq!(j["manifest_digest"], d.as_str());
        assert_eq!(
            j["canonical_manifest"]
                .as_str()
                .expect("canonical_manifest"),
            String::from_utf8(out.stdout).expect("ASCII")
        );
        expected_lists.push(Value::Array(expected));
        digests.push(d);
    }
    assert_eq!(
        digests.iter().collect::<BTreeSet<_>>().len(),
        20,
        "20 trees, 20 digests"
    );

    // Python's json.dumps of the entries written gives the same digests.
    let mut py = Command::new("python3")
        .arg("-c")
        .arg(
            "import hashlib, json, sys\n\
             for files in json.load(sys.stdin):\n\
             \x20   m = json.dumps({'schema_version': 1, 'files': files}, sort_keys=True, separators=(',', ':'))\n\
             \x20   print(hashlib.sha256(m.encode('ascii')).hexdigest())\n",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    py.stdin
        .take()
        .expect("stdin")
        .write_all(Value::Array(expected_lists).to_string().as_bytes())
        .expect("write to python3");
    let out = py.wait_with_output().expect("python3 output");
    assert_ok(&out);
    let python: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(python, digests);
}

// ---------------------------------------------------------------------------
// 2. show
// ---------------------------------------------------------------------------

#[test]
fn show_reports_provenance_ingests_views_and_files() {
    let env = TestEnv::new();
    let mut release = Release::new("2.0.0");
    release.add("skills/a-b/y", "y\n", true);
    release.add("skills/a/x", "x\n", false);
    release.add("scripts/run.sh", "#!/bin/sh\n", true);
    release.add("assets/empty", "", false);
    let src1 = env.path("src1");
    let src2 = env.path("src2");
    release.write(&src1);
    release.write(&src2);
    let d = env.ingest_digest(&src1, "2.0.0");
    assert_eq!(
        env.ingest_digest(&src2, "2.0.0"),
        d,
        "same tree, same digest"
    );

    let v = env.json(["show", &d, "--json"]);
    let total: usize = release.files.values().map(|(b, _)| b.len()).sum();
    assert_eq!(
        v["provenance"],
        json!({
            "name": "compound-engineering",
            "version": "2.0.0",
            "manifest_schema_version": 1,
            "manifest_digest": d,
            "file_count": release.files.len(),
            "total_bytes": total,
        })
    );
    assert_eq!(v["ingest_count"], 2, "{v}");
    let log = env.json(["log", &d, "--json"]);
    let ats: Vec<&str> = log["ingests"]
        .as_array()
        .expect("ingests")
        .iter()
        .map(|e| e["at"].as_str().expect("at"))
        .collect();
    assert_eq!(ats.len(), 2);
    assert_eq!(v["first_ingested_at"], ats[0]);
    assert_eq!(v["last_ingested_at"], ats[1]);
    assert!(ats[0] <= ats[1]);
    assert_eq!(v["views"], json!([]));
    assert!(v.get("files").is_none(), "files only with --files: {v}");

    // A third ingest counts too.
    env.ingest_digest(&src1, "2.0.0");
    assert_eq!(env.json(["show", &d, "--json"])["ingest_count"], 3);

    // A live view is listed, in JSON and for people.
    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);
    let v = env.json(["show", &d, "--json"]);
    let views = v["views"].as_array().expect("views");
    assert_eq!(views.len(), 1, "{v}");
    assert_eq!(views[0]["path"], s(&view));
    assert_eq!(views[0]["kind"], "checkout");
    let out = env.run(["show", &d]);
    assert_ok(&out);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in [
        "name:                    compound-engineering".to_string(),
        "version:                 2.0.0".to_string(),
        "manifest_schema_version: 1".to_string(),
        format!("manifest_digest:         {d}"),
        format!("file_count:              {}", release.files.len()),
        format!("total_bytes:             {total}"),
        format!(
            "first_ingested_at:       {}",
            v["first_ingested_at"].as_str().unwrap()
        ),
        format!(
            "last_ingested_at:        {}",
            v["last_ingested_at"].as_str().unwrap()
        ),
        "ingest_count:            3".to_string(),
        "views:                   1".to_string(),
    ] {
        assert!(
            human.lines().any(|l| l == line),
            "no line {line:?} in:\n{human}"
        );
    }
    assert!(
        human.contains(&format!("  {} (checkout,", view.display())),
        "{human}"
    );

    // Discarded, it is no longer listed.
    assert_ok(&env.run([
        OsStr::new("discard"),
        view.as_os_str(),
        OsStr::new("--json"),
    ]));
    assert_eq!(env.json(["show", &d, "--json"])["views"], json!([]));
    let human = String::from_utf8_lossy(&env.run(["show", &d]).stdout).into_owned();
    assert!(
        human.lines().any(|l| l == "views:                   0"),
        "{human}"
    );

    // --files: manifest order, not path order.
    let expected: Vec<&str> = vec![
        ".claude-plugin/plugin.json",
        "skills/a/x",
        "skills/a-b/y",
        "skills/ce-code-review/SKILL.md",
        "skills/ce-plan/SKILL.md",
        "skills/ce-work/SKILL.md",
        "scripts/run.sh",
        "assets/empty",
    ];
    let files = env.files(&d);
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, expected);
    let rows: Vec<Value> = files
        .iter()
        .map(|f| json!({"executable": f.executable, "path": f.path, "sha256": f.sha256, "size": f.size}))
        .collect();
    assert_eq!(rows, release.entries());
    let out = env.run(["show", &d, "--files"]);
    assert_ok(&out);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    let listed: Vec<&str> = human
        .lines()
        .skip_while(|l| *l != "files:")
        .skip(1)
        .map(|l| l.rsplit(' ').next().expect("path"))
        .collect();
    assert_eq!(listed, expected, "{human}");
    let x = human.find(" skills/a/x\n").expect("skills/a/x listed");
    let y = human.find(" skills/a-b/y\n").expect("skills/a-b/y listed");
    assert!(x < y, "skills/a/x must come before skills/a-b/y:\n{human}");
    assert!(
        human.contains(&format!("{} x        2 skills/a-b/y", sha_hex(b"y\n"))),
        "{human}"
    );

    // A unique prefix works; an unknown one exits 4.
    let v = env.json(["show", &d[..6], "--json"]);
    assert_eq!(v["provenance"]["manifest_digest"], d.as_str());
    let other = "0123456789abcdef"
        .chars()
        .find(|c| !d.starts_with(*c))
        .expect("some other first character");
    // Four hex digits, the fewest a prefix may have.
    let other = format!("{other}{}", &d[1..4]);
    let err = assert_exit(&env.run(["show", &other]), 4);
    assert!(err.contains("no snapshot"), "{err}");
    let out = env.run(["show", &other, "--json"]);
    assert_exit(&out, 4);
    assert_eq!(parse_json(&out)["error"]["kind"], "unknown-digest");
    let unknown = format!("{other}{}", &d[4..]);
    assert_exit(&env.run(["show", &unknown]), 4);
    assert_exit(&env.run(["show", &unknown, "--files"]), 4);
    assert_exit(&env.run(["show", &unknown, "--manifest"]), 4);
}

#[test]
fn show_ambiguous_prefix_exits_5() {
    let env = TestEnv::new();
    let (prefix, one, two) = ingest_sharing_four_digits(&env, "3.0.0", "3.0.1");
    let both = [one, two];

    let out = env.run(["show", &prefix]);
    let err = assert_exit(&out, 5);
    assert!(out.stdout.is_empty());
    for d in &both {
        assert!(err.contains(d.as_str()), "{d} not named in: {err}");
    }
    let out = env.run(["show", &prefix, "--json"]);
    assert_exit(&out, 5);
    assert_eq!(parse_json(&out)["error"]["kind"], "ambiguous-digest");
    assert_exit(&env.run(["show", &prefix, "--manifest"]), 5);
    assert_exit(&env.run(["log", &prefix]), 5);
    assert_exit(&env.run(["verify", &prefix]), 5);

    // The shortest distinguishing prefix of each works.
    let common = both[0]
        .chars()
        .zip(both[1].chars())
        .take_while(|(a, b)| a == b)
        .count();
    for d in &both {
        let v = env.json(["show", &d[..=common], "--json"]);
        assert_eq!(v["provenance"]["manifest_digest"], d.as_str());
    }
}

// ---------------------------------------------------------------------------
// 3. list, log, find
// ---------------------------------------------------------------------------

#[test]
fn list_log_and_find_answer_from_the_catalogue() {
    let env = TestEnv::new();
    // A 1.0.0; B and C both 1.1.0 with other files. "ab" bytes are in A
    // (plain) and B (executable) only; the path skills/a/ab.md is in A and C.
    let mut ra = Release::new("1.0.0");
    ra.add("skills/a/ab.md", "in A and B\n", false);
    ra.add("skills/common/c.md", "common\n", false);
    let mut rb = Release::new("1.1.0");
    rb.add("scripts/ab.sh", "in A and B\n", true);
    rb.add("skills/common/c.md", "common\n", false);
    let mut rc = Release::new("1.1.0");
    rc.add("skills/a/ab.md", "C's own ab.md\n", false);
    rc.add("skills/common/c.md", "common\n", false);

    let user = "auditor-7";
    let ingest = |rel: &str, r: &Release| -> String {
        let src = env.path(rel);
        if !src.exists() {
            r.write(&src);
        }
        let out = env
            .cmd([
                OsStr::new("ingest"),
                src.as_os_str(),
                OsStr::new("--version"),
                OsStr::new(&r.version),
                OsStr::new("--json"),
            ])
            .env("USER", user)
            .output()
            .expect("run ingest");
        assert_ok(&out);
        parse_json(&out)["provenance"]["manifest_digest"]
            .as_str()
            .expect("digest")
            .to_string()
    };
    let a = ingest("src-a", &ra);
    let b = ingest("src-b", &rb);
    let c = ingest("src-c", &rc);
    let a2 = ingest("src-a2", &ra);
    assert_eq!(a, a2);

    // list, with filters.
    assert_eq!(env.listed(), vec![a.clone(), b.clone(), c.clone()]);
    let listed = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["list", "--json"];
        full.extend_from_slice(args);
        env.json(&full)["snapshots"]
            .as_array()
            .expect("snapshots")
            .iter()
            .map(|s| s["manifest_digest"].as_str().expect("digest").to_string())
            .collect()
    };
    assert_eq!(listed(&["--version", "1.1.0"]), vec![b.clone(), c.clone()]);
    assert_eq!(listed(&["--version", "1.0.0"]), vec![a.clone()]);
    assert_eq!(listed(&["--version", "9.9.9"]), Vec::<String>::new());
    assert_eq!(listed(&["--name", "compound-engineering"]).len(), 3);
    assert_eq!(listed(&["--name", "other-plugin"]), Vec::<String>::new());
    assert_eq!(
        listed(&["--version", "1.1.0", "--name", "compound-engineering"]),
        vec![b.clone(), c.clone()]
    );
    let v = env.json(["list", "--version", "1.1.0", "--json"]);
    for s in v["snapshots"].as_array().unwrap() {
        assert_eq!(s["version"], "1.1.0");
        assert_eq!(s["name"], "compound-engineering");
    }
    let out = env.run(["list", "--version", "1.1.0"]);
    assert_ok(&out);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines.len(), 2, "{human}");
    assert!(
        lines[0].starts_with(&b) && lines[1].starts_with(&c),
        "{human}"
    );

    // log: every ingest, with source, host, user and tool version.
    let host = fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("hostname")
        .trim()
        .to_string();
    let tool = format!("cestore {}", env!("CARGO_PKG_VERSION"));
    let v = env.json(["log", "--json"]);
    let events = v["ingests"].as_array().expect("ingests");
    let expected = [(&a, "src-a"), (&b, "src-b"), (&c, "src-c"), (&a, "src-a2")];
    assert_eq!(events.len(), expected.len(), "{v}");
    for (e, (d, src)) in events.iter().zip(expected) {
        assert_eq!(e["manifest_digest"], d.as_str(), "{e}");
        assert_eq!(e["source"], s(&env.path(src)), "{e}");
        assert_eq!(e["host"], host.as_str(), "{e}");
        assert_eq!(e["user"], user, "{e}");
        assert_eq!(e["tool_version"], tool.as_str(), "{e}");
    }
    assert_eq!(
        events[3]["new_objects"], 0,
        "a repeat ingest stores nothing"
    );
    assert!(events[0]["new_objects"].as_i64().unwrap() > 0);
    let ats: Vec<&str> = events.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] <= w[1]), "{ats:?}");
    let v = env.json(["log", &a[..8], "--json"]);
    let sources = crate::util::field_strs(&v["ingests"], "source");
    assert_eq!(sources, vec![s(&env.path("src-a")), s(&env.path("src-a2"))]);
    let out = env.run(["log", &b]);
    assert_ok(&out);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(human.lines().count(), 1, "{human}");
    for part in [
        b.clone(),
        s(&env.path("src-b")),
        format!("{user}@{host}"),
        tool.clone(),
    ] {
        assert!(human.contains(&part), "{part:?} not in {human}");
    }

    // find --object: exactly the snapshots holding that content.
    let found = |args: &[&str]| -> Vec<(String, String, bool)> {
        find_matches(&env, args)
            .iter()
            .map(|m| {
                (
                    m["manifest_digest"].as_str().unwrap().to_string(),
                    m["path"].as_str().unwrap().to_string(),
                    m["executable"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let ab = sha_hex(b"in A and B\n");
    assert_eq!(
        found(&["--object", &ab]),
        vec![
            (a.clone(), "skills/a/ab.md".to_string(), false),
            (b.clone(), "scripts/ab.sh".to_string(), true),
        ]
    );
    let plugin_110 = sha_hex(rb.files[".claude-plugin/plugin.json"].0.as_slice());
    let hits: BTreeSet<String> = found(&["--object", &plugin_110])
        .into_iter()
        .map(|h| h.0)
        .collect();
    assert_eq!(hits, set([&b, &c]));
    let c_only = sha_hex(b"C's own ab.md\n");
    assert_eq!(
        found(&["--object", &c_only]),
        vec![(c.clone(), "skills/a/ab.md".to_string(), false)]
    );
    assert_eq!(
        found(&["--object", &sha_hex(b"in no snapshot")]),
        Vec::new()
    );
    let common: BTreeSet<String> = found(&["--object", &sha_hex(b"common\n")])
        .into_iter()
        .map(|h| h.0)
        .collect();
    assert_eq!(common, set([&a, &b, &c]));
    let v = env.json(["find", "--object", &ab, "--json"]);
    assert_eq!(v["matches"][0]["sha256"], ab.as_str());
    assert_eq!(v["matches"][0]["version"], "1.0.0");
    assert_eq!(v["matches"][1]["version"], "1.1.0");

    // find --path: exactly the snapshots with that path, whatever its bytes.
    assert_eq!(
        found(&["--path", "skills/a/ab.md"]),
        vec![
            (a.clone(), "skills/a/ab.md".to_string(), false),
            (c.clone(), "skills/a/ab.md".to_string(), false),
        ]
    );
    assert_eq!(
        found(&["--path", "scripts/ab.sh"]),
        vec![(b.clone(), "scripts/ab.sh".to_string(), true)]
    );
    assert_eq!(found(&["--path", "skills/nowhere.md"]), Vec::new());
    let out = env.run(["find", "--path", "skills/a/ab.md"]);
    assert_ok(&out);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(human.lines().count(), 2, "{human}");
    assert!(human.contains(&a) && human.contains(&c) && !human.contains(&b));
}

// ---------------------------------------------------------------------------
// 4. verify: one test per kind of damage
// ---------------------------------------------------------------------------

#[test]
fn verify_of_a_clean_store_is_one_summary_line() {
    let p = pair();
    let env = &p.env;
    env.verify_clean(&[]);
    env.verify_clean(&[&p.a]);
    env.verify_clean(&[&p.a[..10], &p.b]);
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 0);
    assert_eq!(v["problems"], json!([]));
    assert_eq!(v["repaired"], json!([]));
    assert_eq!(v["snapshots_checked"], 2);
    let all: Vec<FileRow> = env.files(&p.a).into_iter().chain(env.files(&p.b)).collect();
    let objects = objects_of(&all);
    assert_eq!(v["objects_checked"], objects.len());
    assert_eq!(v["bytes_hashed"], objects.values().sum::<u64>());
    let (code, v) = env.verify(&[&p.b]);
    assert_eq!(code, 0);
    assert_eq!(v["snapshots_checked"], 1);
    assert_eq!(v["objects_checked"], objects_of(&env.files(&p.b)).len());
}

#[test]
fn verify_is_clean_after_ingesting_empty_files() {
    // Zero-length files (plain and executable) in an undamaged store: verify
    // must be silent, gc must find nothing to remove, and a repeat ingest
    // must store nothing new.
    let env = TestEnv::new();
    let mut r = Release::new("1.0.0");
    r.add("skills/ce-plan/empty.md", "", false);
    r.add("scripts/empty.sh", "", true);
    let src = env.path("src");
    r.write(&src);
    let d = env.ingest_digest(&src, "1.0.0");
    assert_eq!(env.files(&d).iter().filter(|f| f.size == 0).count(), 2);
    env.verify_clean(&[]);
    let v = env.json(["gc", "--dry-run", "--json"]);
    assert_eq!(v["objects"], json!([]), "gc would remove: {v}");
    env.json(["gc", "--json"]);
    let again = env.ingest(&src, "1.0.0");
    assert_eq!(again["ingest"]["already_present"], true);
    assert_eq!(again["ingest"]["new_objects"], 0, "{again}");
    env.verify_clean(&[]);
    let view = env.path("view");
    env.checkout_ok(&d, &view, &[]);
    assert_eq!(fs::read(view.join("scripts/empty.sh")).unwrap(), b"");
    assert_eq!(mode_of(&view.join("scripts/empty.sh")), 0o555);
}

#[test]
fn verify_finds_a_flipped_byte() {
    let p = pair();
    let env = &p.env;
    let only_a = env.object(&env.file(&p.a, ONLY_A));
    let shared = env.object(&env.file(&p.a, SHARED));
    flip_byte(&only_a);
    flip_byte(&shared);

    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&v), vec!["object-content", "object-content"], "{v:#}");
    let pa = problem(&v, "object-content", &s(&only_a));
    assert_eq!(pa["severity"], "corruption");
    assert_eq!(str_set(&pa["snapshots"]), set([&p.a]));
    assert_eq!(pa["views"], json!([]));
    let ps = problem(&v, "object-content", &s(&shared));
    assert_eq!(str_set(&ps["snapshots"]), set([&p.a, &p.b]));

    // Verifying B alone finds only the shared object, for B only.
    let (code, v) = env.verify(&[&p.b]);
    assert_eq!(code, 1);
    assert_eq!(problems(&v).len(), 1, "{v:#}");
    let ps = problem(&v, "object-content", &s(&shared));
    assert_eq!(str_set(&ps["snapshots"]), set([&p.b]));

    // People see the same.
    let out = env.run(["verify"]);
    assert_exit(&out, 1);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(human.contains(&format!("object-content (Corruption): {}", s(&only_a))));
    assert!(human.contains(&format!("affects snapshot {}", p.b)));
    assert!(human.ends_with(": 2 problems\n"), "{human}");
    assert!(!human.contains("garbage for"), "{human}");
}

#[test]
fn verify_finds_a_truncated_object() {
    let p = pair();
    let env = &p.env;
    let only_a = env.object(&env.file(&p.a, ONLY_A));
    let shared = env.object(&env.file(&p.a, SHARED_EXEC));
    truncate_object(&only_a);
    truncate_object(&shared);
    assert_eq!(mode_of(&shared), 0o555);

    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&v), vec!["object-size", "object-size"], "{v:#}");
    let pa = problem(&v, "object-size", &s(&only_a));
    assert_eq!(pa["severity"], "corruption");
    assert_eq!(str_set(&pa["snapshots"]), set([&p.a]));
    let ps = problem(&v, "object-size", &s(&shared));
    assert_eq!(str_set(&ps["snapshots"]), set([&p.a, &p.b]));
}

#[test]
fn verify_finds_a_deleted_object() {
    let p = pair();
    let env = &p.env;
    let only_a = env.object(&env.file(&p.a, ONLY_A));
    let shared = env.object(&env.file(&p.a, SHARED));
    fs::remove_file(&only_a).expect("delete object");
    fs::remove_file(&shared).expect("delete object");

    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&v), vec!["missing-object", "missing-object"], "{v:#}");
    let pa = problem(&v, "missing-object", &s(&only_a));
    assert_eq!(pa["severity"], "corruption");
    assert_eq!(str_set(&pa["snapshots"]), set([&p.a]));
    let ps = problem(&v, "missing-object", &s(&shared));
    assert_eq!(str_set(&ps["snapshots"]), set([&p.a, &p.b]));
}

#[test]
fn verify_finds_a_chmod_through_a_view() {
    let p = pair();
    let env = &p.env;
    let view_a = env.path("view-a");
    let view_b = env.path("view-b");
    env.checkout_ok(&p.a, &view_a, &[]);
    env.checkout_ok(&p.b, &view_b, &[]);
    env.verify_clean(&[]);
    let only_a = env.object(&env.file(&p.a, ONLY_A));
    let shared = env.object(&env.file(&p.a, SHARED));

    // chmod u+w on the view's files: the same inodes as the objects.
    let file_a = view_a.join(ONLY_A);
    chmod(&file_a, mode_of(&file_a) | 0o200);
    let file_b = view_b.join(SHARED);
    chmod(&file_b, mode_of(&file_b) | 0o200);
    assert_eq!(mode_of(&only_a), 0o644, "the view's file is the object");
    assert_eq!(mode_of(&shared), 0o644, "the view's file is the object");

    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&v), vec!["object-mode", "object-mode"], "{v:#}");
    let pa = problem(&v, "object-mode", &s(&only_a));
    assert_eq!(pa["severity"], "corruption");
    assert_eq!(str_set(&pa["snapshots"]), set([&p.a]));
    assert_eq!(str_set(&pa["views"]), set([&s(&view_a)]));
    let ps = problem(&v, "object-mode", &s(&shared));
    assert_eq!(str_set(&ps["snapshots"]), set([&p.a, &p.b]));
    assert_eq!(str_set(&ps["views"]), set([&s(&view_a), &s(&view_b)]));

    let out = env.run(["verify"]);
    assert_exit(&out, 1);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        human.contains(&format!("affects view {}", view_a.display())),
        "{human}"
    );
}

#[test]
fn verify_finds_a_leftover_temporary_file() {
    let p = pair();
    let env = &p.env;
    let leftover = env.store.join("tmp/ingest-999999-x");
    write(&leftover.join("partial"), "half an object");
    // A work directory whose owner is alive (holds its flock) is not garbage.
    let live = env.store.join("tmp/ingest-1-live");
    fs::create_dir(&live).expect("create live work dir");
    let held = fs::File::open(&live).expect("open live work dir");
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).expect("flock");

    // Garbage is listed, summed up for people, and no failure.
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 0);
    assert_eq!(kinds(&v), vec!["leftover-temporary"], "{v:#}");
    let pl = problem(&v, "leftover-temporary", &s(&leftover));
    assert_eq!(pl["severity"], "garbage");
    let out = env.run(["verify"]);
    assert_exit(&out, 0);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        human.contains("garbage for `cestore gc`: 1 leftover-temporary"),
        "{human}"
    );
    drop(held);
}

#[test]
fn verify_finds_an_orphan_object() {
    let p = pair();
    let env = &p.env;
    let bytes = b"no snapshot uses these bytes\n";
    let orphan = object_path(&env.store, &sha_hex(bytes), false);
    fs::write(&orphan, bytes).expect("write orphan");
    chmod(&orphan, 0o444);

    let (code, v) = env.verify(&[]);
    assert_eq!(code, 0, "garbage alone is no failure");
    assert_eq!(kinds(&v), vec!["orphan-object"], "{v:#}");
    let po = problem(&v, "orphan-object", &s(&orphan));
    assert_eq!(po["severity"], "garbage");
    assert_eq!(po["snapshots"], json!([]));
    // Orphans are a whole-store check; a named snapshot is still clean.
    env.verify_clean(&[&p.a]);
}

#[test]
fn verify_finds_a_catalogue_row_pointing_at_a_missing_object() {
    let p = pair();
    let env = &p.env;
    let original = env.file(&p.a, ONLY_A);
    let bogus = sha_hex(b"bytes the store never held");
    let n = python_sql(
        &env.store,
        // The one shared row of that file: only snapshot a lists it.
        "UPDATE entries SET sha256 = ? WHERE path = ?",
        &[&bogus, ONLY_A],
    );
    assert_eq!(n, 1, "one row updated");
    assert_eq!(env.file(&p.a, ONLY_A).sha256, bogus);
    // The stored manifest is untouched: it still hashes to the digest.
    let out = env.run(["show", &p.a, "--manifest"]);
    assert_eq!(ManifestDigest::of(&out.stdout).to_hex(), p.a);

    let (code, v) = env.verify(&[]);
    assert_eq!(code, 1);
    let missing = object_path(&env.store, &bogus, false);
    let pm = problem(&v, "missing-object", &s(&missing));
    assert_eq!(pm["severity"], "corruption");
    assert_eq!(str_set(&pm["snapshots"]), set([&p.a]));
    let catalogue = s(&env.store.join("catalogue.sqlite"));
    let pc = problem(&v, "catalogue-mismatch", &catalogue);
    assert_eq!(pc["severity"], "corruption");
    assert_eq!(str_set(&pc["snapshots"]), set([&p.a]));
    assert!(
        pc["detail"]
            .as_str()
            .unwrap()
            .contains("differ from the stored manifest"),
        "{pc}"
    );
    // The object the row named before is used by no row, but the manifest
    // on disk still names it: it is live, not an orphan for gc to take.
    let original_path = s(&env.object(&original));
    assert!(
        !problems(&v)
            .iter()
            .any(|pr| pr["path"] == original_path.as_str()),
        "{v:#}"
    );
    assert_eq!(
        kinds(&v),
        vec!["catalogue-mismatch", "missing-object"],
        "{v:#}"
    );
    for pr in problems(&v) {
        assert!(
            !str_set(&pr["snapshots"]).contains(&p.b),
            "B is unaffected: {pr}"
        );
    }
    let (code, v) = env.verify(&[&p.b]);
    assert_eq!((code, v["problems"].clone()), (0, json!([])));

    // recover rewrites the rows from the manifest on disk.
    let out = env.run(["recover", "--json"]);
    util::assert_ok(&out);
    let r = util::parse_json(&out);
    assert_eq!(str_set(&r["rewritten"]), set([&p.a]), "{r:#}");
    assert_eq!(env.file(&p.a, ONLY_A).sha256, original.sha256);
    let (code, v) = env.verify(&[]);
    assert_eq!((code, v["problems"].clone()), (0, json!([])));
}

#[test]
fn verify_repair_restores_from_the_source_tree() {
    let p = pair();
    let env = &p.env;
    let only_a = env.object(&env.file(&p.a, ONLY_A));
    let shared = env.object(&env.file(&p.a, SHARED_EXEC));
    let good_a = fs::read(&only_a).expect("read object");
    let good_shared = fs::read(&shared).expect("read object");
    flip_byte(&only_a);
    flip_byte(&shared);
    assert_eq!(env.verify(&[]).0, 1);

    let out = env.run([
        OsStr::new("verify"),
        OsStr::new("--repair-from"),
        p.src_a.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_exit(&out, 0);
    let v = parse_json(&out);
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(v["problems"], json!([]), "{v:#}");
    let repaired: Vec<&str> = crate::util::strs(&v["repaired"]);
    assert_eq!(repaired.len(), 2, "{v:#}");
    assert!(repaired.iter().any(|r| r.starts_with(&s(&only_a))));
    assert!(repaired.iter().any(|r| r.starts_with(&s(&shared))));
    assert_eq!(fs::read(&only_a).unwrap(), good_a);
    assert_eq!(fs::read(&shared).unwrap(), good_shared);
    assert_eq!(mode_of(&only_a), 0o444);
    assert_eq!(mode_of(&shared), 0o555);
    env.verify_clean(&[]);
}

// ---------------------------------------------------------------------------
// 5. verify --tree: one test per kind of difference
// ---------------------------------------------------------------------------

/// A snapshot checked out, and a fresh writable copy of its view per call.
struct TreeCase {
    p: Pair,
    view: PathBuf,
    n: std::cell::Cell<u32>,
}

impl TreeCase {
    fn new() -> TreeCase {
        let p = pair_with(true);
        let view = p.env.path("view");
        p.env.checkout_ok(&p.a, &view, &[]);
        TreeCase {
            p,
            view,
            n: std::cell::Cell::new(0),
        }
    }

    fn copy(&self) -> PathBuf {
        self.n.set(self.n.get() + 1);
        let dst = self.p.env.path(&format!("copy-{}", self.n.get()));
        writable_copy(&self.view, &dst);
        dst
    }

    /// Asserts `verify --tree` finds exactly `expected` in `dir`.
    fn expect(&self, dir: &Path, expected: Value) {
        let (code, diffs) = self.p.env.verify_tree(dir, &self.p.a);
        assert_eq!(diffs, expected);
        assert_eq!(code, 1);
    }
}

#[test]
fn verify_tree_accepts_the_view_and_a_faithful_copy() {
    let c = TreeCase::new();
    let (code, diffs) = c.p.env.verify_tree(&c.view, &c.p.a);
    assert_eq!((code, diffs), (0, json!([])));
    let copy = c.copy();
    let (code, diffs) = c.p.env.verify_tree(&copy, &c.p.a[..12]);
    assert_eq!((code, diffs), (0, json!([])));
    let out = c.p.env.run([
        OsStr::new("verify"),
        OsStr::new("--tree"),
        copy.as_os_str(),
        OsStr::new(&c.p.a),
    ]);
    assert_exit(&out, 0);
    assert!(out.stdout.is_empty());
    // Against the other snapshot, the copy differs.
    let (code, _) = c.p.env.verify_tree(&copy, &c.p.b);
    assert_eq!(code, 1);
}

#[test]
fn verify_tree_finds_an_extra_file() {
    let c = TreeCase::new();
    let copy = c.copy();
    write(&copy.join("skills/ce-plan/extra.md"), "extra\n");
    c.expect(
        &copy,
        json!([{"kind": "extra-file", "path": "skills/ce-plan/extra.md"}]),
    );
    let out = c.p.env.run([
        OsStr::new("verify"),
        OsStr::new("--tree"),
        copy.as_os_str(),
        OsStr::new(&c.p.a),
    ]);
    assert_exit(&out, 1);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        human.contains("extra file: skills/ce-plan/extra.md"),
        "{human}"
    );
}

#[test]
fn verify_tree_finds_a_missing_file() {
    let c = TreeCase::new();
    let copy = c.copy();
    fs::remove_file(copy.join(SHARED)).expect("remove");
    c.expect(&copy, json!([{"kind": "missing", "path": SHARED}]));
    // The empty file counts too.
    let copy = c.copy();
    fs::remove_file(copy.join("skills/a/empty.md")).expect("remove");
    c.expect(
        &copy,
        json!([{"kind": "missing", "path": "skills/a/empty.md"}]),
    );
}

#[test]
fn verify_tree_finds_changed_bytes() {
    let c = TreeCase::new();
    let copy = c.copy();
    let expected = c.p.env.file(&c.p.a, ONLY_A).sha256;
    fs::write(copy.join(ONLY_A), "changed\n").expect("write");
    c.expect(
        &copy,
        json!([{
            "kind": "content-changed",
            "path": ONLY_A,
            "expected": expected,
            "found": sha_hex(b"changed\n"),
        }]),
    );
}

#[test]
fn verify_tree_finds_a_flipped_exec_bit() {
    let c = TreeCase::new();
    let copy = c.copy();
    chmod(&copy.join(ONLY_A), 0o755);
    c.expect(
        &copy,
        json!([{"kind": "exec-changed", "path": ONLY_A, "expected": false}]),
    );
    let copy = c.copy();
    chmod(&copy.join(SHARED_EXEC), 0o644);
    c.expect(
        &copy,
        json!([{"kind": "exec-changed", "path": SHARED_EXEC, "expected": true}]),
    );
}

#[test]
fn verify_tree_finds_a_symlink_in_place_of_a_file() {
    let c = TreeCase::new();
    let copy = c.copy();
    // Even a symlink to the right bytes is refused.
    let target = c.p.env.path("same-bytes.md");
    fs::copy(copy.join(SHARED), &target).expect("copy");
    fs::remove_file(copy.join(SHARED)).expect("remove");
    symlink(&target, copy.join(SHARED)).expect("symlink");
    c.expect(&copy, json!([{"kind": "symlink", "path": SHARED}]));
}

#[test]
fn verify_tree_finds_an_extra_empty_directory() {
    let c = TreeCase::new();
    let copy = c.copy();
    fs::create_dir(copy.join("skills/ce-work/empty")).expect("mkdir");
    c.expect(
        &copy,
        json!([{"kind": "extra-directory", "path": "skills/ce-work/empty"}]),
    );
}

#[test]
fn verify_tree_finds_a_directory_in_place_of_a_file() {
    let c = TreeCase::new();
    let copy = c.copy();
    fs::remove_file(copy.join(ONLY_A)).expect("remove");
    fs::create_dir(copy.join(ONLY_A)).expect("mkdir");
    c.expect(&copy, json!([{"kind": "not-a-file", "path": ONLY_A}]));
}

// ---------------------------------------------------------------------------
// 6. rm and gc
// ---------------------------------------------------------------------------

#[test]
fn gc_after_rm_removes_exactly_the_unused_objects() {
    let p = pair();
    let env = &p.env;
    let files_a = env.files(&p.a);
    let files_b = env.files(&p.b);
    let objects_a = objects_of(&files_a);
    let objects_b = objects_of(&files_b);
    let gone: BTreeMap<(String, bool), u64> = objects_a
        .iter()
        .filter(|(k, _)| !objects_b.contains_key(*k))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert!(gone.len() >= 2 && gone.len() < objects_a.len(), "{gone:?}");
    let gone_paths: BTreeSet<String> = gone
        .keys()
        .map(|(sha, x)| s(&object_path(&env.store, sha, *x)))
        .collect();
    let gone_bytes: u64 = gone.values().sum();

    // Nothing to collect before rm.
    let v = env.json(["gc", "--dry-run", "--json"]);
    assert_eq!(v["objects"], json!([]));
    let v = env.json(["rm", &p.a, "--json"]);
    assert_eq!(v["manifest_digest"], p.a.as_str());
    assert_eq!(env.listed(), vec![p.b.clone()]);
    assert_exit(&env.run(["show", &p.a]), 4);

    // The dry run reports the set and removes nothing.
    let dry = env.json(["gc", "--dry-run", "--json"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(str_set(&dry["objects"]), gone_paths);
    assert_eq!(dry["bytes_freed"], gone_bytes);
    assert_eq!(dry["objects_kept"], objects_b.len());
    for path in &gone_paths {
        assert!(Path::new(path).exists(), "dry run removed {path}");
    }

    let v = env.json(["gc", "--json"]);
    assert_eq!(v["dry_run"], false);
    assert_eq!(str_set(&v["objects"]), gone_paths);
    assert_eq!(v["bytes_freed"], gone_bytes);
    assert_eq!(v["objects_kept"], objects_b.len());
    assert_eq!(v["temporary"], json!([]));
    assert_eq!(v["shared_views"], json!([]));
    for path in &gone_paths {
        assert!(!Path::new(path).exists(), "gc left {path}");
    }
    for (sha, x) in objects_b.keys() {
        assert!(object_path(&env.store, sha, *x).exists());
    }

    let again = env.json(["gc", "--json"]);
    assert_eq!(again["objects"], json!([]));
    assert_eq!(again["bytes_freed"], 0);
    assert_eq!(again["objects_kept"], objects_b.len());
    env.verify_clean(&[]);
    let out = env.run(["gc"]);
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed 0 objects (0 bytes)"));
}

#[test]
fn rm_refuses_while_a_view_is_recorded() {
    let p = pair();
    let env = &p.env;
    let files_a = env.files(&p.a);
    let view = env.path("view-a");
    env.checkout_ok(&p.a, &view, &[]);

    let err = assert_exit(&env.run(["rm", &p.a]), 6);
    assert!(err.contains(&s(&view)), "{err}");
    let out = env.run(["rm", &p.a, "--json"]);
    assert_exit(&out, 6);
    assert_eq!(parse_json(&out)["error"]["kind"], "conflict");
    assert_eq!(env.listed(), vec![p.a.clone(), p.b.clone()]);

    // gc keeps every object of a snapshot with a recorded view.
    let v = env.json(["gc", "--json"]);
    assert_eq!(v["objects"], json!([]));
    for f in files_a.iter().filter(|f| f.size > 0) {
        assert!(env.object(f).exists(), "{} removed", f.path);
    }
    let (code, diffs) = env.verify_tree(&view, &p.a);
    assert_eq!((code, diffs), (0, json!([])));

    // --force forgets the snapshot and its view record; the view stays.
    let v = env.json(["rm", &p.a, "--force", "--json"]);
    assert_eq!(v["views_forgotten"], json!([s(&view)]));
    assert_eq!(env.listed(), vec![p.b.clone()]);
    let v = env.json(["gc", "--json"]);
    assert!(!v["objects"].as_array().unwrap().is_empty(), "{v}");
    for f in &files_a {
        let bytes = fs::read(view.join(&f.path)).expect("view file readable after gc");
        assert_eq!(sha_hex(&bytes), f.sha256, "{}", f.path);
    }
    env.verify_clean(&[]);
}

#[test]
fn gc_removes_leftovers_and_orphan_shared_views() {
    let p = pair();
    let env = &p.env;
    // A live shared view of B, which gc must keep.
    let out = env.run(["path", &p.b]);
    assert_ok(&out);
    let live_view = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(live_view.is_dir(), "{}", live_view.display());

    let leftover = env.store.join("tmp/ingest-999999-x");
    write(&leftover.join("partial"), "half an object");
    let held_dir = env.store.join("tmp/ingest-1-live");
    fs::create_dir(&held_dir).expect("create live work dir");
    let held = fs::File::open(&held_dir).expect("open live work dir");
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).expect("flock");
    let unknown = sha_hex(b"a digest no snapshot has");
    let orphan_view = env.store.join("views").join(&unknown);
    write(&orphan_view.join("skills/x.md"), "x");
    let bytes = b"orphan object\n";
    let orphan = object_path(&env.store, &sha_hex(bytes), true);
    fs::write(&orphan, bytes).expect("write orphan");
    chmod(&orphan, 0o555);

    // Garbage alone is no failure: verify lists it and exits 0.
    let (code, v) = env.verify(&[]);
    assert_eq!(code, 0);
    assert_eq!(
        kinds(&v),
        vec!["leftover-temporary", "orphan-object", "orphan-shared-view"],
        "{v:#}"
    );
    assert!(problems(&v).iter().all(|p| p["severity"] == "garbage"));

    let dry = env.json(["gc", "--dry-run", "--json"]);
    let v = env.json(["gc", "--json"]);
    for r in [&dry, &v] {
        assert_eq!(str_set(&r["temporary"]), set([&s(&leftover)]), "{r}");
        assert_eq!(str_set(&r["shared_views"]), set([&s(&orphan_view)]), "{r}");
        assert_eq!(str_set(&r["objects"]), set([&s(&orphan)]), "{r}");
        assert_eq!(r["bytes_freed"], bytes.len());
    }
    assert!(!leftover.exists());
    assert!(!orphan_view.exists());
    assert!(!orphan.exists());
    assert!(held_dir.is_dir(), "gc removed a live work directory");
    assert!(live_view.is_dir(), "gc removed a live shared view");
    drop(held);
    // Unlocked, it is a leftover like any other.
    let v = env.json(["gc", "--json"]);
    assert_eq!(str_set(&v["temporary"]), set([&s(&held_dir)]));
    env.verify_clean(&[]);
}

// ---------------------------------------------------------------------------
// 7. gc racing ingests
// ---------------------------------------------------------------------------

/// Round `k`, release `j`: 30 files shared by every release, one shared by
/// the round (and by the round's decoy), one of its own.
fn race_release(k: usize, j: usize) -> Release {
    let mut r = Release::new(&format!("4.{k}.{j}"));
    for i in 0..30 {
        r.add(
            &format!("skills/lib/f{i:02}.md"),
            format!("shared file {i}\n").repeat(40),
            i % 7 == 0,
        );
    }
    r.add(
        "skills/x/carry.md",
        format!("carried by round {k}\n"),
        false,
    );
    r.add("skills/x/own.md", format!("own to {k}.{j}\n"), false);
    r
}

#[test]
fn gc_racing_ingests_loses_nothing() {
    let env = TestEnv::new();
    let mut kept = BTreeSet::new();
    for k in 0..5 {
        for j in 0..3 {
            race_release(k, j).write(&env.path(&format!("r-{k}-{j}")));
        }
        // A decoy with the round's shared files, ingested then forgotten, so
        // gc wants to remove exactly what the round's ingests reuse.
        let mut decoy = race_release(k, 9);
        decoy.version = format!("9.{k}.0");
        decoy.add(
            ".claude-plugin/plugin.json",
            format!(r#"{{"name": "compound-engineering", "version": "9.{k}.0"}}"#),
            false,
        );
        let d = env.add(&decoy, &format!("decoy-{k}"));
        env.json(["rm", &d, "--json"]);

        let mut children = Vec::new();
        for slot in 0..4 {
            // gc starts first, second, third or last in turn.
            let mut cmd = if slot == k % 4 {
                env.cmd(["gc", "--json"])
            } else {
                let j = if slot < k % 4 { slot } else { slot - 1 };
                let src = env.path(&format!("r-{k}-{j}"));
                env.cmd([
                    OsStr::new("ingest"),
                    src.as_os_str(),
                    OsStr::new("--version"),
                    OsStr::new(&format!("4.{k}.{j}")),
                    OsStr::new("--json"),
                ])
            };
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            children.push((slot == k % 4, cmd.spawn().expect("spawn")));
        }
        for (is_gc, child) in children {
            let out = child.wait_with_output().expect("wait");
            assert_ok(&out);
            let v = parse_json(&out);
            assert_eq!(v["ok"], true, "{v}");
            if !is_gc {
                let d = v["provenance"]["manifest_digest"]
                    .as_str()
                    .expect("digest")
                    .to_string();
                kept.insert(d);
            }
        }
        // Nothing is lost: no corruption whatever gc did.
        let (_, v) = env.verify(&[]);
        let corrupt: Vec<&Value> = problems(&v)
            .iter()
            .filter(|p| p["severity"] != "garbage")
            .collect();
        assert!(corrupt.is_empty(), "round {k}: {v:#}");
    }
    assert_eq!(kept.len(), 15);
    let listed: BTreeSet<String> = env.listed().into_iter().collect();
    assert_eq!(listed, kept);

    let (_, v) = env.verify(&[]);
    assert!(
        problems(&v).iter().all(|p| p["severity"] == "garbage"),
        "{v:#}"
    );
    env.json(["gc", "--json"]);
    env.verify_clean(&[]);
    for (i, d) in kept.iter().enumerate() {
        let view = env.path(&format!("co-{i}"));
        env.checkout_ok(d, &view, &[]);
        let (code, diffs) = env.verify_tree(&view, d);
        assert_eq!((code, diffs), (0, json!([])), "{d}");
    }
}

// ---------------------------------------------------------------------------
// 8. diff
// ---------------------------------------------------------------------------

/// The changes between two releases, as `diff --json` should list them.
fn expected_changes(a: &Release, b: &Release) -> Vec<Value> {
    let paths: BTreeSet<&String> = a.files.keys().chain(b.files.keys()).collect();
    let mut out = Vec::new();
    for path in paths {
        match (a.files.get(path), b.files.get(path)) {
            (Some((bytes, _)), None) => out.push(json!({
                "change": "removed", "path": path, "sha256": sha_hex(bytes),
            })),
            (None, Some((bytes, _))) => out.push(json!({
                "change": "added", "path": path, "sha256": sha_hex(bytes),
            })),
            (Some((x, _)), Some((y, _))) if x != y => out.push(json!({
                "change": "content", "path": path, "from": sha_hex(x), "to": sha_hex(y),
                "exec_changed": a.executable(path) != b.executable(path),
            })),
            (Some(_), Some(_)) if a.executable(path) != b.executable(path) => out.push(json!({
                "change": "exec", "path": path, "executable": b.executable(path),
            })),
            _ => {}
        }
    }
    out
}

#[test]
fn diff_lists_exactly_the_changes() {
    let env = TestEnv::new();
    for seed in [3u64, 11, 42] {
        let a = random_release(100 + seed, "5.0.0");
        let mut b = a.clone();
        let mut rng = Rng::new(seed);
        let mut extra: Vec<String> = a
            .files
            .keys()
            .filter(|p| {
                p.starts_with("scripts/") || p.starts_with("assets/") || {
                    p.starts_with("skills/") && !p.ends_with("/SKILL.md")
                }
            })
            .cloned()
            .collect();
        assert!(extra.len() >= 6, "seed {seed}: too few files");
        let mut take = || extra.remove(rng.below(extra.len() as u64) as usize);
        let removed = take();
        let content = [take(), take()];
        let flipped = take();
        let both = take();
        b.files.remove(&removed);
        for p in &content {
            b.files.get_mut(p).unwrap().0.extend_from_slice(b" changed");
        }
        let was = b.executable(&flipped);
        b.set_exec(&flipped, !was);
        b.files
            .get_mut(&both)
            .unwrap()
            .0
            .extend_from_slice(b" both");
        let was = b.executable(&both);
        b.set_exec(&both, !was);
        b.add("skills/new/added-1.md", format!("new {seed}\n"), false);
        b.add("assets/added-2.bin", format!("new 2 {seed}\n"), true);

        let da = env.add(&a, &format!("a-{seed}"));
        let db = env.add(&b, &format!("b-{seed}"));
        let expected = expected_changes(&a, &b);
        let count = |c: &str| expected.iter().filter(|e| e["change"] == c).count();
        assert_eq!(
            (
                count("added"),
                count("removed"),
                count("content"),
                count("exec")
            ),
            (2, 1, 3, 1),
            "seed {seed}: {expected:#?}"
        );

        let v = env.json(["diff", &da, &db, "--json"]);
        assert_eq!(v["from"], da.as_str());
        assert_eq!(v["to"], db.as_str());
        let changes = v["changes"].as_array().expect("changes").clone();
        let paths: Vec<&str> = changes
            .iter()
            .map(|c| c["path"].as_str().unwrap())
            .collect();
        assert!(
            paths.windows(2).all(|w| w[0] < w[1]),
            "changes by path: {paths:?}"
        );
        let by_path = |list: &[Value]| -> BTreeMap<String, Value> {
            list.iter()
                .map(|c| (c["path"].as_str().unwrap().to_string(), c.clone()))
                .collect()
        };
        assert_eq!(by_path(&changes), by_path(&expected), "seed {seed}");
        assert_eq!(changes.len(), 7);

        // Reversed, and against itself.
        let back = env.json(["diff", &db, &da, "--json"]);
        assert_eq!(
            by_path(back["changes"].as_array().unwrap()),
            by_path(&expected_changes(&b, &a))
        );
        assert_eq!(
            env.json(["diff", &da, &da[..10], "--json"])["changes"],
            json!([])
        );

        // People see one line per change.
        let out = env.run(["diff", &da, &db]);
        assert_ok(&out);
        let human = String::from_utf8_lossy(&out.stdout).into_owned();
        // One line per change, then the count of each kind.
        assert_eq!(human.lines().count(), 8, "{human}");
        let kind = |k: &str| changes.iter().filter(|c| c["change"] == k).count();
        let summary = format!(
            "{} added, {} removed, {} changed",
            kind("added"),
            kind("removed"),
            kind("content") + kind("exec")
        );
        assert_eq!(human.lines().last(), Some(summary.as_str()), "{human}");
        let exec_now = if b.executable(&flipped) { "+x" } else { "-x" };
        for line in [
            format!("D  {removed}"),
            format!("M  {}", content[0]),
            format!("M  {}", content[1]),
            format!("X  {flipped} ({exec_now})"),
            format!("Mx {both}"),
            "A  skills/new/added-1.md".to_string(),
            "A  assets/added-2.bin".to_string(),
        ] {
            assert!(human.lines().any(|l| l == line), "no {line:?} in:\n{human}");
        }
    }
    assert_exit(&env.run(["diff", "0000000", "1111111"]), 4);
}

// ---------------------------------------------------------------------------
// Results files: `cestore audit FILE`
// ---------------------------------------------------------------------------

/// A release of real size: the minimal plugin and 400 generated files of 4
/// to 24 KB, every thirteenth executable, distinct per `salt`.
fn real_release(root: &Path, version: &str, salt: u64) {
    util::minimal_plugin(root, version);
    for i in 0..400u64 {
        let dir = ["skills/gen", "scripts/gen", "assets/gen"][(i % 3) as usize];
        let path = root.join(format!("{dir}/d{:02}/f{i:04}.md", i % 20));
        let len = 4_000 + (i as usize * 7_919) % 20_000;
        write(&path, crate::remote::noise(salt, i, len));
        if i % 13 == 0 {
            chmod(&path, 0o755);
        }
    }
}

/// Three real-size releases: A (1.0.0) and B (1.1.0) stored, C (2.0.0)
/// only digested, its source kept.
struct Results {
    env: TestEnv,
    a: String,
    b: String,
    c: String,
    src_c: PathBuf,
}

fn three_releases() -> Results {
    let env = TestEnv::new();
    let salt = crate::remote::salt();
    let (src_a, src_b, src_c) = (env.path("rel-a"), env.path("rel-b"), env.path("rel-c"));
    real_release(&src_a, "1.0.0", salt);
    real_release(&src_b, "1.1.0", salt ^ 0x5555);
    real_release(&src_c, "2.0.0", salt ^ 0xaaaa);
    let a = env.ingest_digest(&src_a, "1.0.0");
    let b = env.ingest_digest(&src_b, "1.1.0");
    let digested = env.json([
        OsStr::new("digest"),
        src_c.as_os_str(),
        OsStr::new("--version"),
        OsStr::new("2.0.0"),
        OsStr::new("--json"),
    ]);
    let c = digested["provenance"]["manifest_digest"]
        .as_str()
        .expect("digest")
        .to_string();
    assert_eq!(env.listed().len(), 2);
    Results {
        env,
        a,
        b,
        c,
        src_c,
    }
}

/// One row as the harness writes it: the arm, the task and run, the CE
/// fields, and fields audit does not read.
fn harness_row(arm: &str, run: u64, version: Option<&str>, digest: Option<&str>) -> String {
    json!({
        "task_id": format!("task-{:03}", run % 7),
        "arm": arm,
        "run": run,
        "model": "claude-sonnet-4-5",
        "score": 0.25 * (run % 4) as f64,
        "tokens": {"input": 1000 + run, "output": 200 + run},
        "ce_plugin_version": version,
        "ce_plugin_manifest_digest": digest,
        "workspace": format!("/runs/task-{:03}/run-{run}", run % 7),
        "error": null,
    })
    .to_string()
}

/// The generated results file, line by line (1-based):
///
/// 1 `ce_workflow` A 1.0.0; 2 `ce_review` B 1.1.0; 3 `baseline` without;
/// 4 `ce_workflow_direct` C 2.0.0 (C is not stored); 5 `ce_review` A
/// claiming 1.0.1; 6 `baseline` with A's digest; 7 `ce_review` without a
/// digest; 8 a JSON array; 9 `ce_workflow` with a non-hex digest; 10
/// `ce_workflow` B 1.1.0; 11 `ce_review` A claiming 1.0.1; 12 a row cut
/// short (no newline).
fn results_text(r: &Results) -> String {
    let (a, b, c) = (r.a.as_str(), r.b.as_str(), r.c.as_str());
    let not_hex = "Z".repeat(64);
    let lines = [
        harness_row("ce_workflow", 1, Some("1.0.0"), Some(a)),
        harness_row("ce_review", 2, Some("1.1.0"), Some(b)),
        harness_row("baseline", 3, None, None),
        harness_row("ce_workflow_direct", 4, Some("2.0.0"), Some(c)),
        harness_row("ce_review", 5, Some("1.0.1"), Some(a)),
        harness_row("baseline", 6, None, Some(a)),
        harness_row("ce_review", 7, Some("1.1.0"), None),
        r#"["ce_review", "1.1.0", "not an object"]"#.to_string(),
        harness_row("ce_workflow", 9, Some("1.0.0"), Some(&not_hex)),
        harness_row("ce_workflow", 10, Some("1.1.0"), Some(b)),
        harness_row("ce_review", 11, Some("1.0.1"), Some(a)),
    ];
    // Cut inside the digest's string, as a writer killed mid-line leaves it.
    let full = harness_row("ce_review", 12, Some("1.0.0"), Some(a));
    let key = "\"ce_plugin_manifest_digest\":\"";
    let cut = full.find(key).expect("digest key") + key.len() + 10;
    format!("{}\n{}", lines.join("\n"), &full[..cut])
}

/// `audit ARGS --store STORE`: the exit code and stdout.
fn audit(env: &TestEnv, args: &[&OsStr]) -> (i32, String) {
    let mut all = vec![OsStr::new("audit")];
    all.extend_from_slice(args);
    let out = env.run(&all);
    let code = out.status.code().expect("exit code");
    assert!(
        code == 0 || code == 1,
        "audit exited {code}\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (code, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The cells of a table line: runs of two or more spaces separate them.
fn cells_of(line: &str) -> Vec<String> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// The digests' lines in digest order, each with its expected cells.
fn expected_table(r: &Results) -> Vec<(String, Vec<String>)> {
    let mut rows = vec![
        (
            r.a.clone(),
            vec![
                r.a.clone(),
                "version-mismatch".into(),
                "1.0.0".into(),
                "1.0.0 (1), 1.0.1 (2)".into(),
                "4".into(),
                "ce_workflow (1), ce_review (2), baseline (1)".into(),
                "1-11".into(),
                "-".into(),
            ],
        ),
        (
            r.b.clone(),
            vec![
                r.b.clone(),
                "ok".into(),
                "1.1.0".into(),
                "1.1.0 (2)".into(),
                "2".into(),
                "ce_review (1), ce_workflow (1)".into(),
                "2-10".into(),
                "-".into(),
            ],
        ),
        (
            r.c.clone(),
            vec![
                r.c.clone(),
                "unknown".into(),
                "-".into(),
                "2.0.0 (1)".into(),
                "1".into(),
                "ce_workflow_direct (1)".into(),
                "4-4".into(),
                "-".into(),
            ],
        ),
    ];
    rows.sort();
    rows
}

const ROW_PROBLEMS_HUMAN: [&str; 5] = [
    "line 6: arm-mismatch: the non-CE arm \"baseline\" must carry neither ce_plugin_manifest_digest nor ce_plugin_version; it has ce_plugin_manifest_digest",
    "line 7: arm-mismatch: the ce_* arm \"ce_review\" must carry ce_plugin_manifest_digest and ce_plugin_version; it has no ce_plugin_manifest_digest",
    "line 8: malformed-line: a JSON array, not an object",
    "line 9: malformed-digest: ce_plugin_manifest_digest \"ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ\" is not 64 lowercase hex characters",
    "line 12: malformed-line: not JSON: Unterminated string starting at: line 1 column",
];

const VERDICT: &str = "FAIL: 3 digests (1 ok, 1 unknown, 1 version-mismatch), 3 row problems, 2 malformed lines in 10 rows; 2 lines could not be read, so any digest in them was not audited";

#[test]
fn audit_names_every_digest_status_and_row_problem() {
    let r = three_releases();
    let file = r.env.path("results.jsonl");
    write(&file, results_text(&r));

    // People: one line per digest, its notes, the problems, the verdict.
    let (code, human) = audit(&r.env, &[file.as_os_str()]);
    assert_eq!(code, 1, "{human}");
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(
        cells_of(lines[0]),
        [
            "digest",
            "status",
            "store version",
            "claimed versions (rows)",
            "rows",
            "arms (rows)",
            "lines",
            "source"
        ],
        "{human}"
    );
    let mut at = 1;
    for (digest, cells) in expected_table(&r) {
        assert_eq!(cells_of(lines[at]), cells, "{human}");
        at += 1;
        if digest == r.a {
            assert_eq!(
                lines[at], "  claims version 1.0.1 in 2 rows from line 5",
                "{human}"
            );
            at += 1;
        }
    }
    for (i, want) in ROW_PROBLEMS_HUMAN.iter().enumerate() {
        assert!(lines[at + i].starts_with(want), "line {}: {human}", at + i);
    }
    assert_eq!(lines[at + 5], VERDICT, "{human}");
    assert_eq!(lines.len(), at + 6, "{human}");

    // JSON: one object with every figure.
    let out = r
        .env
        .run([OsStr::new("audit"), file.as_os_str(), OsStr::new("--json")]);
    assert_exit(&out, 1);
    let v = parse_json(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["passed"], false);
    assert_eq!(v["verdict"], VERDICT);
    assert_eq!(v["rows"], 10);
    assert_eq!(v["verified"], false);
    assert_eq!(v["registry"], Value::Null);
    let name = s(&file);
    let at_line = |line: u64| json!({"file": name, "line": line});
    assert_eq!(
        v["inputs"],
        json!([{
            "file": name, "format": "plain",
            "bytes": fs::metadata(&file).unwrap().len(),
            "lines": 12, "rows": 10, "malformed_count": 2,
            "malformed": [
                {"line": 8, "reason": "a JSON array, not an object"},
                {"line": 12, "reason": v["inputs"][0]["malformed"][1]["reason"]},
            ],
        }])
    );
    assert!(v["inputs"][0]["malformed"][1]["reason"]
        .as_str()
        .unwrap()
        .starts_with("not JSON: Unterminated string starting at: line 1 column"));
    let claim = |value: &str, rows: u64, line: u64| json!({"value": value, "rows": rows, "first": at_line(line)});
    let mut want = vec![
        json!({
            "manifest_digest": r.a, "status": "version-mismatch", "version": "1.0.0",
            "claimed_versions": [claim("1.0.0", 1, 1), claim("1.0.1", 2, 5)],
            "claimed_versions_unlisted": 0, "rows": 4,
            "arms": [claim("ce_workflow", 1, 1), claim("ce_review", 2, 5), claim("baseline", 1, 6)],
            "arms_unlisted": 0, "first": at_line(1), "last": at_line(11),
            "damaged": [], "pulled": false, "pull_error": null,
            "source": null, "source_check": null, "signature": null,
        }),
        json!({
            "manifest_digest": r.b, "status": "ok", "version": "1.1.0",
            "claimed_versions": [claim("1.1.0", 2, 2)],
            "claimed_versions_unlisted": 0, "rows": 2,
            "arms": [claim("ce_review", 1, 2), claim("ce_workflow", 1, 10)],
            "arms_unlisted": 0, "first": at_line(2), "last": at_line(10),
            "damaged": [], "pulled": false, "pull_error": null,
            "source": null, "source_check": null, "signature": null,
        }),
        json!({
            "manifest_digest": r.c, "status": "unknown", "version": null,
            "claimed_versions": [claim("2.0.0", 1, 4)],
            "claimed_versions_unlisted": 0, "rows": 1,
            "arms": [claim("ce_workflow_direct", 1, 4)],
            "arms_unlisted": 0, "first": at_line(4), "last": at_line(4),
            "damaged": [], "pulled": false, "pull_error": null,
            "source": null, "source_check": null, "signature": null,
        }),
    ];
    want.sort_by_key(|d| d["manifest_digest"].as_str().unwrap().to_string());
    assert_eq!(v["digests"], Value::Array(want));
    assert_eq!(v["row_problem_count"], 3);
    let problems: Vec<(u64, &str, &str)> = crate::util::array(&v["row_problems"])
        .iter()
        .map(|p| {
            assert_eq!(p["file"], name.as_str());
            (
                p["line"].as_u64().unwrap(),
                p["kind"].as_str().unwrap(),
                p["arm"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            (6, "arm-mismatch", "baseline"),
            (7, "arm-mismatch", "ce_review"),
            (9, "malformed-digest", "ce_workflow")
        ]
    );
    assert_eq!(v["malformed_count"], 2);
    assert_eq!(v["listed_at_most"], 1000);

    // Markdown: a table to paste, then the problems, then the verdict.
    let (code, md) = audit(&r.env, &[file.as_os_str(), OsStr::new("--markdown")]);
    assert_eq!(code, 1);
    let md_lines: Vec<&str> = md.lines().collect();
    assert_eq!(
        md_lines[0],
        "| digest | status | store version | claimed versions (rows) | rows | arms (rows) | lines | source |"
    );
    assert_eq!(md_lines[1], "|---|---|---|---|---|---|---|---|");
    for (i, (digest, mut cells)) in expected_table(&r).into_iter().enumerate() {
        cells[0] = format!("`{}`", cells[0]);
        if digest == r.a {
            cells[1] = "version-mismatch: claims version 1.0.1 in 2 rows from line 5".into();
        }
        assert_eq!(
            md_lines[2 + i],
            format!("| {} |", cells.join(" | ")),
            "{md}"
        );
    }
    assert_eq!(md_lines[5], "");
    assert_eq!(md_lines[6], "| where | problem | detail |");
    let md_problems: Vec<Vec<&str>> = md_lines[8..13]
        .iter()
        .map(|l| l.split(" | ").take(2).collect())
        .collect();
    assert_eq!(
        md_problems,
        [
            ["| line 6", "arm-mismatch"],
            ["| line 7", "arm-mismatch"],
            ["| line 8", "malformed-line"],
            ["| line 9", "malformed-digest"],
            ["| line 12", "malformed-line"],
        ]
    );
    assert_eq!(md_lines[13], "");
    assert_eq!(md_lines[14], format!("**{VERDICT}**"));
    assert_eq!(md_lines.len(), 15, "{md}");

    // A clean file passes with exit 0, and the store was only read.
    let clean = r.env.path("clean.jsonl");
    crate::util::write_lines(
        &clean,
        &[
            harness_row("ce_review", 1, Some("1.1.0"), Some(&r.b)),
            harness_row("baseline", 2, None, None),
            harness_row("ce_workflow", 3, Some("1.0.0"), Some(&r.a)),
        ],
    );
    let (code, human) = audit(&r.env, &[clean.as_os_str()]);
    assert_eq!(code, 0, "{human}");
    assert_eq!(
        human.lines().last(),
        Some("PASS: 2 digests (2 ok), 0 row problems, 0 malformed lines in 3 rows")
    );
    assert_eq!(r.env.listed().len(), 2);
}

/// The report with the inputs' names and formats left out, to compare
/// readings of the same rows.
fn without_inputs(mut v: Value) -> Value {
    let text = v.to_string();
    for i in v["inputs"].as_array().unwrap().clone() {
        let name = i["file"].as_str().unwrap().to_string();
        let text_now = text.replace(&name, "FILE");
        v = serde_json::from_str(&text_now).unwrap();
    }
    for i in v["inputs"].as_array_mut().unwrap() {
        i["format"] = Value::Null;
    }
    v
}

#[test]
fn audit_reads_gzip_zstd_and_standard_input_alike() {
    let r = three_releases();
    let text = results_text(&r);
    let plain = r.env.path("results.jsonl");
    write(&plain, &text);
    let gz = r.env.path("results.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    write(&gz, enc.finish().unwrap());
    let zst = r.env.path("results.jsonl.zst");
    write(&zst, zstd::encode_all(text.as_bytes(), 3).unwrap());

    let report = |file: &Path| {
        let out = r
            .env
            .run([OsStr::new("audit"), file.as_os_str(), OsStr::new("--json")]);
        assert_exit(&out, 1);
        parse_json(&out)
    };
    let want = report(&plain);
    assert_eq!(want["verdict"], VERDICT);
    for (file, format) in [(&gz, "gzip"), (&zst, "zstd")] {
        let v = report(file);
        assert_eq!(v["inputs"][0]["format"], format);
        assert_eq!(v["inputs"][0]["bytes"], text.len() as u64);
        assert_eq!(without_inputs(v), without_inputs(want.clone()), "{format}");
    }

    // Standard input, as `-`.
    let mut child = r
        .env
        .cmd(["audit", "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 1);
    let v = parse_json(&out);
    assert_eq!(v["inputs"][0]["file"], "<stdin>");
    assert_eq!(without_inputs(v), without_inputs(want.clone()));

    // Two inputs: the rows add up, and every place names its file.
    let (code, human) = audit(&r.env, &[plain.as_os_str(), gz.as_os_str()]);
    assert_eq!(code, 1);
    assert!(
        human.contains(&format!("{}:6: arm-mismatch", s(&gz))),
        "{human}"
    );
    assert!(human.ends_with(
        "FAIL: 3 digests (1 ok, 1 unknown, 1 version-mismatch), 6 row problems, 4 malformed lines in 20 rows; 4 lines could not be read, so any digest in them was not audited\n"
    ), "{human}");

    // A damaged compressed file is an error that names it.
    let bad = r.env.path("bad.jsonl.zst");
    write(&bad, b"not zstd at all");
    let out = r
        .env
        .run([OsStr::new("audit"), bad.as_os_str(), OsStr::new("--json")]);
    let stderr = assert_exit(&out, 7);
    assert!(stderr.contains(&s(&bad)), "{stderr}");
    assert_eq!(parse_json(&out)["error"]["path"], s(&bad));
}

#[test]
fn audit_reads_dotted_fields_of_nested_provenance() {
    let r = three_releases();
    let row =
        |arm: &str, prov: Value| json!({"arm": arm, "task_id": "t", "ce_plugin": prov}).to_string();
    let prov = |version: &str, digest: &str| {
        json!({"name": "compound-engineering", "version": version,
               "manifest_schema_version": 1, "manifest_digest": digest,
               "file_count": 404, "total_bytes": 1})
    };
    let file = r.env.path("nested.jsonl");
    write(
        &file,
        [
            row("ce_review", prov("1.0.0", &r.a)),
            row("baseline", Value::Null),
            row("ce_workflow", prov("1.1.0", &r.b)),
            row("ce_workflow", json!("not an object")),
        ]
        .join("\n"),
    );
    let out = r.env.run([
        "audit",
        file.to_str().unwrap(),
        "--digest-field",
        "ce_plugin.manifest_digest",
        "--version-field",
        "ce_plugin.version",
        "--json",
    ]);
    assert_exit(&out, 1);
    let v = parse_json(&out);
    assert_eq!(
        v["fields"],
        json!({"digest": "ce_plugin.manifest_digest", "version": "ce_plugin.version", "arm": "arm"})
    );
    let statuses = statuses(&v);
    assert_eq!(
        statuses,
        BTreeMap::from([
            (r.a.clone(), "ok".to_string()),
            (r.b.clone(), "ok".to_string())
        ])
    );
    // The ce_workflow row whose ce_plugin is a string carries neither field.
    assert_eq!(v["row_problem_count"], 1);
    assert_eq!(v["row_problems"][0]["line"], 4);
    assert_eq!(v["row_problems"][0]["kind"], "arm-mismatch");

    // Fields that overlap are refused before anything is read.
    let out = r.env.run([
        "audit",
        file.to_str().unwrap(),
        "--digest-field",
        "ce_plugin",
        "--version-field",
        "ce_plugin.version",
        "--json",
    ]);
    assert_exit(&out, 2);
    assert_eq!(parse_json(&out)["error"]["kind"], "usage");
}

#[test]
fn audit_verify_names_a_flipped_object_and_its_digest() {
    let r = three_releases();
    let file = r.env.path("results.jsonl");
    crate::util::write_lines(
        &file,
        &[
            harness_row("ce_review", 1, Some("1.0.0"), Some(&r.a)),
            harness_row("ce_review", 2, Some("1.1.0"), Some(&r.b)),
        ],
    );
    let (code, _) = audit(&r.env, &[file.as_os_str(), OsStr::new("--verify")]);
    assert_eq!(code, 0);

    let victim = r.env.file(&r.b, "skills/gen/d03/f0003.md");
    let object = r.env.object(&victim);
    flip_byte(&object);
    let out = r.env.run([
        OsStr::new("audit"),
        file.as_os_str(),
        OsStr::new("--verify"),
        OsStr::new("--json"),
    ]);
    assert_exit(&out, 1);
    let v = parse_json(&out);
    assert_eq!(v["verified"], true);
    let by: BTreeMap<&str, &Value> = crate::util::array(&v["digests"])
        .iter()
        .map(|d| (d["manifest_digest"].as_str().unwrap(), d))
        .collect();
    assert_eq!(by[r.a.as_str()]["status"], "ok");
    assert_eq!(by[r.a.as_str()]["damaged"], json!([]));
    let b = by[r.b.as_str()];
    assert_eq!(b["status"], "damaged");
    let damaged = b["damaged"].as_array().unwrap();
    assert_eq!(damaged.len(), 1, "{b}");
    assert_eq!(damaged[0]["kind"], "object-content");
    assert_eq!(damaged[0]["path"], s(&object));

    // People see the object and the digest it belongs to.
    let (code, human) = audit(&r.env, &[file.as_os_str(), OsStr::new("--verify")]);
    assert_eq!(code, 1);
    let b_line = human
        .lines()
        .position(|l| l.starts_with(&r.b))
        .expect("B's line");
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(cells_of(lines[b_line])[1], "damaged");
    assert!(
        lines[b_line + 1].starts_with(&format!("  damaged: object-content {}: ", s(&object))),
        "{human}"
    );
    // Without --verify nothing is re-hashed: B is ok by its catalogue.
    let (code, _) = audit(&r.env, &[file.as_os_str()]);
    assert_eq!(code, 0);
}

#[test]
fn audit_pulls_an_unknown_digest_from_the_registry() {
    let Some(registry) = crate::remote::registry("audit_pulls_an_unknown_digest_from_the_registry")
    else {
        return;
    };
    let r = three_releases();
    let repo = crate::remote::repo(&registry, "audit-pull");
    // C is published from another store.
    let other = TestEnv::new();
    let c = other.ingest_digest(&r.src_c, "2.0.0");
    assert_eq!(c, r.c);
    other.json(["push", &c, &repo, "--plain-http", "--json"]);

    let file = r.env.path("results.jsonl");
    write(&file, results_text(&r));
    let out = r.env.run([
        OsStr::new("audit"),
        file.as_os_str(),
        OsStr::new("--registry"),
        OsStr::new(&repo),
        OsStr::new("--plain-http"),
        OsStr::new("--json"),
    ]);
    assert_exit(&out, 1); // the row problems remain
    let v = parse_json(&out);
    assert_eq!(v["registry"], repo.as_str());
    let cd = crate::util::array(&v["digests"])
        .iter()
        .find(|d| d["manifest_digest"] == r.c.as_str())
        .expect("C")
        .clone();
    assert_eq!(cd["status"], "pulled", "{cd}");
    assert_eq!(cd["pulled"], true);
    assert_eq!(cd["version"], "2.0.0");
    assert_eq!(cd["pull_error"], Value::Null);
    assert_eq!(r.env.listed().len(), 3);
    r.env.verify_clean(&[&r.c]);
    let log = r.env.json(["log", &r.c, "--json"]);
    let events = crate::util::field_strs(&log["ingests"], "event");
    assert_eq!(events, ["origin", "pull"], "{log}");

    // Now stored, C is ok; a digest the registry lacks stays unknown, with why.
    let missing = "0".repeat(64);
    let extra = r.env.path("missing.jsonl");
    crate::util::write_lines(
        &extra,
        &[
            harness_row("ce_review", 1, Some("2.0.0"), Some(&r.c)),
            harness_row("ce_review", 2, Some("9.9.9"), Some(&missing)),
        ],
    );
    let out = r.env.run([
        OsStr::new("audit"),
        extra.as_os_str(),
        OsStr::new("--registry"),
        OsStr::new(&repo),
        OsStr::new("--plain-http"),
        OsStr::new("--json"),
    ]);
    assert_exit(&out, 1);
    let v = parse_json(&out);
    let status: BTreeMap<&str, (&str, bool)> = crate::util::array(&v["digests"])
        .iter()
        .map(|d| {
            (
                d["manifest_digest"].as_str().unwrap(),
                (d["status"].as_str().unwrap(), d["pull_error"].is_string()),
            )
        })
        .collect();
    assert_eq!(status[r.c.as_str()], ("ok", false));
    assert_eq!(status[missing.as_str()], ("unknown", true));
}

#[test]
fn audit_bounds_what_it_lists_and_holds() {
    let env = TestEnv::new();
    let file = env.path("noisy.jsonl");
    let mut text = String::new();
    // One line of 2 MiB, 1,500 malformed lines, then a row.
    text.push_str(&format!("{{\"arm\": \"{}\"}}\n", "x".repeat(2 << 20)));
    for i in 0..1500 {
        text.push_str(&format!("not json {i}\n"));
    }
    text.push_str(&harness_row("baseline", 1, None, None));
    text.push('\n');
    write(&file, &text);
    fs::create_dir_all(&env.store).unwrap();
    let minimal = env.plugin("min", "1.0.0");
    env.ingest_digest(&minimal, "1.0.0");
    let out = env.run([OsStr::new("audit"), file.as_os_str(), OsStr::new("--json")]);
    // Malformed lines are listed, and fail the audit; allowed, the one row
    // passes.
    assert_exit(&out, 1);
    let allowed = env.run([
        OsStr::new("audit"),
        file.as_os_str(),
        OsStr::new("--json"),
        OsStr::new("--allow-malformed"),
    ]);
    assert_exit(&allowed, 0);
    assert_eq!(parse_json(&allowed)["allow_malformed"], true);
    let v = parse_json(&out);
    assert_eq!(v["allow_malformed"], false);
    let input = &v["inputs"][0];
    assert_eq!(input["lines"], 1502);
    assert_eq!(input["rows"], 1);
    assert_eq!(input["malformed_count"], 1501);
    let listed = input["malformed"].as_array().unwrap();
    assert_eq!(listed.len(), 1000);
    assert_eq!(
        listed[0],
        json!({"line": 1, "reason": "longer than 1048576 bytes; skipped unread"})
    );
    assert_eq!(listed[1]["line"], 2);
    assert_eq!(listed[999]["line"], 1000);
    let (code, human) = audit(&env, &[file.as_os_str()]);
    assert_eq!(code, 1);
    assert!(
        human.contains(&format!(
            "… and 501 more malformed lines in {} (the first 1000 are listed)",
            s(&file)
        )),
        "{}",
        &human[human.len().saturating_sub(400)..]
    );
    assert!(
        human.ends_with("FAIL: 0 digests (none), 0 row problems, 1501 malformed lines in 1 row; 1501 lines could not be read, so any digest in them was not audited\n")
    );
    let (code, human) = audit(&env, &[file.as_os_str(), OsStr::new("--allow-malformed")]);
    assert_eq!(code, 0);
    assert!(
        human.ends_with("PASS: 0 digests (none), 0 row problems, 1501 malformed lines in 1 row; 1501 lines could not be read, so any digest in them was not audited (allowed: --allow-malformed)\n")
    );

    // Nothing but malformed lines is no results file: it fails.
    let garbage = env.path("garbage.jsonl");
    write(&garbage, "a,b,c\n1,2,3\n");
    let (code, human) = audit(&env, &[garbage.as_os_str()]);
    assert_eq!(code, 1, "{human}");
    assert!(
        human.ends_with("FAIL: no line is a row (a JSON object): 0 digests (none), 0 row problems, 2 malformed lines in 0 rows; 2 lines could not be read, so any digest in them was not audited\n"),
        "{human}"
    );
}

/// `cestore audit ARGS --store STORE` under `ulimit -v KIB` (address space,
/// so that an allocation past it fails the run), stdout to `out`; the exit
/// code.
fn audit_within(env: &TestEnv, kib: u64, args: &[&OsStr], out: &Path) -> i32 {
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(util::bin())
        .arg("audit")
        .args(args)
        .arg("--store")
        .arg(&env.store)
        .env_remove("CESTORE_DIR")
        .stdout(fs::File::create(out).unwrap())
        .status()
        .expect("run cestore under ulimit");
    status.code().expect("exit code")
}

#[test]
fn audit_cuts_every_value_it_takes_from_a_row() {
    let (env, _, stored) = util::plugin_store("min", "1.0.0");
    // 1,000 rows of a 1,000,000-character arm (a ~1 MB .gz): each row is an
    // arm-mismatch (a non-CE arm with a digest) quoting its arm.
    let arm = "x".repeat(1_000_000);
    let file = env.path("long.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for run in 0..1000 {
        let version = format!("1.0.0-{}", "v".repeat(200));
        let row = harness_row(&arm, run, Some(&version), Some(&stored));
        writeln!(enc, "{row}").unwrap();
    }
    write(&file, enc.finish().unwrap());
    assert!(fs::metadata(&file).unwrap().len() < 2 << 20);

    // Held and written bounded: under 64 MiB of address space, and a report
    // of well under 1 MB (before, 990 MB of memory and 1 GB of JSON).
    let report = env.path("long.json");
    let code = audit_within(
        &env,
        64 << 10,
        &[file.as_os_str(), OsStr::new("--json")],
        &report,
    );
    let size = fs::metadata(&report).unwrap().len();
    assert_eq!(code, 1, "{}", fs::read_to_string(&report).unwrap());
    assert!(size < 1 << 20, "a report of {size} bytes");
    let v: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    let cut_arm = format!("{}…", "x".repeat(80));
    assert_eq!(v["row_problem_count"], 1000);
    let problems = v["row_problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1000);
    for p in problems {
        assert_eq!(p["kind"], "arm-mismatch");
        assert_eq!(p["arm"], cut_arm.as_str());
        assert_eq!(
            p["detail"],
            format!(
                "the non-CE arm \"{cut_arm}\" must carry neither ce_plugin_manifest_digest nor ce_plugin_version; it has ce_plugin_manifest_digest and ce_plugin_version"
            )
        );
    }
    let digests = v["digests"].as_array().unwrap();
    assert_eq!(digests.len(), 1);
    let d = &digests[0];
    assert_eq!(d["manifest_digest"], stored.as_str());
    assert_eq!(d["rows"], 1000);
    assert_eq!(
        d["arms"],
        json!([{"value": cut_arm, "rows": 1000, "first": {"file": s(&file), "line": 1}}])
    );
    // A version cut is never the snapshot's: the digest is version-mismatch.
    let cut_version = format!("1.0.0-{}…", "v".repeat(74));
    assert_eq!(d["claimed_versions"][0]["value"], cut_version.as_str());
    assert_eq!(d["claimed_versions"][0]["rows"], 1000);
    assert_eq!(d["status"], "version-mismatch");

    // The text form cuts by the same bound.
    let (code, human) = audit(&env, &[file.as_os_str()]);
    assert_eq!(code, 1);
    assert!(human.len() < 1 << 20, "{} bytes of text", human.len());
    assert!(
        human.contains(&format!("{cut_version} (1000)")),
        "{human:.2000}"
    );
    assert!(human.contains(&format!(
        "line 1: arm-mismatch: the non-CE arm \"{cut_arm}\""
    )));
    assert!(!human.contains(&"x".repeat(81)));

    // A malformed digest is quoted cut too.
    let bad = env.path("bad-digest.jsonl");
    let long_digest = "Z".repeat(5000);
    crate::util::write_lines(
        &bad,
        &[harness_row(
            "ce_review",
            1,
            Some("1.0.0"),
            Some(&long_digest),
        )],
    );
    let out = env.run([OsStr::new("audit"), bad.as_os_str(), OsStr::new("--json")]);
    assert_exit(&out, 1);
    let v = parse_json(&out);
    assert_eq!(
        v["row_problems"][0]["detail"],
        format!(
            "ce_plugin_manifest_digest \"{}…\" is not 64 lowercase hex characters",
            "Z".repeat(80)
        )
    );
}

#[test]
fn audit_holds_a_few_dozen_bytes_per_digest() {
    let (env, _, stored) = util::plugin_store("min", "1.0.0");
    // 100,000 distinct digests, one row each; then the first again twice,
    // claiming another version from another arm, and the stored one.
    const N: u64 = 100_000;
    let digest = |i: u64| {
        ManifestDigest::from_bytes(Sha256::digest(i.to_string().as_bytes()).into()).to_hex()
    };
    let file = env.path("many.jsonl");
    let mut text = String::with_capacity(300 * N as usize);
    for run in 0..N {
        // harness_row's fields, written directly: json! is slow here.
        text.push_str(&format!(
            "{{\"task_id\":\"task-{:03}\",\"arm\":\"ce_workflow\",\"run\":{run},\"score\":0.5,\"ce_plugin_version\":\"1.0.0\",\"ce_plugin_manifest_digest\":\"{}\",\"error\":null}}\n",
            run % 7,
            digest(run)
        ));
    }
    for run in [N, N + 1] {
        text.push_str(&harness_row(
            "ce_review",
            run,
            Some("1.0.1"),
            Some(&digest(0)),
        ));
        text.push('\n');
    }
    text.push_str(&harness_row(
        "ce_review",
        N + 2,
        Some("1.0.0"),
        Some(&stored),
    ));
    text.push('\n');
    write(&file, &text);
    drop(text);

    // 100,000 digests under 64 MiB of address space, the program and its
    // 4 MiB read buffer included: before, each digest cost about 1.4 KB
    // (140 MB here).
    let out = env.path("many.txt");
    let code = audit_within(&env, 64 << 10, &[file.as_os_str()], &out);
    let human = fs::read_to_string(&out).unwrap();
    assert_eq!(
        code,
        1,
        "{:.2000}",
        &human[human.len().saturating_sub(2000)..]
    );
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(
        lines.last().copied(),
        Some(
            format!(
                "FAIL: {} digests (1 ok, {N} unknown), 0 row problems, 0 malformed lines in {} rows",
                N + 1,
                N + 3
            )
            .as_str()
        )
    );
    // The header, one line per digest, the verdict.
    assert_eq!(lines.len() as u64, 1 + (N + 1) + 1);
    let line_of = |d: &str| {
        let l = lines
            .iter()
            .find(|l| l.starts_with(d))
            .unwrap_or_else(|| panic!("no line for {d}"));
        cells_of(l)
    };
    assert_eq!(
        line_of(&digest(0)),
        [
            digest(0).as_str(),
            "unknown",
            "-",
            "1.0.0 (1), 1.0.1 (2)",
            "3",
            "ce_workflow (1), ce_review (2)",
            &format!("1-{}", N + 2),
            "-"
        ]
    );
    let last = N - 1;
    assert_eq!(
        line_of(&digest(last)),
        [
            digest(last).as_str(),
            "unknown",
            "-",
            "1.0.0 (1)",
            "1",
            "ce_workflow (1)",
            &format!("{N}-{N}"),
            "-"
        ]
    );
    assert_eq!(
        line_of(&stored),
        [
            stored.as_str(),
            "ok",
            "1.0.0",
            "1.0.0 (1)",
            "1",
            "ce_review (1)",
            &format!("{}-{}", N + 3, N + 3),
            "-"
        ]
    );
    // In digest order.
    let listed: Vec<&str> = lines[1..lines.len() - 1].iter().map(|l| &l[..64]).collect();
    assert!(listed.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn audit_names_a_line_that_is_not_utf8() {
    let (env, _, stored) = util::plugin_store("min", "1.0.0");
    // A ce_* row whose digest holds one 0xff byte, after a good row.
    let good = harness_row("ce_review", 1, Some("1.0.0"), Some(&stored));
    let mut bad = harness_row("ce_review", 2, Some("1.0.0"), Some(&"a".repeat(64))).into_bytes();
    let at = bad
        .windows(64)
        .position(|w| w == "a".repeat(64).as_bytes())
        .unwrap()
        + 10;
    bad[at] = 0xff;
    let file = env.path("ff.jsonl");
    let mut data = format!("{good}\n").into_bytes();
    data.extend_from_slice(&bad);
    data.push(b'\n');
    write(&file, &data);
    let out = env.run([OsStr::new("audit"), file.as_os_str(), OsStr::new("--json")]);
    // The line is not a row: it fails the audit, as any malformed line
    // does; allowed, the good row passes.
    assert_exit(&out, 1);
    let v = parse_json(&out);
    let reason = format!("invalid UTF-8 at byte {}", at + 1);
    assert_eq!(
        v["inputs"][0]["malformed"],
        json!([{"line": 2, "reason": reason}])
    );
    let (code, human) = audit(&env, &[file.as_os_str()]);
    assert_eq!(code, 1);
    let (code, _) = audit(&env, &[file.as_os_str(), OsStr::new("--allow-malformed")]);
    assert_eq!(code, 0);
    assert!(
        human.contains(&format!("line 2: malformed-line: {reason}\n")),
        "{human}"
    );
    assert!(!human.contains("JSON number"), "{human}");
}

/// Writes results rows with Python's `json.dumps`, as the harness does, to
/// `out`: first a row of the stored digest `stored`, then one row per
/// digest of `digests` (5 of them), each with a value only Python's JSON
/// has: `NaN`, `Infinity`, `-Infinity`, `1e400`, and lone surrogates (in a
/// value and in a key). The script checks that `json.loads` reads every
/// line back as a row, as the harness does.
fn python_rows(out: &Path, stored: &str, digests: &[&str; 5]) {
    let script = r#"
import json, sys
out, stored, *digests = sys.argv[1:]
def row(run, arm, digest, **extra):
    r = {"task_id": "task-%03d" % run, "arm": arm, "run": run}
    r.update(extra)
    r.update({"ce_plugin_version": "1.0.0", "ce_plugin_manifest_digest": digest})
    return r
rows = [
    row(0, "ce_review", stored, score=0.5),
    row(1, "ce_review", digests[0], score=float("nan")),
    row(2, "ce_workflow", digests[1], tokens={"input": float("inf")}),
    row(3, "ce_workflow_direct", digests[2], latency=[1.0, float("-inf")]),
    row(4, "ce_review", digests[3], big="__1e400__"),
    {"\udc00": [1], **row(5, "ce_workflow", digests[4], note="cut \ud800 here")},
]
# 1e400 as a harness writing its own float text leaves it.
lines = [json.dumps(r).replace('"__1e400__"', "1e400") for r in rows]
for line in lines:
    assert isinstance(json.loads(line), dict), line
with open(out, "w") as f:
    f.write("".join(line + "\n" for line in lines))
"#;
    let status = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(out)
        .arg(stored)
        .args(digests)
        .status()
        .expect("run python3");
    assert!(status.success(), "python3 could not write the rows");
}

/// `cestore audit - ARGS` with `data` on standard input.
fn audit_stdin(env: &TestEnv, data: &[u8], args: &[&str]) -> std::process::Output {
    let mut all = vec!["audit", "-"];
    all.extend_from_slice(args);
    let mut child = env
        .cmd(all)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    child.wait_with_output().unwrap()
}

/// `data` gzipped.
fn gzipped(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

#[test]
fn audit_reads_the_rows_python_writes_with_nan_infinity_and_lone_surrogates() {
    let (env, _, stored) = util::plugin_store("min", "1.0.0");
    let unknown: Vec<String> = (1..=5)
        .map(|i| sha_hex(format!("not stored {i}").as_bytes()))
        .collect();
    let unknown_refs: [&str; 5] = std::array::from_fn(|i| unknown[i].as_str());
    let file = env.path("results.jsonl");
    python_rows(&file, &stored, &unknown_refs);
    let data = fs::read(&file).unwrap();
    let gz = env.path("results.jsonl.gz");
    write(&gz, gzipped(&data));

    // Each row is read and its digest audited: five not in the store.
    let verdict = "FAIL: 6 digests (1 ok, 5 unknown), 0 row problems, 0 malformed lines in 6 rows";
    let (code, human) = audit(&env, &[file.as_os_str()]);
    assert_eq!(code, 1, "{human}");
    for d in &unknown {
        let line = human
            .lines()
            .find(|l| l.starts_with(d.as_str()))
            .unwrap_or_else(|| panic!("{d} is not listed:\n{human}"));
        assert_eq!(cells_of(line)[1], "unknown", "{human}");
    }
    assert_eq!(human.lines().last(), Some(verdict), "{human}");
    let report = |out: &std::process::Output| {
        assert_exit(out, 1);
        let v = parse_json(out);
        assert_eq!(v["verdict"], verdict);
        assert_eq!(v["rows"], 6);
        assert_eq!(v["malformed_count"], 0);
        let statuses = statuses(&v);
        let mut want: BTreeMap<String, String> = unknown
            .iter()
            .map(|d| (d.clone(), "unknown".to_string()))
            .collect();
        want.insert(stored.clone(), "ok".into());
        assert_eq!(statuses, want);
        without_inputs(v)
    };
    let plain = report(&env.run([OsStr::new("audit"), file.as_os_str(), OsStr::new("--json")]));
    // gzip and standard input alike.
    let from_gz = report(&env.run([OsStr::new("audit"), gz.as_os_str(), OsStr::new("--json")]));
    assert_eq!(from_gz, plain);
    let from_stdin = report(&audit_stdin(&env, &data, &["--json"]));
    assert_eq!(from_stdin, plain);
    let md = String::from_utf8(audit_stdin(&env, &data, &["--markdown"]).stdout).unwrap();
    assert!(md.ends_with(&format!("**{verdict}**\n")), "{md}");

    // The same rows naming the stored digest pass.
    let same = env.path("stored.jsonl");
    python_rows(&same, &stored, &[stored.as_str(); 5]);
    let pass = "PASS: 1 digest (1 ok), 0 row problems, 0 malformed lines in 6 rows";
    let (code, human) = audit(&env, &[same.as_os_str()]);
    assert_eq!(code, 0, "{human}");
    assert_eq!(human.lines().last(), Some(pass), "{human}");
    let same_gz = env.path("stored.jsonl.gz");
    write(&same_gz, gzipped(&fs::read(&same).unwrap()));
    let out = env.run([
        OsStr::new("audit"),
        same_gz.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_exit(&out, 0);
    assert_eq!(parse_json(&out)["digests"][0]["rows"], 6);
    let out = audit_stdin(&env, &fs::read(&same).unwrap(), &["--json"]);
    assert_exit(&out, 0);
    assert_eq!(parse_json(&out)["verdict"], pass);
}

#[test]
fn audit_names_a_lone_surrogate_in_the_digest_version_or_arm() {
    let (env, _, stored) = util::plugin_store("min", "1.0.0");
    let file = env.path("lone.jsonl");
    let script = r#"
import json, sys
out, d = sys.argv[1:]
rows = [
    {"arm": "ce_review", "ce_plugin_version": "1.0.0", "ce_plugin_manifest_digest": d[:10] + "\ud800" + d[11:]},
    {"arm": "ce_review", "ce_plugin_version": "1.0.\udfff", "ce_plugin_manifest_digest": d},
    {"arm": "ce_\ud800review", "ce_plugin_version": "1.0.0", "ce_plugin_manifest_digest": d},
]
with open(out, "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in rows))
"#;
    let status = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&file)
        .arg(&stored)
        .status()
        .expect("run python3");
    assert!(status.success());
    let out = env.run([OsStr::new("audit"), file.as_os_str(), OsStr::new("--json")]);
    assert_exit(&out, 1);
    let v = parse_json(&out);
    assert_eq!(v["rows"], 3);
    assert_eq!(v["malformed_count"], 0);
    // A lone surrogate is no digest: a row problem, not a skipped line.
    let lone_digest = format!("{}\\ud800{}", &stored[..10], &stored[11..]);
    assert_eq!(
        v["row_problems"],
        json!([
            {
                "file": s(&file), "line": 1, "kind": "malformed-digest", "arm": "ce_review",
                "detail": format!("ce_plugin_manifest_digest \"{lone_digest}\" holds a lone surrogate, so it is not 64 lowercase hex characters"),
            },
            {
                "file": s(&file), "line": 3, "kind": "arm-mismatch", "arm": "ce_\\ud800review",
                "detail": "the non-CE arm \"ce_\\ud800review\" must carry neither ce_plugin_manifest_digest nor ce_plugin_version; it has ce_plugin_manifest_digest and ce_plugin_version",
            },
        ])
    );
    // A claimed version with one is never the snapshot's.
    let d = &v["digests"][0];
    assert_eq!(d["manifest_digest"], stored.as_str());
    assert_eq!(d["status"], "version-mismatch");
    let claimed: Vec<(&str, u64)> = crate::util::array(&d["claimed_versions"])
        .iter()
        .map(|c| (c["value"].as_str().unwrap(), c["rows"].as_u64().unwrap()))
        .collect();
    assert_eq!(claimed, [("1.0.\\udfff", 1), ("1.0.0", 1)]);
    let (code, human) = audit(&env, &[file.as_os_str()]);
    assert_eq!(code, 1);
    assert!(
        human.contains(&format!(
            "line 1: malformed-digest: ce_plugin_manifest_digest \"{lone_digest}\" holds a lone surrogate"
        )),
        "{human}"
    );
    assert!(
        human.contains("  claims version 1.0.\\udfff in 1 row from line 2"),
        "{human}"
    );
}

#[test]
fn audit_fails_a_malformed_line_unless_allowed() {
    let (env, _, stored) = util::plugin_store("min", "1.0.0");
    // A good row, then one cut short inside a digest not in the store, as
    // a writer killed mid-line leaves it.
    let unknown = sha_hex(b"never stored");
    let full = harness_row("ce_review", 2, Some("1.0.0"), Some(&unknown));
    let key = "\"ce_plugin_manifest_digest\":\"";
    let cut = full.find(key).unwrap() + key.len() + 20;
    let text = format!(
        "{}\n{}\n",
        harness_row("ce_review", 1, Some("1.0.0"), Some(&stored)),
        &full[..cut]
    );
    let reason = format!(
        "not JSON: Unterminated string starting at: line 1 column {} (char {})",
        cut - 20,
        cut - 21
    );
    let counts = "1 digest (1 ok), 0 row problems, 1 malformed line in 1 row; 1 line could not be read, so any digest in it was not audited";
    let fail = format!("FAIL: {counts}");
    let pass = format!("PASS: {counts} (allowed: --allow-malformed)");
    let file = env.path("cut.jsonl");
    write(&file, &text);
    let gz = env.path("cut.jsonl.gz");
    write(&gz, gzipped(text.as_bytes()));

    for input in [file.as_os_str(), gz.as_os_str()] {
        // Text: the line named, and the verdict.
        let (code, human) = audit(&env, &[input]);
        assert_eq!(code, 1, "{human}");
        assert!(
            human.contains(&format!("line 2: malformed-line: {reason}\n")),
            "{human}"
        );
        assert!(human.ends_with(&format!("{fail}\n")), "{human}");
        let (code, human) = audit(&env, &[input, OsStr::new("--allow-malformed")]);
        assert_eq!(code, 0, "{human}");
        assert!(
            human.contains(&format!("line 2: malformed-line: {reason}\n")),
            "{human}"
        );
        assert!(human.ends_with(&format!("{pass}\n")), "{human}");
        // Markdown.
        let (code, md) = audit(&env, &[input, OsStr::new("--markdown")]);
        assert_eq!(code, 1);
        assert!(
            md.contains("| line 2 | malformed-line | not JSON: Unterminated string"),
            "{md}"
        );
        assert!(md.ends_with(&format!("**{fail}**\n")), "{md}");
        let (code, md) = audit(
            &env,
            &[
                input,
                OsStr::new("--markdown"),
                OsStr::new("--allow-malformed"),
            ],
        );
        assert_eq!(code, 0);
        assert!(md.ends_with(&format!("**{pass}**\n")), "{md}");
    }
    // JSON, from a file and from standard input alike.
    let check = |out: &std::process::Output, allowed: bool| {
        assert_exit(out, if allowed { 0 } else { 1 });
        let v = parse_json(out);
        assert_eq!(v["passed"], allowed);
        assert_eq!(v["ok"], allowed);
        assert_eq!(v["allow_malformed"], allowed);
        assert_eq!(v["malformed_count"], 1);
        assert_eq!(
            v["inputs"][0]["malformed"],
            json!([{"line": 2, "reason": reason}])
        );
        assert_eq!(
            v["verdict"],
            if allowed {
                pass.as_str()
            } else {
                fail.as_str()
            }
        );
    };
    check(
        &env.run([OsStr::new("audit"), file.as_os_str(), OsStr::new("--json")]),
        false,
    );
    check(
        &env.run([
            OsStr::new("audit"),
            gz.as_os_str(),
            OsStr::new("--json"),
            OsStr::new("--allow-malformed"),
        ]),
        true,
    );
    check(&audit_stdin(&env, text.as_bytes(), &["--json"]), false);
    check(
        &audit_stdin(&env, text.as_bytes(), &["--json", "--allow-malformed"]),
        true,
    );
    // Allowing malformed lines passes nothing else: a row problem still fails.
    let bad = env.path("bad.jsonl");
    write(
        &bad,
        format!(
            "{}\n{{\"arm\":\n",
            harness_row("baseline", 1, None, Some(&stored))
        ),
    );
    let (code, human) = audit(&env, &[bad.as_os_str(), OsStr::new("--allow-malformed")]);
    assert_eq!(code, 1, "{human}");
    assert!(human.ends_with("FAIL: 1 digest (1 ok), 1 row problem, 1 malformed line in 1 row; 1 line could not be read, so any digest in it was not audited (allowed: --allow-malformed)\n"), "{human}");
}

#[test]
fn audit_fails_an_input_with_no_row_or_none_of_the_fields() {
    let (env, minimal) = util::with_plugin("min", "1.0.0");
    env.ingest_digest(&minimal, "1.0.0");
    let no_row = "FAIL: no line is a row (a JSON object): 0 digests (none), 0 row problems";
    let no_field = "FAIL: no row carries ce_plugin_manifest_digest, ce_plugin_version or arm (see --digest-field, --version-field, --arm-field): 0 digests (none), 0 row problems, 0 malformed lines in";
    for (name, text, verdict) in [
        (
            "empty.jsonl",
            "",
            format!("{no_row}, 0 malformed lines in 0 rows"),
        ),
        (
            "blank.jsonl",
            "\n  \n\t\r\n\n",
            format!("{no_row}, 0 malformed lines in 0 rows"),
        ),
        (
            "garbage.jsonl",
            "a,b\n",
            format!("{no_row}, 1 malformed line in 0 rows; 1 line could not be read, so any digest in it was not audited"),
        ),
        (
            "foo.jsonl",
            "{\"foo\":1}\n{\"foo\":2}\n",
            format!("{no_field} 2 rows"),
        ),
        (
            "nested.jsonl",
            "{\"ce_plugin\": {\"version\": \"1.0.0\"}}\n",
            format!("{no_field} 1 row"),
        ),
    ] {
        let file = env.path(name);
        write(&file, text);
        let out = env.run([OsStr::new("audit"), file.as_os_str(), OsStr::new("--json")]);
        assert_exit(&out, 1);
        let v = parse_json(&out);
        assert_eq!(v["ok"], false, "{name}");
        assert_eq!(v["passed"], false, "{name}");
        assert_eq!(v["verdict"], verdict.as_str(), "{name}");
        let (code, human) = audit(&env, &[file.as_os_str()]);
        assert_eq!(code, 1, "{name}");
        assert!(human.ends_with(&format!("{verdict}\n")), "{name}: {human}");
    }
    // Standard input alike.
    let mut child = env
        .cmd(["audit", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 1);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(no_row));

    // A row with any one of the fields, even null, is audited: a non-CE
    // arm's row passes; so does a file of rows that name the fields nested
    // when told where they are.
    let arm_only = env.path("arm-only.jsonl");
    write(&arm_only, "{\"arm\": \"baseline\"}\n{\"foo\": 1}\n");
    let (code, human) = audit(&env, &[arm_only.as_os_str()]);
    assert_eq!(code, 0, "{human}");
    assert!(
        human.ends_with("PASS: 0 digests (none), 0 row problems, 0 malformed lines in 2 rows\n")
    );
    let nulls = env.path("nulls.jsonl");
    write(&nulls, "{\"ce_plugin_manifest_digest\": null}\n");
    let (code, _) = audit(&env, &[nulls.as_os_str()]);
    assert_eq!(code, 0);
    let nested = env.path("nested.jsonl");
    let (code, human) = audit(
        &env,
        &[
            nested.as_os_str(),
            OsStr::new("--version-field"),
            OsStr::new("ce_plugin.version"),
        ],
    );
    // It carries a version but no arm and no digest: a row without an arm
    // that has a version breaks the arm rule, which is audited, not empty.
    assert_eq!(code, 1);
    assert!(
        human.contains("line 1: arm-mismatch: a row without an arm must carry neither"),
        "{human}"
    );
}

// ---------------------------------------------------------------------------
// Sources: --require-clean-source and --source-repo
// ---------------------------------------------------------------------------

/// A store with a snapshot ingested from git (under `plugins/p` of `repo`,
/// at `commit`) and one ingested from a directory, and a results file that
/// names both.
struct Sourced {
    env: TestEnv,
    repo: PathBuf,
    commit: String,
    from_git: String,
    from_dir: String,
    file: PathBuf,
}

fn sourced() -> Sourced {
    let env = TestEnv::new();
    let (repo, commit) = crate::provenance::subdir_repo(&env, "repo");
    let human = crate::provenance::ingest_git(&env, &repo, "HEAD", &["--subdir", "plugins/p"]);
    let from_git = human.lines().next().unwrap().to_string();
    let dir = env.plugin("dir", "2.0.0");
    let from_dir = env.ingest_digest(&dir, "2.0.0");
    let file = env.path("results.jsonl");
    let row = |d: &str, v: &str| {
        json!({"arm": "ce_workflow", "ce_plugin_version": v, "ce_plugin_manifest_digest": d})
            .to_string()
    };
    write(
        &file,
        format!("{}\n{}\n", row(&from_git, "1.0.0"), row(&from_dir, "2.0.0")),
    );
    Sourced {
        env,
        repo,
        commit,
        from_git,
        from_dir,
        file,
    }
}

/// `audit FILE EXTRA --json`: the exit code and the report.
fn audit_json(env: &TestEnv, file: &Path, extra: &[&OsStr]) -> (i32, Value) {
    let mut all = vec![OsStr::new("audit"), file.as_os_str()];
    all.extend_from_slice(extra);
    all.push(OsStr::new("--json"));
    let out = env.run(&all);
    (out.status.code().expect("exit code"), parse_json(&out))
}

/// The digest entry of `d` in an audit's JSON report.
fn entry<'a>(report: &'a Value, d: &str) -> &'a Value {
    crate::util::array(&report["digests"])
        .iter()
        .find(|e| e["manifest_digest"] == d)
        .unwrap_or_else(|| panic!("{d} not in {report}"))
}

#[test]
fn audit_names_each_digests_source_and_can_require_a_clean_one() {
    let r = sourced();
    let short = &r.commit[..12];

    // Without the flag a digest with no record passes; each carries its
    // newest record in brief.
    let (code, report) = audit_json(&r.env, &r.file, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["require_clean_source"], false);
    assert_eq!(report["source_repo"], Value::Null);
    assert_eq!(
        entry(&report, &r.from_git)["source"],
        json!({"commit": r.commit, "tag": null, "clean": true, "read_from": "git", "via": "ingest"})
    );
    assert_eq!(entry(&report, &r.from_git)["source_check"], Value::Null);
    assert_eq!(entry(&report, &r.from_dir)["source"], Value::Null);
    let (code, human) = audit(&r.env, &[r.file.as_os_str()]);
    assert_eq!(code, 0, "{human}");
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(cells_of(lines[0]).last().unwrap(), "source", "{human}");
    let cells = |d: &str| {
        cells_of(
            lines
                .iter()
                .find(|l| l.starts_with(d))
                .unwrap_or_else(|| panic!("no line for {d}:\n{human}")),
        )
    };
    assert_eq!(
        cells(&r.from_git).last().unwrap(),
        &format!("{short} clean")
    );
    assert_eq!(cells(&r.from_dir).last().unwrap(), "-");

    // With it, the digest without a clean git record fails.
    let flag = OsStr::new("--require-clean-source");
    let (code, report) = audit_json(&r.env, &r.file, &[flag]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["passed"], false);
    assert_eq!(report["require_clean_source"], true);
    assert_eq!(entry(&report, &r.from_git)["status"], "ok");
    assert_eq!(entry(&report, &r.from_dir)["status"], "no-clean-source");
    assert_eq!(
        report["verdict"],
        "FAIL: 2 digests (1 ok, 1 no-clean-source), 0 row problems, 0 malformed lines in 2 rows"
    );
    let (code, human) = audit(&r.env, &[r.file.as_os_str(), flag]);
    assert_eq!(code, 1, "{human}");
    assert!(
        human
            .lines()
            .any(|l| l == "  no source record is clean and names a commit"),
        "{human}"
    );

    // Markdown names the source too, and why the other fails.
    let (code, md) = audit(
        &r.env,
        &[r.file.as_os_str(), flag, OsStr::new("--markdown")],
    );
    assert_eq!(code, 1, "{md}");
    assert!(
        md.lines().next().unwrap().ends_with("| lines | source |"),
        "{md}"
    );
    let row = |d: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| `{d}` |")))
            .unwrap_or_else(|| panic!("no row for {d}:\n{md}"))
            .to_string()
    };
    assert!(
        row(&r.from_git).ends_with(&format!("| {short} clean |")),
        "{md}"
    );
    assert!(
        row(&r.from_dir)
            .contains("| no-clean-source: no source record is clean and names a commit |"),
        "{md}"
    );
}

#[test]
fn audit_source_repo_re_derives_each_digest_from_its_commit() {
    let r = sourced();
    let flag = OsStr::new("--source-repo");

    // The repository the release came from: equal. A digest without a
    // record is named, and passes unless a clean source is required.
    let (code, report) = audit_json(&r.env, &r.file, &[flag, r.repo.as_os_str()]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["source_repo"], s(&r.repo));
    let check = &entry(&report, &r.from_git)["source_check"];
    let typed: crate::json::SourceCheckOut = serde_json::from_value(check.clone()).unwrap();
    assert_eq!(typed.status, "equal");
    assert_eq!(typed.commit.as_deref(), Some(r.commit.as_str()));
    assert_eq!(typed.path.as_deref(), Some("plugins/p"));
    assert_eq!(typed.found.as_deref(), Some(r.from_git.as_str()));
    assert_eq!(entry(&report, &r.from_dir)["status"], "ok");
    assert_eq!(
        entry(&report, &r.from_dir)["source_check"]["status"],
        "no-source-record"
    );
    let (code, report) = audit_json(
        &r.env,
        &r.file,
        &[
            flag,
            r.repo.as_os_str(),
            OsStr::new("--require-clean-source"),
        ],
    );
    assert_eq!(code, 1, "{report}");
    assert_eq!(entry(&report, &r.from_dir)["status"], "no-clean-source");

    // A repository without the commit: source-mismatch, naming it.
    let other = crate::provenance::other_repo(&r.env);
    let (code, report) = audit_json(&r.env, &r.file, &[flag, other.as_os_str()]);
    assert_eq!(code, 1, "{report}");
    let e = entry(&report, &r.from_git);
    assert_eq!(e["status"], "source-mismatch");
    assert_eq!(e["source_check"]["mismatch"], "missing-commit");
    assert_eq!(e["source_check"]["found"], Value::Null);
    assert_eq!(
        report["verdict"],
        "FAIL: 2 digests (1 ok, 1 source-mismatch), 0 row problems, 0 malformed lines in 2 rows"
    );
    let (code, human) = audit(&r.env, &[r.file.as_os_str(), flag, other.as_os_str()]);
    assert_eq!(code, 1, "{human}");
    let want = format!(
        "  from commit {} at plugins/p: missing-commit: ",
        &r.commit[..12]
    );
    assert!(human.lines().any(|l| l.starts_with(&want)), "{human}");

    // A clone whose checkout converts the files: the tree is refused.
    let converting = crate::provenance::converting_clone(&r.env, &r.repo);
    let (code, report) = audit_json(&r.env, &r.file, &[flag, converting.as_os_str()]);
    assert_eq!(code, 1, "{report}");
    let e = entry(&report, &r.from_git);
    assert_eq!(e["status"], "source-mismatch");
    assert_eq!(e["source_check"]["mismatch"], "refused");
    let (_, md) = audit(
        &r.env,
        &[
            r.file.as_os_str(),
            flag,
            converting.as_os_str(),
            OsStr::new("--markdown"),
        ],
    );
    assert!(
        md.contains("| source-mismatch: from commit ") && md.contains(" at plugins/p: refused: "),
        "{md}"
    );

    // A path that is no repository is an error: nothing could be checked.
    let out = r.env.run([
        OsStr::new("audit"),
        r.file.as_os_str(),
        flag,
        r.env.path("dir").as_os_str(),
    ]);
    assert_exit(&out, 4);
}

/// Each digest of an audit report with its status.
fn statuses(report: &Value) -> BTreeMap<String, String> {
    report["digests"]
        .as_array()
        .expect("digests")
        .iter()
        .map(|d| {
            (
                d["manifest_digest"].as_str().unwrap().to_string(),
                d["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `find --path` with a glob of many `**` against a deep path answers, and
/// rightly: the matcher before globset tried every split of the path among
/// the `**` (exponential: 40 of them against 32 components never ended),
/// globset's automaton reads the path once.
#[test]
fn find_with_many_double_stars_answers_rightly() {
    let env = TestEnv::new();
    let src = env.path("src");
    util::minimal_plugin(&src, "1.0.0");
    let dirs: Vec<String> = (0..30).map(|i| format!("d{i}")).collect();
    let deep = format!("skills/deep/{}/x.md", dirs.join("/"));
    write(&src.join(&deep), "x\n");
    let digest = env.ingest_digest(&src, "1.0.0");
    let found = |pattern: &str| -> Vec<(String, String)> {
        // Nothing found exits 1, with its report.
        let v = parse_json(&env.run(["find", "--path", pattern, "--json"]));
        v["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["manifest_digest"].as_str().unwrap().to_string(),
                    m["path"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let many = format!("skills/{}x.md", "**/".repeat(40));
    assert_eq!(found(&many), vec![(digest.clone(), deep.clone())]);
    let none = format!("skills/{}y.md", "**/".repeat(40));
    assert_eq!(found(&none), Vec::new());
    let starred = format!("skills/{}**/*/x.md", "**/d?/".repeat(10));
    assert_eq!(found(&starred), vec![(digest, deep)]);
}
