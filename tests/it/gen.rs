//! Deterministic random plugin trees for the conformance tests.
//!
//! `plugin_tree(seed, root)` writes one plugin tree under `root` and returns
//! the `Case`: the version to pass on the command line, the directory to pass
//! (usually `root` itself), and a short description of what was generated or
//! deliberately broken. Everything depends only on the seed: the generator
//! draws every choice from a splitmix64 stream, keeps its own bookkeeping in
//! ordered maps and never reads a directory listing, the clock or the
//! environment. The same seed makes the same tree (same names, bytes, modes,
//! symlink targets, FIFOs) on any Linux machine.
//!
//! About two thirds of the seeds make a tree the seed accepts (often with an
//! "accept trap": something that looks wrong but is accepted, like a NaN in
//! plugin.json, a dangling `scripts` symlink, a FIFO named `.env`, a path of
//! exactly 1,024 bytes, exactly 2,048 files, a file of exactly 2 MiB). About a
//! third break exactly ONE rule (see `Scenario`).
//!
//! The generator may also create siblings of `root`, named `<root>-outside`
//! (symlink targets outside the tree), `<root>-link` (a symlink to the tree)
//! and `<root>-parent-link` (a symlink to its parent), so `root` should live
//! in a private directory whose path has no symlink hop (the seed rejects a
//! plugin directory that does not resolve to itself). FIFOs are made with
//! `mkfifo`, so the generator needs a Unix with coreutils.
//!
//! Changing what a seed generates invalidates `tests/data/oracle-table.json`
//! (the oracle's answers for `table_seeds()`): regenerate it with
//! `cargo run --example regenerate_table`, which needs
//! `../shared/reference/oracle.py` beside the checkout. The example includes
//! this file, so it must use nothing from the rest of the test binary.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One mebibyte.
pub const MIB: u64 = 1024 * 1024;
/// The seed's file-count limit.
pub const MAX_FILES: usize = 2_048;
/// The seed's per-file byte limit.
pub const MAX_FILE_BYTES: u64 = 2 * MIB;
/// The seed's total byte limit.
pub const MAX_TOTAL_BYTES: u64 = 16 * MIB;
/// The seed's limit on a relative path's UTF-8 length.
pub const MAX_PATH_BYTES: usize = 1_024;

const REQUIRED_SKILLS: [&str; 3] = ["ce-plan", "ce-work", "ce-code-review"];

/// A tiny seeded PRNG (splitmix64): the same seed gives the same stream everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A stream for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Shuffles `v` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// What `plugin_tree` generated.
#[derive(Clone, Debug)]
pub struct Case {
    /// The seed this case came from.
    pub seed: u64,
    /// The version to pass as `--version`.
    pub version: String,
    /// The directory to pass on the command line (usually the root itself).
    pub dir: PathBuf,
    /// A short description of the tree and of the rule it breaks, if any.
    pub description: String,
    /// The one rule the generator broke on purpose (`None`: the seed should accept it).
    pub broken: Option<String>,
    /// The generator's own count of files the snapshot should hold (when accepted).
    pub files: usize,
    /// The generator's own count of the snapshot's bytes (when accepted).
    pub bytes: u64,
}

/// What a seed makes: a valid tree (possibly with an accept trap) or a tree
/// that breaks exactly one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Valid,
    // Accept traps: odd but accepted by the seed.
    ScriptsDangling,
    ScriptsLoop,
    AssetsDangling,
    MarketplaceDangling,
    MarketplaceLoop,
    Path1024,
    Path1025Ignored,
    Files2048,
    File2Mib,
    File2MibPlus1Ignored,
    Total16Mib,
    RootSpelling,
    // Breaks: exactly one rule, the seed rejects.
    VersionSyntax,
    VersionDrift,
    WrongName,
    NotObject,
    InvalidJson,
    PluginMissing,
    PluginSymlink,
    PluginDangling,
    PluginDir,
    PluginFifo,
    MarketplaceSymlink,
    MarketplaceDir,
    MarketplaceFifo,
    ClaudeMissing,
    ClaudeSymlink,
    ClaudeFile,
    ClaudeDangling,
    SkillsMissing,
    SkillsSymlink,
    SkillsFile,
    SkillsDangling,
    ScriptsFile,
    ScriptsSymlink,
    ScriptsFifo,
    AssetsFile,
    AssetsSymlink,
    SymlinkInside,
    FifoInside,
    SocketInside,
    MissingSkill,
    Path1025,
    Files2049,
    File2MibPlus1,
    Total16MibPlus1,
    NonUtf8Name,
    RootSymlink,
    RootDotDot,
    RootDoubleSlash,
    RootFile,
    RootMissing,
    RootAncestorSymlink,
}

use Scenario as S;

/// Weights out of 1,000: about 664 accept (76 of them explicit traps), 336 break one rule.
const SCENARIOS: &[(Scenario, u64)] = &[
    (S::Valid, 588),
    (S::ScriptsDangling, 10),
    (S::ScriptsLoop, 5),
    (S::AssetsDangling, 5),
    (S::MarketplaceDangling, 10),
    (S::MarketplaceLoop, 5),
    (S::Path1024, 10),
    (S::Path1025Ignored, 5),
    (S::Files2048, 4),
    (S::File2Mib, 8),
    (S::File2MibPlus1Ignored, 4),
    (S::Total16Mib, 4),
    (S::RootSpelling, 8),
    (S::VersionSyntax, 40),
    (S::VersionDrift, 25),
    (S::WrongName, 20),
    (S::NotObject, 15),
    (S::InvalidJson, 25),
    (S::PluginMissing, 8),
    (S::PluginSymlink, 6),
    (S::PluginDangling, 4),
    (S::PluginDir, 4),
    (S::PluginFifo, 3),
    (S::MarketplaceSymlink, 5),
    (S::MarketplaceDir, 3),
    (S::MarketplaceFifo, 3),
    (S::ClaudeMissing, 6),
    (S::ClaudeSymlink, 6),
    (S::ClaudeFile, 3),
    (S::ClaudeDangling, 2),
    (S::SkillsMissing, 6),
    (S::SkillsSymlink, 6),
    (S::SkillsFile, 4),
    (S::SkillsDangling, 3),
    (S::ScriptsFile, 5),
    (S::ScriptsSymlink, 5),
    (S::ScriptsFifo, 2),
    (S::AssetsFile, 3),
    (S::AssetsSymlink, 3),
    (S::SymlinkInside, 30),
    (S::FifoInside, 12),
    (S::SocketInside, 5),
    (S::MissingSkill, 20),
    (S::Path1025, 12),
    (S::Files2049, 3),
    (S::File2MibPlus1, 8),
    (S::Total16MibPlus1, 4),
    (S::NonUtf8Name, 6),
    (S::RootSymlink, 5),
    (S::RootDotDot, 4),
    (S::RootDoubleSlash, 3),
    (S::RootFile, 2),
    (S::RootMissing, 2),
    (S::RootAncestorSymlink, 3),
];

impl Scenario {
    fn breaks(self) -> bool {
        !matches!(
            self,
            S::Valid
                | S::ScriptsDangling
                | S::ScriptsLoop
                | S::AssetsDangling
                | S::MarketplaceDangling
                | S::MarketplaceLoop
                | S::Path1024
                | S::Path1025Ignored
                | S::Files2048
                | S::File2Mib
                | S::File2MibPlus1Ignored
                | S::Total16Mib
                | S::RootSpelling
        )
    }
}

// ---------------------------------------------------------------------------
// Name and content pools. Nothing in WORDS, EXTS, WEIRD, UNICODE_NAMES or
// NEAR_MISS is dropped by the seed's filter (so files named from them count);
// everything in FORBIDDEN is.

const WORDS: &[&str] = &[
    "plan",
    "work",
    "review",
    "notes",
    "guide",
    "reference",
    "template",
    "helper",
    "util",
    "index",
    "main",
    "overview",
    "checklist",
    "examples",
    "patterns",
    "agent",
    "hooks",
    "prompts",
    "context",
    "workflow",
    "rubric",
    "summary",
    "outline",
    "draft",
    "style",
];
const EXTS: &[&str] = &[
    "md", "txt", "json", "yaml", "sh", "py", "js", "toml", "csv", "html",
];
const WEIRD: &[&str] = &[
    "é", "ü", "ß", "ñ", "中", "文", "日本", "한", "𝄞", "🦀", "😀", "\u{ff5e}", "\u{e000}",
    "\u{fffd}", "\u{2028}", "\u{feff}", "\u{80}", "\u{9f}", "\u{301}", "\"", "'", "\\", " ", "\t",
    "\n", "\r", "\x7f", "\x01", "\x08", "\x0c", "\x1b", "\x1f", "#", "%", "&", "(", ")", "[", "]",
    "{", "}", ",", ";", "=", "+", "@", "!", "$", "~", "`", "*", "?", "<", ">", "|", ":",
];
const UNICODE_NAMES: &[&str] = &[
    "café.md",
    "naïve.txt",
    "über.md",
    "Ünïcödé.md",
    "中文说明.md",
    "日本語.txt",
    "한국어.md",
    "𝄞-music.md",
    "🦀.rs",
    "emoji-😀.md",
    "e\u{301}.md",
    "é.md",
    "\u{ff5e}wave.md",
    "\u{e000}pua.md",
    "\u{fffd}.bin",
    "İstanbul.md",
    "\u{212b}ngström.md",
    "Ωmega.md",
    "ﬁle-ligature.md",
];
/// Accepted names that look like something the filter drops.
const NEAR_MISS: &[&str] = &[
    "test.md",
    "tests.md",
    "testing",
    "contest.md",
    "docs.md",
    "documentation.md",
    "doc.txt",
    ".envrc",
    ".env-example",
    "env",
    ".npmrc-notes",
    "id_rsa",
    "id_ed25519.pub",
    "api_key.txt",
    "privatekey.txt",
    "keys.md",
    "monkey.keys",
    "pem",
    "p12.txt",
    "key.pem.txt",
    "s3cret.md",
    "credentail.md",
    "tok-en.md",
    "ſecret.md",
    "ＳＥＣＲＥＴ.md",
    "PR\u{130}VATE_KEY.md",
    ".gitignore",
    ".github-templates",
    "node_modules2",
    "__pycache",
    ".ssh_config",
    ".aws-config",
    "tests ",
    ".env ",
    " .git",
    "Test\u{301}s",
    "ｔｅｓｔｓ",
    "x.pem ",
    ".env\u{301}",
];
/// Names the seed's filter drops (any depth, any case).
const FORBIDDEN: &[&str] = &[
    "tests",
    "test",
    "docs",
    "doc",
    "node_modules",
    "__pycache__",
    ".git",
    ".github",
    ".ssh",
    ".aws",
    ".env",
    ".env.local",
    ".env.production",
    ".npmrc",
    ".npmrc.bak",
    ".netrc",
    ".pypirc",
    "credentials",
    "Credentials.json",
    "secrets",
    "SECRETS.JSON",
    "api-token.txt",
    "tokenizer.py",
    "KEY.PEM",
    "server.key",
    "id.p12",
    "cert.pfx",
    "vault.kdbx",
    "my_secret.md",
    "Secretary.txt",
    "private_key.txt",
    "private-key.md",
    "PRIVATE_KEY",
    "TO\u{212a}EN.md",
    "server.\u{212a}EY",
    "Tests",
    "DOCS",
    ".GIT",
    "Node_Modules",
    "x.Pem",
    ".env.",
    ".npmrc.x",
    "dump.KDBX",
    "credential-helper.sh",
    "access_token",
    ".ENV",
    ".Env.Local",
];
const SKILL_NAMES: &[&str] = &[
    "ce-brainstorm",
    "ce-ideate",
    "ce-debug",
    "ce-compound",
    "git-commit",
    "frontend-design",
    "agent-native-architecture",
    "résumé-writer",
    "日本語-skill",
    "a",
    "a-b",
    "a.b",
    "a0",
    "skill 2",
    "x\"quote",
    "it's",
    "back\\slash",
    "Ce-Plan",
    "ce-plan-extra",
];
const BAD_VERSIONS: &[&str] = &[
    "^1.0.0",
    "~1.2.3",
    "1.0",
    "1",
    "v1.0.0",
    "V1.0.0",
    "1.0.0 ",
    " 1.0.0",
    "1.0.0\n",
    "1.0.0\t",
    "01.0.0",
    "1.00.0",
    "1.0.00",
    "1.0.0-",
    "1.0.0+",
    "1.0.0-a..b",
    "1.0.0-a_b",
    "1.0.0+a..b",
    "1.0.0.0",
    "latest",
    "*",
    "1.x",
    "1.0.x",
    "1.0.0-é",
    "１.0.0",
    "١.٢.٣",
    "1.٢.3",
    ">=1.0.0",
    "=1.0.0",
    "1.0.0 || 2.0.0",
    "",
    "1.0.0-alpha+",
    "1.0.0+build+x",
    "1.0.0-+",
    "1.0.0-alpha.",
    "1..0",
    "1.0.0-alpha#1",
    "1.0.0\u{a0}",
];

// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir { counted: bool },
    File { size: u64, counted: bool },
    Other,
}

struct Gen<'a> {
    rng: Rng,
    root: &'a Path,
    kinds: BTreeMap<Vec<u8>, Kind>,
    notes: Vec<String>,
    files: usize,
    bytes: u64,
    recent: Vec<Vec<u8>>,
    ro_dirs: Vec<Vec<u8>>,
}

fn join(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = a.to_vec();
    if !out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(b);
    out
}

fn parent_of(rel: &[u8]) -> &[u8] {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => &rel[..i],
        None => &[],
    }
}

fn depth_of(rel: &[u8]) -> usize {
    if rel.is_empty() {
        0
    } else {
        rel.iter().filter(|&&b| b == b'/').count() + 1
    }
}

fn show(rel: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(rel))
}

fn jstr(s: &str) -> String {
    serde_json::to_string(s).expect("json string")
}

fn sibling(root: &Path, suffix: &str) -> PathBuf {
    let mut name: OsString = root.file_name().expect("root has a name").to_os_string();
    name.push(suffix);
    root.with_file_name(name)
}

impl<'a> Gen<'a> {
    fn abs(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(OsStr::from_bytes(rel))
        }
    }

    fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    fn dir_counted(&self, rel: &[u8]) -> bool {
        rel.is_empty() || matches!(self.kinds.get(rel), Some(Kind::Dir { counted: true }))
    }

    /// Creates `rel` and its missing ancestors; a new directory counts only
    /// when `counted` and its parent counts (the root's children: when `counted`).
    fn mkdir(&mut self, rel: &[u8], counted: bool) {
        let mut end = 0;
        loop {
            let next = rel[end..].iter().position(|&b| b == b'/').map(|p| end + p);
            let prefix = rel[..next.unwrap_or(rel.len())].to_vec();
            match self.kinds.get(&prefix) {
                Some(Kind::Dir { .. }) => {}
                Some(other) => panic!("generator bug: {} is {other:?}, not a dir", show(&prefix)),
                None => {
                    let parent_counts = self.dir_counted(parent_of(&prefix));
                    fs::create_dir(self.abs(&prefix)).expect("create dir");
                    self.kinds.insert(
                        prefix,
                        Kind::Dir {
                            counted: counted && parent_counts,
                        },
                    );
                }
            }
            match next {
                Some(n) => end = n + 1,
                None => break,
            }
        }
    }

    /// Whether `rel` can be created as given (no clash with a file on the way).
    fn free(&self, rel: &[u8]) -> bool {
        if self.kinds.contains_key(rel) {
            return false;
        }
        let mut end = 0;
        while let Some(p) = rel[end..].iter().position(|&b| b == b'/') {
            let prefix = &rel[..end + p];
            if let Some(kind) = self.kinds.get(prefix) {
                if !matches!(kind, Kind::Dir { .. }) {
                    return false;
                }
            }
            end += p + 1;
        }
        true
    }

    /// `rel`, with `~N` appended to the first clashing component.
    fn unique(&self, rel: &[u8]) -> Vec<u8> {
        let comps: Vec<&[u8]> = rel.split(|&b| b == b'/').collect();
        let mut out: Vec<u8> = Vec::new();
        for (i, comp) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let mut n = 0;
            loop {
                let mut cand = join(&out, comp);
                if n > 0 {
                    cand.extend_from_slice(format!("~{n}").as_bytes());
                }
                let ok = match self.kinds.get(&cand) {
                    None => true,
                    Some(Kind::Dir { .. }) => !last,
                    Some(_) => false,
                };
                if ok {
                    out = cand;
                    break;
                }
                n += 1;
            }
        }
        out
    }

    fn file(&mut self, rel: &[u8], data: &[u8], mode: u32, counted: bool) -> Vec<u8> {
        let rel = self.unique(rel);
        self.put_file(&rel, data, mode, counted);
        rel
    }

    fn put_file(&mut self, rel: &[u8], data: &[u8], mode: u32, counted: bool) {
        let parent = parent_of(rel).to_vec();
        if !parent.is_empty() {
            self.mkdir(&parent, counted);
        }
        let counted = counted && self.dir_counted(&parent);
        let path = self.abs(rel);
        fs::write(&path, data).expect("write file");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        let size = data.len() as u64;
        self.kinds
            .insert(rel.to_vec(), Kind::File { size, counted });
        if counted {
            self.files += 1;
            self.bytes += size;
        }
    }

    /// Replaces an existing file's bytes (keeping the bookkeeping right).
    fn rewrite(&mut self, rel: &[u8], data: &[u8]) {
        let path = self.abs(rel);
        let mode = fs::symlink_metadata(&path)
            .expect("stat")
            .permissions()
            .mode();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        fs::write(&path, data).expect("rewrite file");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        if let Some(Kind::File { size, counted }) = self.kinds.get_mut(rel) {
            if *counted {
                self.bytes = self.bytes - *size + data.len() as u64;
            }
            *size = data.len() as u64;
        }
    }

    fn remove(&mut self, rel: &[u8]) {
        let path = self.abs(rel);
        let doomed: Vec<Vec<u8>> = self
            .kinds
            .keys()
            .filter(|k| k.as_slice() == rel || k.starts_with(&join(rel, b"")))
            .cloned()
            .collect();
        for key in doomed {
            if let Some(Kind::File {
                size,
                counted: true,
            }) = self.kinds.remove(&key)
            {
                self.files -= 1;
                self.bytes -= size;
            }
        }
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(&path).expect("remove dir"),
            Ok(_) => fs::remove_file(&path).expect("remove file"),
            Err(_) => {}
        }
    }

    /// Renames a directory (keeping the bookkeeping right).
    fn rename(&mut self, from: &[u8], to: &[u8]) {
        fs::rename(self.abs(from), self.abs(to)).expect("rename");
        let under = join(from, b"");
        let moved: Vec<Vec<u8>> = self
            .kinds
            .keys()
            .filter(|k| k.as_slice() == from || k.starts_with(&under))
            .cloned()
            .collect();
        for key in moved {
            let kind = self.kinds.remove(&key).expect("known path");
            let mut new_key = to.to_vec();
            new_key.extend_from_slice(&key[from.len()..]);
            self.kinds.insert(new_key, kind);
        }
    }

    /// A directory the filter drops, directly under the live `at` (new or
    /// already dropped, never renamed into an accepted name).
    fn dropped_dir(&mut self, at: &[u8]) -> Vec<u8> {
        let start = self.rng.below(FORBIDDEN.len() as u64) as usize;
        for i in 0..FORBIDDEN.len() {
            let rel = join(at, FORBIDDEN[(start + i) % FORBIDDEN.len()].as_bytes());
            match self.kinds.get(&rel) {
                None => {
                    self.mkdir(&rel, false);
                    return rel;
                }
                Some(Kind::Dir { counted: false }) => return rel,
                Some(_) => {}
            }
        }
        panic!("generator bug: no free dropped name under {}", show(at));
    }

    fn symlink(&mut self, target: impl AsRef<OsStr>, rel: &[u8]) -> Vec<u8> {
        let rel = self.unique(rel);
        let parent = parent_of(&rel).to_vec();
        if !parent.is_empty() {
            self.mkdir(&parent, true);
        }
        symlink(target.as_ref(), self.abs(&rel)).expect("create symlink");
        self.kinds.insert(rel.clone(), Kind::Other);
        rel
    }

    fn fifo(&mut self, rel: &[u8]) -> Vec<u8> {
        let rel = self.unique(rel);
        let parent = parent_of(&rel).to_vec();
        if !parent.is_empty() {
            self.mkdir(&parent, true);
        }
        let status = Command::new("mkfifo")
            .arg(self.abs(&rel))
            .status()
            .expect("run mkfifo");
        assert!(status.success(), "mkfifo failed for {}", show(&rel));
        self.kinds.insert(rel.clone(), Kind::Other);
        rel
    }

    /// A Unix socket (falls back to a FIFO, another non-regular file, when the
    /// absolute path is too long for `bind`).
    fn socket(&mut self, rel: &[u8]) -> Vec<u8> {
        let rel = self.unique(rel);
        let parent = parent_of(&rel).to_vec();
        if !parent.is_empty() {
            self.mkdir(&parent, true);
        }
        match std::os::unix::net::UnixListener::bind(self.abs(&rel)) {
            Ok(listener) => {
                drop(listener);
                self.kinds.insert(rel.clone(), Kind::Other);
                rel
            }
            Err(_) => {
                self.note("(socket path too long: FIFO instead)");
                self.fifo(&rel)
            }
        }
    }

    /// A relative symlink target from the link at `link` to `target` (both root-relative).
    fn relative_target(link: &[u8], target: &[u8]) -> OsString {
        let mut out = Vec::new();
        for _ in 0..depth_of(parent_of(link)) {
            out.extend_from_slice(b"../");
        }
        out.extend_from_slice(target);
        OsString::from_vec(out)
    }

    /// Live (counted) directories at or under `top`.
    fn live_dirs(&self, top: &[u8]) -> Vec<Vec<u8>> {
        let under = join(top, b"");
        self.kinds
            .iter()
            .filter(|(k, v)| {
                matches!(v, Kind::Dir { counted: true })
                    && (k.as_slice() == top || k.starts_with(&under))
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn live_dir_under(&mut self, top: &[u8]) -> Vec<u8> {
        let dirs = self.live_dirs(top);
        if dirs.is_empty() {
            return top.to_vec();
        }
        self.rng.pick(&dirs).clone()
    }

    fn counted_files_under(&self, top: &[u8]) -> Vec<Vec<u8>> {
        let under = join(top, b"");
        self.kinds
            .iter()
            .filter(|(k, v)| matches!(v, Kind::File { counted: true, .. }) && k.starts_with(&under))
            .map(|(k, _)| k.clone())
            .collect()
    }

    // -- random pieces ------------------------------------------------------

    fn word(&mut self) -> &'static str {
        self.rng.pick::<&str>(WORDS)
    }

    fn name(&mut self) -> String {
        match self.rng.below(100) {
            0..=54 => format!("{}.{}", self.word(), self.rng.pick(EXTS)),
            55..=69 => {
                let (a, b) = (self.word(), self.word());
                if self.rng.chance(50) {
                    format!("{a}-{b}.{}", self.rng.pick(EXTS))
                } else {
                    format!("{a}_{b}")
                }
            }
            70..=79 => format!("{}{}{}", self.word(), self.rng.pick(WEIRD), self.word()),
            80..=86 => self.rng.pick(NEAR_MISS).to_string(),
            87..=92 => self.rng.pick(UNICODE_NAMES).to_string(),
            _ => {
                let mut s = String::new();
                for _ in 0..self.rng.range(1, 4) {
                    s.push_str(self.rng.pick::<&str>(WEIRD));
                }
                if self.rng.chance(50) {
                    s.push('.');
                    s.push_str(self.rng.pick::<&str>(EXTS));
                }
                s
            }
        }
    }

    fn dir_name(&mut self) -> String {
        match self.rng.below(10) {
            0..=5 => self.word().to_string(),
            6 => format!("{}-{}", self.word(), self.word()),
            7 => self
                .rng
                .pick(UNICODE_NAMES)
                .trim_end_matches(".md")
                .to_string(),
            8 => self.rng.pick(NEAR_MISS).to_string(),
            _ => format!("{}{}", self.word(), self.rng.pick(WEIRD)),
        }
    }

    fn text(&mut self, words: u64) -> Vec<u8> {
        let mut s = String::new();
        for i in 0..words {
            if i > 0 {
                s.push(if self.rng.chance(12) { '\n' } else { ' ' });
            }
            if self.rng.chance(8) {
                s.push_str(self.rng.pick::<&str>(UNICODE_NAMES));
            } else {
                s.push_str(self.word());
            }
        }
        s.push('\n');
        s.into_bytes()
    }

    fn content(&mut self) -> Vec<u8> {
        let data = match self.rng.below(100) {
            0..=9 => Vec::new(),
            10..=24 if !self.recent.is_empty() => {
                let i = self.rng.below(self.recent.len() as u64) as usize;
                self.recent[i].clone()
            }
            10..=64 => {
                let n = self.rng.range(1, 60);
                self.text(n)
            }
            65..=84 => {
                let mut buf = vec![0u8; self.rng.range(1, 512) as usize];
                self.rng.fill(&mut buf);
                buf
            }
            _ => format!("#!/bin/sh\necho {}\n", self.word()).into_bytes(),
        };
        if self.recent.len() < 16 {
            self.recent.push(data.clone());
        }
        data
    }

    fn mode(&mut self) -> u32 {
        if self.rng.chance(65) {
            0o644
        } else {
            *self.rng.pick(&[
                0o755, 0o744, 0o700, 0o500, 0o711, 0o645, 0o654, 0o601, 0o444, 0o400, 0o600, 0o664,
                0o775, 0o555,
            ])
        }
    }

    fn exec_mode(&mut self) -> u32 {
        *self.rng.pick(&[
            0o755, 0o755, 0o744, 0o700, 0o500, 0o711, 0o654, 0o645, 0o644,
        ])
    }

    fn version(&mut self) -> String {
        let mut nums = Vec::new();
        for _ in 0..3 {
            nums.push(match self.rng.below(40) {
                0 => self
                    .rng
                    .pick(&[
                        "2024",
                        "65535",
                        "4294967296",
                        "18446744073709551616",
                        "99999999999999999999999",
                    ])
                    .to_string(),
                1..=12 => "0".to_string(),
                _ => self.rng.below(20).to_string(),
            });
        }
        let mut v = nums.join(".");
        if self.rng.chance(2) {
            v.push_str(&format!("-{}", "a".repeat(3000)));
            return v;
        }
        if self.rng.chance(30) {
            let idents: Vec<&str> = (0..self.rng.range(1, 3))
                .map(|_| {
                    *self.rng.pick(&[
                        "alpha", "beta", "rc", "0", "1", "01", "x-y", "-", "a-", "7z", "20240101",
                    ])
                })
                .collect();
            v.push('-');
            v.push_str(&idents.join("."));
        }
        if self.rng.chance(20) {
            let idents: Vec<&str> = (0..self.rng.range(1, 3))
                .map(|_| {
                    *self
                        .rng
                        .pick(&["build", "5", "001", "sha", "abc123", "x-1", "-"])
                })
                .collect();
            v.push('+');
            v.push_str(&idents.join("."));
        }
        v
    }

    /// A JSON string for `s`, sometimes with needless (valid) escapes.
    fn jstr_odd(&mut self, s: &str) -> String {
        if !self.rng.chance(15) {
            return jstr(s);
        }
        let mut out = String::from("\"");
        for c in s.chars() {
            let plain = jstr(&c.to_string());
            if self.rng.chance(40) || plain.len() > 3 {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    if self.rng.chance(50) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
            } else if c == '/' && self.rng.chance(50) {
                out.push_str("\\/");
            } else {
                out.push_str(&plain[1..plain.len() - 1]);
            }
        }
        out.push('"');
        self.note("escaped JSON strings");
        out
    }

    /// Renders an object from raw JSON keys and values in a random style.
    fn render(&mut self, members: &[(String, String)]) -> String {
        let body = |pre: &str, kv: &str, sep: &str, post: &str| -> String {
            let inner: Vec<String> = members.iter().map(|(k, v)| format!("{k}{kv}{v}")).collect();
            format!("{pre}{}{post}", inner.join(sep))
        };
        let mut out = match self.rng.below(5) {
            0 => body("{", ":", ",", "}"),
            1 => body("{", ": ", ", ", "}"),
            2 => body("{\n  ", ": ", ",\n  ", "\n}"),
            3 => body("{\r\n\t", " : ", ",\r\n\t", "\r\n}"),
            _ => body(" \n{ ", " :", " ,", " }\n\n"),
        };
        if self.rng.chance(50) {
            out.push('\n');
        }
        out
    }

    fn skill_md(&mut self, name: &str) -> Vec<u8> {
        let mut out = format!("---\nname: {name}\ndescription: ").into_bytes();
        let n = self.rng.range(3, 30);
        out.extend(self.text(n));
        out.extend_from_slice(format!("---\n\n# {name}\n\n").as_bytes());
        let n = self.rng.range(0, 80);
        out.extend(self.text(n));
        out
    }

    // -- tree parts ---------------------------------------------------------

    /// Random files and directories under `dir` (counted when `counted`).
    fn populate(&mut self, dir: &[u8], depth: u32, counted: bool) {
        self.mkdir(dir, counted);
        for _ in 0..self.rng.range(1, 4) {
            let rel = join(dir, self.name().as_bytes());
            let data = self.content();
            let mode = self.mode();
            self.file(&rel, &data, mode, counted);
        }
        if depth < 3 && self.rng.chance(40) {
            for _ in 0..self.rng.range(1, 2) {
                let sub = join(dir, self.dir_name().as_bytes());
                let sub = self.unique(&sub);
                self.populate(&sub, depth + 1, counted);
            }
        }
    }

    /// Names that sort differently by component than by full path, and by
    /// code point than by UTF-16 unit or normalization.
    fn sort_trap(&mut self, dir: &[u8]) {
        let names: &[&str] = &[
            "a/x", "a-b/y", "a.b", "a0", "a!", "a~", "A", "_a", "a b", "ab/c/d", "é", "e\u{301}",
            "𝄞", "\u{ff5e}", "\u{e000}", "z", "Z", "a/b-c", "a/b/c", "a/b.c",
        ];
        let mut made = 0;
        for name in names {
            if self.rng.chance(70) {
                let data = self.content();
                let mode = self.mode();
                self.file(&join(dir, name.as_bytes()), &data, mode, true);
                made += 1;
            }
        }
        self.note(format!("sort trap ({made} names) in {}", show(dir)));
    }

    /// Something the filter drops, under a live directory of `top`.
    fn forbidden_noise(&mut self, top: &[u8]) {
        let dir = self.live_dir_under(top);
        let name = *self.rng.pick(FORBIDDEN);
        let rel = join(&dir, name.as_bytes());
        if !self.free(&rel) {
            return;
        }
        let what = match self.rng.below(8) {
            0..=2 => {
                let data = self.content();
                let mode = self.mode();
                self.put_file(&rel, &data, mode, false);
                "file"
            }
            3 | 4 => {
                self.mkdir(&rel, false);
                self.populate(&rel, 1, false);
                match self.rng.below(4) {
                    0 => {
                        self.symlink("/", &join(&rel, b"root-link"));
                        "dir with a symlink"
                    }
                    1 => {
                        self.fifo(&join(&rel, b"pipe"));
                        "dir with a FIFO"
                    }
                    2 => {
                        self.file(&join(&rel, b"bad-\xff\xfe.bin"), b"x", 0o644, false);
                        "dir with a non-UTF-8 name"
                    }
                    _ => "dir",
                }
            }
            5 => {
                let target = Self::relative_target(&rel, b"skills/ce-plan/SKILL.md");
                self.symlink(target, &rel);
                "symlink"
            }
            6 => {
                self.fifo(&rel);
                "FIFO"
            }
            _ => {
                self.symlink("does-not-exist", &rel);
                "dangling symlink"
            }
        };
        self.note(format!("dropped {what} {}", show(&rel)));
    }

    fn skills(&mut self, top: &[u8]) {
        for skill in REQUIRED_SKILLS {
            let data = self.skill_md(skill);
            let mode = if self.rng.chance(10) {
                self.exec_mode()
            } else {
                0o644
            };
            let dir = join(top, skill.as_bytes());
            self.file(&join(&dir, b"SKILL.md"), &data, mode, true);
            if self.rng.chance(30) {
                self.populate(&join(&dir, b"references"), 1, true);
            }
        }
        let extra = self.rng.below(5);
        for _ in 0..extra {
            let name = if self.rng.chance(60) {
                self.rng.pick(SKILL_NAMES).to_string()
            } else {
                self.dir_name()
            };
            let dir = self.unique(&join(top, name.as_bytes()));
            if self.rng.chance(80) {
                let data = self.skill_md(&name);
                self.file(&join(&dir, b"SKILL.md"), &data, 0o644, true);
            }
            self.populate(&dir, 1, true);
        }
        self.note(format!("{extra} extra skills"));
        if self.rng.chance(20) {
            let dir = self.live_dir_under(top);
            self.sort_trap(&dir);
        }
        if self.rng.chance(40) {
            for _ in 0..self.rng.range(1, 3) {
                self.forbidden_noise(top);
            }
        }
        if self.rng.chance(10) {
            let files = self.counted_files_under(top);
            let src = self.rng.pick(&files).clone();
            let dir = self.live_dir_under(top);
            let rel = self.unique(&join(&dir, b"hardlink.md"));
            fs::hard_link(self.abs(&src), self.abs(&rel)).expect("hard link");
            let size = match self.kinds[&src] {
                Kind::File { size, .. } => size,
                _ => unreachable!(),
            };
            self.kinds.insert(
                rel.clone(),
                Kind::File {
                    size,
                    counted: true,
                },
            );
            self.files += 1;
            self.bytes += size;
            self.note(format!("hard link {} -> {}", show(&rel), show(&src)));
        }
        if self.rng.chance(10) {
            let dir = self.live_dir_under(top);
            let rel = self.unique(&join(&dir, b"empty-dir"));
            self.mkdir(&rel, true);
            if self.rng.chance(50) {
                self.mkdir(&join(&rel, b"nested/deeper"), true);
            }
            self.note("empty dirs");
        }
        if self.rng.chance(5) {
            // A directory path over the limit holds no file, so nothing is checked.
            let dir = self.live_dir_under(top);
            let long = self.long_path(&dir, MAX_PATH_BYTES + 60, false);
            // Registered as not live so nothing else is placed in it.
            self.mkdir(&long, false);
            self.note("empty dir with a path over 1,024 bytes");
        }
        if self.rng.chance(6) {
            let dir = self.live_dir_under(top);
            let name: &[u8] = self.rng.pick::<&[u8]>(&[
                &b"secret-\xff.md"[..],
                &b"token\xfe"[..],
                &b"KEY-\x80.PEM"[..],
            ]);
            let rel = join(&dir, name);
            if self.free(&rel) {
                self.put_file(&rel, b"hidden", 0o644, false);
                self.note(format!("dropped non-UTF-8 name {}", show(&rel)));
            }
        }
    }

    fn scripts(&mut self, top: &[u8]) {
        for _ in 0..self.rng.range(1, 5) {
            let dir = if self.rng.chance(30) {
                join(top, self.dir_name().as_bytes())
            } else {
                top.to_vec()
            };
            let name = format!(
                "{}.{}",
                self.word(),
                self.rng.pick(&["sh", "py", "rb", "js", ""])
            )
            .trim_end_matches('.')
            .to_string();
            let data = format!("#!/bin/sh\n# {}\nexit 0\n", self.word()).into_bytes();
            let mode = if self.rng.chance(75) {
                self.exec_mode()
            } else {
                self.mode()
            };
            self.file(&join(&dir, name.as_bytes()), &data, mode, true);
        }
        if self.rng.chance(25) {
            self.forbidden_noise(top);
        }
    }

    fn assets(&mut self, top: &[u8]) {
        for _ in 0..self.rng.range(1, 5) {
            let name = format!(
                "{}.{}",
                self.word(),
                self.rng.pick(&["png", "svg", "bin", "dat", "woff2"])
            );
            let data = if self.rng.chance(20) {
                Vec::new()
            } else {
                let mut buf = vec![0u8; self.rng.range(1, 2048) as usize];
                self.rng.fill(&mut buf);
                buf
            };
            let mode = self.mode();
            self.file(&join(top, name.as_bytes()), &data, mode, true);
        }
        if self.rng.chance(30) {
            self.populate(&join(top, b"icons"), 1, true);
        }
        if self.rng.chance(25) {
            self.forbidden_noise(top);
        }
    }

    fn top_noise(&mut self) {
        let items: &[(&str, &str)] = &[
            ("README.md", "# Compound Engineering\n"),
            ("LICENSE", "MIT\n"),
            ("package.json", "{\"name\":\"compound-engineering\"}\n"),
            ("CHANGELOG.md", "## 1.0.0\n"),
            ("src/index.ts", "export {};\n"),
            ("src/lib/util.ts", "export const x = 1;\n"),
            (".git/HEAD", "ref: refs/heads/main\n"),
            (".git/objects/ab/cdef0123", "blob"),
            ("docs/guide.md", "# Guide\n"),
            ("tests/test_plugin.py", "def test(): pass\n"),
            ("node_modules/left-pad/index.js", "module.exports = 1;\n"),
            (".github/workflows/ci.yml", "on: push\n"),
            (".env", "TOKEN=1\n"),
            (
                "plugins/other/.claude-plugin/plugin.json",
                "{\"name\":\"other\"}",
            ),
            ("skills.md", "not the skills dir\n"),
            ("Skills/ce-plan/SKILL.md", "# decoy\n"),
            ("agents/reviewer.md", "# reviewer\n"),
        ];
        let mut made = Vec::new();
        for (rel, data) in items {
            if self.rng.chance(35) {
                self.file(rel.as_bytes(), data.as_bytes(), 0o644, false);
                made.push(*rel);
            }
        }
        if self.rng.chance(5) {
            self.fifo(b"pipe");
            made.push("pipe (FIFO)");
        }
        if self.rng.chance(8) {
            self.symlink("nowhere", b"latest");
            made.push("latest (dangling symlink)");
        }
        if self.rng.chance(5) {
            self.file(b"notes-\xff.txt", b"x", 0o644, false);
            made.push("non-UTF-8 name");
        }
        if !made.is_empty() {
            self.note(format!("top-level noise: {}", made.join(", ")));
        }
    }

    fn claude_noise(&mut self, dir: &[u8]) {
        let items: &[(&str, &str)] = &[
            ("CHANGELOG.md", "## 1.0.0\n- first\n"),
            ("README.md", "# plugin\n"),
            ("hooks.json", "{\"hooks\": []}"),
            ("agents/reviewer.md", "# reviewer\n"),
            ("PLUGIN.JSON", "{\"name\": \"decoy\"}"),
            ("plugin.json.bak", "{}"),
            (".env", "SECRET=1\n"),
        ];
        let mut made = Vec::new();
        for (rel, data) in items {
            if self.rng.chance(25) {
                self.file(&join(dir, rel.as_bytes()), data.as_bytes(), 0o644, false);
                made.push(*rel);
            }
        }
        if self.rng.chance(8) {
            self.symlink("plugin.json", &join(dir, b"latest.json"));
            made.push("latest.json (symlink)");
        }
        if self.rng.chance(3) {
            self.fifo(&join(dir, b"events"));
            made.push("events (FIFO)");
        }
        if !made.is_empty() {
            self.note(format!(".claude-plugin noise: {}", made.join(", ")));
        }
    }

    /// A valid plugin.json object (sometimes with things only Python accepts).
    fn manifest_members(&mut self, name: String, version: String) -> Vec<(String, String)> {
        let mut members = vec![(jstr("name"), name), (jstr("version"), version)];
        if self.rng.chance(30) {
            members.swap(0, 1);
        }
        let extras: &[(&str, &str)] = &[
            ("description", "\"Plans, work, and review — ünïcødé ✓ 𝄞\""),
            (
                "author",
                "{\"name\": \"Every\", \"email\": \"hi@example.com\"}",
            ),
            ("keywords", "[\"plan\", \"work\", 1, true, null, 2.5e3]"),
            ("homepage", "\"https:\\/\\/example.com\\/\\u00e9\""),
            ("license", "\"MIT\""),
            ("ключ", "\"значение\""),
            ("", "0"),
            ("nested", "{\"a\": {\"b\": [[], {}, -0.0, 1E-7]}}"),
            ("nul", "\"a\\u0000b\""),
        ];
        if self.rng.chance(50) {
            for _ in 0..self.rng.range(1, 3) {
                let (k, v) = *self.rng.pick(extras);
                let at = self.rng.below(members.len() as u64 + 1) as usize;
                members.insert(at, (jstr(k), v.to_string()));
            }
            self.note("plugin.json extra keys");
        }
        if self.rng.chance(25) {
            let (label, key, value): (&str, &str, String) = match self.rng.below(13) {
                0 => ("NaN", "x-nan", "NaN".into()),
                1 => ("Infinity", "x-inf", "[Infinity, -Infinity]".into()),
                2 => ("1e400", "x-big", "1e400".into()),
                3 => (
                    "big integer",
                    "x-bigint",
                    "123456789012345678901234567890".into(),
                ),
                4 => ("lone surrogate", "x-lone", "\"\\ud800\"".into()),
                8 => (
                    "integer of 4,300 digits (Python's limit)",
                    "x-int",
                    "7".repeat(4300),
                ),
                9 => (
                    "lone low surrogate",
                    "x-low",
                    "[\"\\udc80\", \"\\udbff\\ud7ff\"]".into(),
                ),
                10 => (
                    "raw U+FFFF, U+2028, U+FEFF in a string",
                    "x-raw",
                    "\"\u{ffff}\u{2028}\u{feff}\"".into(),
                ),
                11 => (
                    "float of 5,000 digits",
                    "x-float",
                    format!("0.{}1", "0".repeat(4998)),
                ),
                12 => (
                    "-1E400 and 4,301-digit exponent form",
                    "x-exp",
                    format!("[-1E400, {}e0]", "9".repeat(4301)),
                ),
                5 => {
                    let d = self.rng.range(129, 400) as usize;
                    (
                        "deep nesting",
                        "x-deep",
                        format!("{}{}", "[".repeat(d), "]".repeat(d)),
                    )
                }
                6 => {
                    // Duplicate key: Python keeps the last one, which is right.
                    let at = members
                        .iter()
                        .position(|(k, _)| k == "\"version\"")
                        .unwrap();
                    members.insert(at, (jstr("version"), jstr("0.0.0-draft")));
                    ("duplicate version key (last wins)", "x-dup", "1".into())
                }
                _ => {
                    let at = members.iter().position(|(k, _)| k == "\"name\"").unwrap();
                    members.insert(at, (jstr("name"), jstr("someone-else")));
                    ("duplicate name key (last wins)", "x-dup", "2".into())
                }
            };
            let at = self.rng.below(members.len() as u64 + 1) as usize;
            members.insert(at, (jstr(key), value));
            self.note(format!("TRAP plugin.json accepted by Python: {label}"));
        }
        members
    }

    fn marketplace_bytes(&mut self) -> Vec<u8> {
        match self.rng.below(4) {
            0 => b"{\"name\":\"every\",\"plugins\":[{\"name\":\"compound-engineering\",\"source\":\"./\"}]}\n"
                .to_vec(),
            1 => b"not json at all {".to_vec(),
            2 => Vec::new(),
            _ => {
                let mut buf = vec![0u8; self.rng.range(1, 300) as usize];
                self.rng.fill(&mut buf);
                buf
            }
        }
    }

    /// A long relative path of exactly `len` bytes under `dir`, components of
    /// at most 200 bytes, sometimes built from multi-byte characters.
    fn long_path(&mut self, dir: &[u8], len: usize, multibyte: bool) -> Vec<u8> {
        let mut out = join(dir, b"");
        assert!(out.len() + 8 < len, "prefix too long for a long path");
        let pool: &[&str] = &["é", "中", "𝄞", "ü", "x"];
        let mut k = 0u32;
        while out.len() < len {
            let remaining = len - out.len();
            let comp_len = if remaining <= 200 {
                remaining
            } else {
                (remaining - 2).min(200)
            };
            let mut comp = String::new();
            comp.push(char::from(b'a' + (k % 26) as u8));
            k += 1;
            while comp.len() < comp_len {
                let left = comp_len - comp.len();
                let piece = if multibyte { *self.rng.pick(pool) } else { "x" };
                if piece.len() <= left {
                    comp.push_str(piece);
                } else {
                    comp.push('x');
                }
            }
            out.extend_from_slice(comp.as_bytes());
            if out.len() < len {
                out.push(b'/');
            }
        }
        assert_eq!(out.len(), len);
        out
    }

    /// Adds files under `skills/bulk-*` until the snapshot holds `target` files.
    fn fill_count(&mut self, target: usize) {
        let mut i = 0;
        while self.files < target {
            let rel = format!("skills/bulk-{:02}/{:04}.md", i / 256, i);
            let data: &[u8] = if i % 3 == 0 { b"" } else { b"x\n" };
            self.file(rel.as_bytes(), data, 0o644, true);
            i += 1;
        }
        assert_eq!(self.files, target);
    }

    /// Adds blobs under `assets/` until the snapshot holds `target` bytes.
    fn fill_bytes(&mut self, target: u64) {
        let mut i = 0;
        while self.bytes < target {
            let size = (target - self.bytes).min(MAX_FILE_BYTES);
            let mut buf = vec![0u8; size as usize];
            self.rng.fill(&mut buf);
            self.file(format!("assets/blob-{i}.bin").as_bytes(), &buf, 0o644, true);
            i += 1;
        }
        assert_eq!(self.bytes, target);
    }

    fn big_file(&mut self, size: u64) -> Vec<u8> {
        let mut buf = vec![0u8; size as usize];
        self.rng.fill(&mut buf[..4096.min(size as usize)]);
        for i in 4096..buf.len() {
            buf[i] = buf[i % 4096] ^ (i / 4096) as u8;
        }
        buf
    }
}

/// How a top-level component (or manifest) is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Absent,
    Real,
    SymlinkToReal,
    Dangling,
    Loop,
    File,
    Dir,
    Fifo,
}

/// The scenario: always the stream's first draw.
fn pick_scenario(rng: &mut Rng) -> Scenario {
    let total: u64 = SCENARIOS.iter().map(|(_, w)| w).sum();
    let mut roll = rng.below(total);
    for (s, w) in SCENARIOS {
        if roll < *w {
            return *s;
        }
        roll -= w;
    }
    unreachable!("weights cover the roll")
}

/// The name of what `seed` makes ("Valid", a trap or a broken rule), without
/// writing anything.
pub fn scenario_name(seed: u64) -> String {
    format!("{:?}", pick_scenario(&mut Rng::new(seed)))
}

/// Every scenario name `scenario_name` can return.
pub fn scenario_names() -> Vec<String> {
    SCENARIOS.iter().map(|(s, _)| format!("{s:?}")).collect()
}

/// The first seed of the pinned oracle table.
pub const TABLE_SEED: u64 = 1_000_000;
/// How many consecutive seeds from `TABLE_SEED` the pinned oracle table holds.
pub const TABLE_CASES: u64 = 300;

/// The seeds of the pinned oracle table (`tests/data/oracle-table.json`):
/// `TABLE_CASES` consecutive seeds from `TABLE_SEED`, then the first later
/// seed of every scenario those missed, so the table holds every kind of tree.
pub fn table_seeds() -> Vec<u64> {
    let mut seeds: Vec<u64> = (0..TABLE_CASES).map(|i| TABLE_SEED + i).collect();
    let mut seen: std::collections::BTreeSet<String> =
        seeds.iter().map(|&s| scenario_name(s)).collect();
    for name in scenario_names() {
        if !seen.contains(&name) {
            let seed = (TABLE_SEED + TABLE_CASES..)
                .find(|&s| scenario_name(s) == name)
                .expect("every scenario has a seed");
            seeds.push(seed);
            seen.insert(name);
        }
    }
    seeds
}

/// Writes the tree for `seed` under `root` (created if missing) and describes it.
pub fn plugin_tree(seed: u64, root: &Path) -> Case {
    fs::create_dir_all(root).expect("create root");
    let mut g = Gen {
        rng: Rng::new(seed),
        root,
        kinds: BTreeMap::new(),
        notes: Vec::new(),
        files: 0,
        bytes: 0,
        recent: Vec::new(),
        ro_dirs: Vec::new(),
    };
    let scenario = pick_scenario(&mut g.rng);
    let label = if scenario.breaks() {
        format!("BREAK {scenario:?}")
    } else if scenario == S::Valid {
        "valid".to_string()
    } else {
        format!("TRAP {scenario:?}")
    };
    g.note(label);

    // -- version and plugin.json contents -----------------------------------
    let good = g.version();
    let mut version = good.clone();
    let mut name_json = g.jstr_odd("compound-engineering");
    let mut version_json = g.jstr_odd(&good);
    let mut plugin_bytes: Option<Vec<u8>> = None;
    match scenario {
        S::VersionSyntax => {
            version = if g.rng.chance(70) {
                g.rng.pick(BAD_VERSIONS).to_string()
            } else {
                let base = good.clone();
                let core = base.split(['-', '+']).next().unwrap_or("1.0.0").to_string();
                match g.rng.below(6) {
                    0 => format!("v{base}"),
                    1 => format!("={base}"),
                    2 => format!("^{base}"),
                    3 => format!("{core}.0"),
                    4 => format!("{base} "),
                    _ => core
                        .rsplit_once('.')
                        .map_or("1", |(head, _)| head)
                        .to_string(),
                }
            };
            version_json = jstr(&version);
            g.note(format!("cli version {version:?} is not an exact semver"));
        }
        S::VersionDrift => {
            let other = loop {
                let v = g.version();
                if v != good {
                    break v;
                }
            };
            let (text, json): (String, Option<String>) = match g.rng.below(11) {
                0 | 1 => (format!("{other:?}"), Some(jstr(&other))),
                2 => ("v-prefixed".into(), Some(jstr(&format!("v{good}")))),
                3 => ("trailing space".into(), Some(jstr(&format!("{good} ")))),
                4 => ("extra build".into(), Some(jstr(&format!("{good}+drift")))),
                5 => ("number".into(), Some("1".into())),
                6 => ("null".into(), Some("null".into())),
                7 => ("array".into(), Some(format!("[{}]", jstr(&good)))),
                8 => ("missing version key".into(), None),
                9 => ("\"Version\" key instead".into(), None),
                _ => (
                    "duplicate version key, last wrong".into(),
                    Some(jstr(&other)),
                ),
            };
            g.note(format!("plugin.json version drift: {text}"));
            match (json, text.as_str()) {
                (Some(json), "duplicate version key, last wrong") => {
                    version_json = format!("{}, \"version\": {json}", jstr(&good));
                }
                (Some(json), _) => version_json = json,
                (None, t) if t.starts_with("\"Version\"") => {
                    plugin_bytes = Some(
                        format!("{{\"name\": {name_json}, \"Version\": {}}}", jstr(&good))
                            .into_bytes(),
                    );
                }
                (None, _) => {
                    plugin_bytes = Some(format!("{{\"name\": {name_json}}}").into_bytes());
                }
            }
        }
        S::WrongName => {
            let bad: &[&str] = &[
                "\"Compound-Engineering\"",
                "\"compound_engineering\"",
                "\"compound-engineering \"",
                "\" compound-engineering\"",
                "\"compound-engineering-plugin\"",
                "\"\"",
                "null",
                "[\"compound-engineering\"]",
                "\"compound\\u2010engineering\"",
                "\"compound-engineering\\u0000\"",
                "\"ｃompound-engineering\"",
                "\"compound-engineerin\\u0261\"",
                "\"compound-engineering\\n\"",
                "1",
                "{\"name\": \"compound-engineering\"}",
            ];
            match g.rng.below(5) {
                0 => {
                    plugin_bytes = Some(format!("{{\"version\": {version_json}}}").into_bytes());
                    g.note("plugin.json has no name");
                }
                1 => {
                    plugin_bytes = Some(
                        format!("{{\"Name\": {name_json}, \"version\": {version_json}}}")
                            .into_bytes(),
                    );
                    g.note("plugin.json has \"Name\", not \"name\"");
                }
                2 => {
                    name_json = format!("{name_json}, \"name\": \"other\"");
                    g.note("duplicate name key, last wrong");
                }
                _ => {
                    name_json = g.rng.pick(bad).to_string();
                    g.note(format!("plugin.json name {name_json}"));
                }
            }
        }
        S::NotObject => {
            let v = jstr(&good);
            let options = [
                format!("[\"compound-engineering\", {v}]"),
                "\"compound-engineering\"".to_string(),
                "42".to_string(),
                "null".to_string(),
                "true".to_string(),
                "[]".to_string(),
                format!("[{{\"name\": \"compound-engineering\", \"version\": {v}}}]"),
                jstr(&format!(
                    "{{\"name\": \"compound-engineering\", \"version\": {v}}}"
                )),
            ];
            let text = g.rng.pick(&options).clone();
            g.note(format!("plugin.json is not an object: {text}"));
            plugin_bytes = Some(text.into_bytes());
        }
        S::InvalidJson => {
            let v = jstr(&good);
            let valid = format!("{{\"name\": \"compound-engineering\", \"version\": {v}}}");
            let (label, bytes): (&str, Vec<u8>) = match g.rng.below(25) {
                0 => ("trailing comma", format!("{{\"name\": \"compound-engineering\", \"version\": {v},}}").into_bytes()),
                1 => ("line comment", format!("// plugin\n{valid}").into_bytes()),
                2 => ("block comment", format!("{{/* c */\"name\": \"compound-engineering\", \"version\": {v}}}").into_bytes()),
                3 => ("single quotes", format!("{{'name': 'compound-engineering', 'version': '{good}'}}").into_bytes()),
                4 => ("unquoted keys", format!("{{name: \"compound-engineering\", version: {v}}}").into_bytes()),
                5 => {
                    let cut = g.rng.range(1, valid.len() as u64 - 1) as usize;
                    ("truncated", valid.as_bytes()[..cut].to_vec())
                }
                6 => ("empty file", Vec::new()),
                7 => ("whitespace only", b" \n\t\r\n".to_vec()),
                8 => ("UTF-8 BOM", [&b"\xef\xbb\xbf"[..], valid.as_bytes()].concat()),
                9 => (
                    "invalid UTF-8 in a string",
                    [&valid.as_bytes()[..valid.len() - 1], &b", \"d\": \"\xff\"}"[..]].concat(),
                ),
                10 => ("extra data", format!("{valid} {{}}").into_bytes()),
                11 => ("raw tab in a string", format!("{{\"name\": \"compound-engineering\", \"version\": {v}, \"d\": \"a\tb\"}}").into_bytes()),
                12 => ("lowercase nan", format!("{{\"name\": \"compound-engineering\", \"version\": {v}, \"x\": nan}}").into_bytes()),
                13 => (
                    "nesting deeper than Python's recursion limit",
                    format!("{{\"name\": \"compound-engineering\", \"version\": {v}, \"x\": {}{}}}", "[".repeat(5000), "]".repeat(5000)).into_bytes(),
                ),
                14 => ("hex number", format!("{{\"name\": \"compound-engineering\", \"version\": {v}, \"x\": 0x10}}").into_bytes()),
                15 => ("leading zero", format!("{{\"name\": \"compound-engineering\", \"version\": {v}, \"x\": 01}}").into_bytes()),
                16 => ("plus sign", format!("{{\"name\": \"compound-engineering\", \"version\": {v}, \"x\": +1}}").into_bytes()),
                17 => ("UTF-16LE", {
                    let mut out = vec![0xff, 0xfe];
                    for unit in valid.encode_utf16() {
                        out.extend_from_slice(&unit.to_le_bytes());
                    }
                    out
                }),
                18 => ("trailing NUL", [valid.as_bytes(), b"\0"].concat()),
                19 => ("bad escape", format!("{{\"name\": \"compound-engineering\", \"version\": {v}, \"x\": \"\\x41\"}}").into_bytes()),
                20 => ("form feed whitespace", format!("\x0c{valid}").into_bytes()),
                21 => (
                    "integer of 4,301 digits (over Python's int limit)",
                    format!("{{\"name\": \"compound-engineering\", \"version\": {v}, \"x\": -{}}}", "7".repeat(4301)).into_bytes(),
                ),
                22 => (
                    "UTF-8-encoded surrogate (CESU) bytes in a string",
                    [&valid.as_bytes()[..valid.len() - 1], &b", \"d\": \"\xed\xa0\x80\"}"[..]].concat(),
                ),
                23 => (
                    "overlong UTF-8 in a string",
                    [&valid.as_bytes()[..valid.len() - 1], &b", \"d\": \"\xc0\xaf\"}"[..]].concat(),
                ),
                _ => ("missing closing brace", valid.as_bytes()[..valid.len() - 1].to_vec()),
            };
            g.note(format!("plugin.json invalid JSON: {label}"));
            plugin_bytes = Some(bytes);
        }
        _ => {}
    }
    let plugin_bytes = match plugin_bytes {
        Some(bytes) => bytes,
        None => {
            let members = g.manifest_members(name_json, version_json);
            g.render(&members).into_bytes()
        }
    };

    // -- layout ---------------------------------------------------------------
    let claude = match scenario {
        S::ClaudeMissing => Shape::Absent,
        S::ClaudeSymlink => Shape::SymlinkToReal,
        S::ClaudeFile => Shape::File,
        S::ClaudeDangling => Shape::Dangling,
        _ => Shape::Real,
    };
    let plugin = match scenario {
        S::PluginMissing => Shape::Absent,
        S::PluginSymlink => Shape::SymlinkToReal,
        S::PluginDangling => Shape::Dangling,
        S::PluginDir => Shape::Dir,
        S::PluginFifo => Shape::Fifo,
        _ => Shape::Real,
    };
    let marketplace = match scenario {
        S::MarketplaceDangling => Shape::Dangling,
        S::MarketplaceLoop => Shape::Loop,
        S::MarketplaceSymlink => Shape::SymlinkToReal,
        S::MarketplaceDir => Shape::Dir,
        S::MarketplaceFifo => Shape::Fifo,
        _ if g.rng.chance(45) => Shape::Real,
        _ => Shape::Absent,
    };
    let skills = match scenario {
        S::SkillsMissing => Shape::Absent,
        S::SkillsSymlink => Shape::SymlinkToReal,
        S::SkillsFile => Shape::File,
        S::SkillsDangling => Shape::Dangling,
        _ => Shape::Real,
    };
    let scripts = match scenario {
        S::ScriptsDangling => Shape::Dangling,
        S::ScriptsLoop => Shape::Loop,
        S::ScriptsFile => Shape::File,
        S::ScriptsSymlink => Shape::SymlinkToReal,
        S::ScriptsFifo => Shape::Fifo,
        _ if g.rng.chance(50) => Shape::Real,
        _ => Shape::Absent,
    };
    let assets = match scenario {
        S::AssetsDangling => Shape::Dangling,
        S::AssetsFile => Shape::File,
        S::AssetsSymlink => Shape::SymlinkToReal,
        S::Total16Mib | S::Total16MibPlus1 => Shape::Real,
        _ if g.rng.chance(40) => Shape::Real,
        _ => Shape::Absent,
    };

    // -- .claude-plugin -------------------------------------------------------
    let claude_dir: &[u8] = match claude {
        Shape::Real => b".claude-plugin",
        Shape::SymlinkToReal => b".claude-plugin.real",
        _ => b"claude-plugin",
    };
    match claude {
        Shape::File => {
            g.file(b".claude-plugin", &plugin_bytes, 0o644, false);
            g.note(".claude-plugin is a file");
        }
        Shape::Dangling => {
            g.symlink(".claude-plugin.gone", b".claude-plugin");
            g.note(".claude-plugin is a dangling symlink");
        }
        Shape::SymlinkToReal => {
            g.symlink(".claude-plugin.real", b".claude-plugin");
            g.note(".claude-plugin is a symlink to a real dir");
        }
        Shape::Absent => g.note(".claude-plugin missing (decoy claude-plugin/ without the dot)"),
        _ => {}
    }
    if claude != Shape::File && claude != Shape::Dangling {
        let pj = join(claude_dir, b"plugin.json");
        let mode = if g.rng.chance(8) {
            g.exec_mode()
        } else {
            0o644
        };
        match plugin {
            Shape::Real => {
                g.file(&pj, &plugin_bytes, mode, true);
            }
            Shape::Absent => {
                g.mkdir(claude_dir, true);
                if g.rng.chance(50) {
                    g.file(
                        &join(claude_dir, b"PLUGIN.JSON"),
                        &plugin_bytes,
                        0o644,
                        false,
                    );
                    g.note("plugin.json missing (PLUGIN.JSON present)");
                } else {
                    g.note("plugin.json missing");
                }
            }
            Shape::SymlinkToReal => {
                g.file(
                    &join(claude_dir, b"real-plugin.json"),
                    &plugin_bytes,
                    0o644,
                    false,
                );
                g.symlink("real-plugin.json", &pj);
                g.note("plugin.json is a symlink to a real file");
            }
            Shape::Dangling => {
                g.mkdir(claude_dir, true);
                g.symlink("gone.json", &pj);
                g.note("plugin.json is a dangling symlink");
            }
            Shape::Dir => {
                g.file(&join(&pj, b"plugin.json"), &plugin_bytes, 0o644, false);
                g.note("plugin.json is a directory");
            }
            Shape::Fifo => {
                g.mkdir(claude_dir, true);
                g.fifo(&pj);
                g.note("plugin.json is a FIFO");
            }
            _ => unreachable!(),
        }
        let mj = join(claude_dir, b"marketplace.json");
        match marketplace {
            Shape::Absent => {}
            Shape::Real => {
                let data = g.marketplace_bytes();
                let mode = g.mode();
                g.file(&mj, &data, mode, true);
                g.note(format!(
                    "marketplace.json ({} bytes, never parsed)",
                    data.len()
                ));
            }
            Shape::Dangling => {
                g.symlink("nowhere.json", &mj);
                g.note("marketplace.json is a dangling symlink (skipped)");
            }
            Shape::Loop => {
                g.symlink("marketplace.json", &mj);
                g.note("marketplace.json is a symlink to itself (skipped)");
            }
            Shape::SymlinkToReal => {
                let data = g.marketplace_bytes();
                g.file(&join(claude_dir, b"market.json"), &data, 0o644, false);
                g.symlink("market.json", &mj);
                g.note("marketplace.json is a symlink to a real file");
            }
            Shape::Dir => {
                g.file(&join(&mj, b"index.json"), b"{}", 0o644, false);
                g.note("marketplace.json is a directory");
            }
            Shape::Fifo => {
                g.fifo(&mj);
                g.note("marketplace.json is a FIFO");
            }
            _ => unreachable!(),
        }
        if g.rng.chance(40) {
            g.claude_noise(claude_dir);
        }
    }

    // -- skills -----------------------------------------------------------------
    match skills {
        Shape::Real => g.skills(b"skills"),
        Shape::SymlinkToReal => {
            g.skills(b"skills.real");
            if g.rng.chance(50) {
                g.symlink("skills.real", b"skills");
            } else {
                let target = root.join("skills.real");
                g.symlink(&target, b"skills");
            }
            g.note("skills is a symlink to a real dir");
        }
        Shape::Absent => {
            if g.rng.chance(50) {
                g.skills(b"skill");
                g.note("skills missing (skill/ instead)");
            } else {
                g.note("skills missing");
            }
        }
        Shape::File => {
            g.file(
                b"skills",
                b"ce-plan\nce-work\nce-code-review\n",
                0o644,
                false,
            );
            g.note("skills is a file");
        }
        Shape::Dangling => {
            g.symlink("skills.gone", b"skills");
            g.note("skills is a dangling symlink");
        }
        _ => unreachable!(),
    }

    // -- scripts and assets -----------------------------------------------------
    for (name, shape) in [("scripts", scripts), ("assets", assets)] {
        let rel = name.as_bytes();
        match shape {
            Shape::Absent => {}
            Shape::Real => {
                if name == "scripts" {
                    g.scripts(rel);
                } else {
                    g.assets(rel);
                }
                g.note(name);
            }
            Shape::Dangling => {
                g.symlink(format!("{name}.gone"), rel);
                g.note(format!("{name} is a dangling symlink (skipped)"));
            }
            Shape::Loop => {
                g.symlink(name, rel);
                g.note(format!("{name} is a symlink to itself (skipped)"));
            }
            Shape::File => {
                g.file(rel, b"#!/bin/sh\n", 0o755, false);
                g.note(format!("{name} is a file"));
            }
            Shape::SymlinkToReal => {
                let real = format!("{name}.real");
                if name == "scripts" {
                    g.scripts(real.as_bytes());
                } else {
                    g.assets(real.as_bytes());
                }
                g.symlink(&real, rel);
                g.note(format!("{name} is a symlink to a real dir"));
            }
            Shape::Fifo => {
                g.fifo(rel);
                g.note(format!("{name} is a FIFO"));
            }
            Shape::Dir => unreachable!(),
        }
    }
    if g.rng.chance(40) {
        g.top_noise();
    }

    // -- breaks and traps inside the components ---------------------------------
    let mut components: Vec<&[u8]> = vec![b"skills"];
    if scripts == Shape::Real {
        components.push(b"scripts");
    }
    if assets == Shape::Real {
        components.push(b"assets");
    }
    let mut dir = root.to_path_buf();
    match scenario {
        S::SymlinkInside => {
            let top = *g.rng.pick(&components);
            let at = g.live_dir_under(top);
            let link = join(&at, g.name().as_bytes());
            let link = g.unique(&link);
            let (what, target): (&str, OsString) = match g.rng.below(8) {
                0 => (
                    "a file inside",
                    Gen::relative_target(&link, b"skills/ce-plan/SKILL.md"),
                ),
                1 => (
                    "a dir inside",
                    Gen::relative_target(&link, b"skills/ce-work"),
                ),
                2 | 3 => {
                    let outside = sibling(root, "-outside");
                    fs::create_dir_all(&outside).expect("outside dir");
                    fs::write(outside.join("file.txt"), b"outside\n").expect("outside file");
                    if g.rng.chance(50) {
                        (
                            "a file outside the tree",
                            outside.join("file.txt").into_os_string(),
                        )
                    } else {
                        ("a dir outside the tree", outside.into_os_string())
                    }
                }
                4 => ("nothing (dangling)", OsString::from("does-not-exist")),
                5 => (
                    "itself (loop)",
                    OsString::from_vec(
                        link[link.iter().rposition(|&b| b == b'/').unwrap() + 1..].to_vec(),
                    ),
                ),
                6 => ("/", OsString::from("/")),
                _ => {
                    // The required SKILL.md itself is a symlink to a real file.
                    let skill = format!("skills/{}/SKILL.md", g.rng.pick(&REQUIRED_SKILLS));
                    let data = fs::read(g.abs(skill.as_bytes())).expect("read skill");
                    g.remove(skill.as_bytes());
                    let real = format!("{skill}.real");
                    g.file(real.as_bytes(), &data, 0o644, true);
                    g.symlink("SKILL.md.real", skill.as_bytes());
                    g.note(format!("{skill} is a symlink to a real file"));
                    ("", OsString::new())
                }
            };
            if !what.is_empty() {
                g.symlink(&target, &link);
                g.note(format!("symlink {} -> {what}", show(&link)));
            }
        }
        S::FifoInside | S::SocketInside => {
            let top = *g.rng.pick(&components);
            let at = g.live_dir_under(top);
            let rel = join(&at, g.name().as_bytes());
            let rel = if scenario == S::FifoInside {
                g.fifo(&rel)
            } else {
                g.socket(&rel)
            };
            let what = if scenario == S::FifoInside {
                "FIFO"
            } else {
                "socket"
            };
            g.note(format!("{what} {}", show(&rel)));
        }
        S::MissingSkill => {
            let skill = *g.rng.pick(&REQUIRED_SKILLS);
            let dir_rel = format!("skills/{skill}");
            let rel = format!("{dir_rel}/SKILL.md");
            let data = fs::read(g.abs(rel.as_bytes())).expect("read skill");
            match g.rng.below(6) {
                0 => {
                    g.remove(rel.as_bytes());
                    g.note(format!("{rel} deleted"));
                }
                1 => {
                    g.remove(rel.as_bytes());
                    g.file(format!("{dir_rel}/skill.md").as_bytes(), &data, 0o644, true);
                    g.note(format!("{rel} spelled skill.md"));
                }
                2 => {
                    g.remove(rel.as_bytes());
                    g.file(format!("{rel}/README.md").as_bytes(), &data, 0o644, true);
                    g.note(format!("{rel} is a directory"));
                }
                3 => {
                    g.remove(rel.as_bytes());
                    g.file(
                        format!("{dir_rel}/v2/SKILL.md").as_bytes(),
                        &data,
                        0o644,
                        true,
                    );
                    g.note(format!("{rel} only in a subdirectory"));
                }
                4 => {
                    g.remove(rel.as_bytes());
                    let hidden = *g.rng.pick(&["tests", "docs", "node_modules", ".git"]);
                    g.file(
                        format!("skills/{hidden}/{skill}/SKILL.md").as_bytes(),
                        &data,
                        0o644,
                        false,
                    );
                    g.note(format!("{rel} only under the dropped skills/{hidden}/"));
                }
                _ => {
                    let renamed = g.unique(format!("skills/{}", skill.to_uppercase()).as_bytes());
                    g.rename(dir_rel.as_bytes(), &renamed);
                    g.note(format!("{dir_rel} renamed {}", show(&renamed)));
                }
            }
        }
        S::Path1024 | S::Path1025 | S::Path1025Ignored => {
            let top = *g.rng.pick(&components);
            let mut at = g.live_dir_under(top);
            if at.len() > 300 {
                at = top.to_vec();
            }
            if scenario == S::Path1025Ignored {
                at = g.dropped_dir(&at);
            }
            let len = if scenario == S::Path1024 {
                MAX_PATH_BYTES
            } else {
                MAX_PATH_BYTES + 1
            };
            let multibyte = g.rng.chance(50);
            let rel = g.long_path(&at, len, multibyte);
            let counted = scenario != S::Path1025Ignored;
            let data = g.content();
            g.put_file(&rel, &data, 0o644, counted);
            let chars = String::from_utf8_lossy(&rel).chars().count();
            g.note(format!(
                "a file path of {len} bytes ({chars} chars{}){}",
                if multibyte { ", multi-byte" } else { "" },
                if counted { "" } else { " under a dropped dir" }
            ));
            if scenario == S::Path1024 && g.rng.chance(50) {
                // The same directory also holds a long empty dir (no file, no check).
                let more = g.long_path(&at, MAX_PATH_BYTES + 30, false);
                g.mkdir(&more, false);
            }
        }
        S::File2Mib | S::File2MibPlus1 | S::File2MibPlus1Ignored => {
            let size = if scenario == S::File2Mib {
                MAX_FILE_BYTES
            } else {
                MAX_FILE_BYTES + 1
            };
            let data = g.big_file(size);
            match (scenario, g.rng.below(4)) {
                (S::File2MibPlus1Ignored, n) => {
                    let rel = match n {
                        0 => b"skills/node_modules/huge.bin".to_vec(),
                        1 => b".claude-plugin/huge.bin".to_vec(),
                        2 => b"huge.bin".to_vec(),
                        _ => b"skills/ce-plan/secret-dump.bin".to_vec(),
                    };
                    let rel = if rel.starts_with(b"skills/node_modules") {
                        join(&g.dropped_dir(b"skills"), b"huge.bin")
                    } else {
                        rel
                    };
                    let rel = g.file(&rel, &data, 0o644, false);
                    g.note(format!("a file of 2 MiB + 1 at the dropped {}", show(&rel)));
                }
                (_, 0) => {
                    // plugin.json itself, padded with JSON whitespace.
                    let rel = b".claude-plugin/plugin.json";
                    let mut text = fs::read(g.abs(rel)).expect("read plugin.json");
                    text.resize(size as usize, b' ');
                    g.rewrite(rel, &text);
                    g.note(format!("plugin.json padded to {size} bytes"));
                }
                _ => {
                    let top = *g.rng.pick(&components);
                    let at = g.live_dir_under(top);
                    let rel = g.file(&join(&at, b"big.bin"), &data, 0o644, true);
                    g.note(format!("a file of {size} bytes at {}", show(&rel)));
                }
            }
        }
        S::NonUtf8Name => {
            let top = *g.rng.pick(&components);
            let at = g.live_dir_under(top);
            let name: &[u8] = g.rng.pick::<&[u8]>(&[
                &b"caf\xe9.md"[..],
                &b"\xff\xfe"[..],
                &b"ok-\x80.txt"[..],
                &b"\xed\xa0\x80.md"[..],
                &b"\xc0\xaf"[..],
            ]);
            let rel = g.file(&join(&at, name), b"latin-1 name\n", 0o644, true);
            g.note(format!("non-UTF-8 file name {}", show(&rel)));
        }
        S::RootSpelling => {
            let spelled = *g.rng.pick(&["/", "/.", "/./", "//", "/./."]);
            let mut os = root.as_os_str().to_os_string();
            os.push(spelled);
            dir = PathBuf::from(os);
            g.note(format!("root passed as <root>{spelled}"));
        }
        S::RootSymlink => {
            let link = sibling(root, "-link");
            symlink(root, &link).expect("root symlink");
            dir = link;
            g.note("root passed through a symlink");
        }
        S::RootDotDot => {
            dir = root.join("skills/..");
            g.note("root passed as <root>/skills/..");
        }
        S::RootDoubleSlash => {
            let mut os = OsString::from("/");
            os.push(root.as_os_str());
            dir = PathBuf::from(os);
            g.note("root passed as /<root> (leading //: Python's resolve() differs)");
        }
        S::RootFile => {
            dir = root.join(".claude-plugin/plugin.json");
            g.note("root passed is a file");
        }
        S::RootMissing => {
            dir = root.join("no-such-dir");
            g.note("root passed does not exist");
        }
        S::RootAncestorSymlink => {
            let parent = root.parent().expect("root has a parent");
            let link = sibling(root, "-parent-link");
            symlink(parent, &link).expect("parent symlink");
            dir = link.join(root.file_name().expect("root name"));
            g.note("root passed through a symlink to its parent (<root>-parent-link/<name>)");
        }
        _ => {}
    }

    // -- size-dependent limits (last, so the counts are final) ------------------
    match scenario {
        S::Files2048 | S::Files2049 => {
            let target = if scenario == S::Files2048 {
                MAX_FILES
            } else {
                MAX_FILES + 1
            };
            g.fill_count(target);
            g.note(format!("{target} files"));
        }
        S::Total16Mib | S::Total16MibPlus1 => {
            let target = if scenario == S::Total16Mib {
                MAX_TOTAL_BYTES
            } else {
                MAX_TOTAL_BYTES + 1
            };
            g.fill_bytes(target);
            g.note(format!("{target} bytes in total"));
        }
        _ => {}
    }

    // -- read-only directories (last: nothing is written after) -----------------
    if g.rng.chance(12) {
        let mut dirs = Vec::new();
        for top in &components {
            dirs.extend(g.live_dirs(top));
        }
        if !dirs.is_empty() {
            for _ in 0..g.rng.range(1, 3) {
                let d = g.rng.pick(&dirs).clone();
                g.ro_dirs.push(d);
            }
            if g.rng.chance(30) {
                g.ro_dirs.push(Vec::new());
            }
            for d in g.ro_dirs.clone() {
                fs::set_permissions(g.abs(&d), fs::Permissions::from_mode(0o555))
                    .expect("chmod dir");
            }
            g.note(format!("{} read-only dirs", g.ro_dirs.len()));
        }
    }

    let description = g.notes.join("; ");
    Case {
        seed,
        version,
        dir,
        description,
        broken: scenario.breaks().then(|| format!("{scenario:?}")),
        files: g.files,
        bytes: g.bytes,
    }
}
