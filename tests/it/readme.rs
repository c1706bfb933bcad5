//! What README.md and docs/ tell a newcomer holds: every command line of the
//! README's "Use" section runs against a fresh store, with real inputs in
//! place of its placeholders, and succeeds; the set-up prints the digest the
//! README names; the routes to a binary build with the lock file; the
//! README names every package the test script installs; the skipped-checks
//! list names every ignored test; and the lines docs/audit.md and
//! docs/harness.md quote are what cestore prints.
//!
//! The "Use" block is read as a grammar: `[X]` is optional, `A | B` are
//! alternatives (an alternative that starts with a flag continues the
//! subcommand of the first; one that starts with a word is a subcommand of
//! its own), `A|B` inside a word are alternatives of that word, `X...` is X
//! once or more, and `;` runs the next command in the same store. Every
//! combination runs, each in a fresh store; an UPPER-CASE word is a
//! placeholder that [`Fixture::value`] must know.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::git::{commit_all, git, init};
use crate::util::{self, assert_ok, parse_json, run_within, write, TestEnv};

/// The repository's root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the repository, as text.
fn read(rel: &str) -> String {
    let path = root().join(rel);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The lines of `text` from the heading `heading` (a whole line) to the next
/// heading of the same or a higher level.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut lines = text.lines().skip_while(|l| *l != heading);
    assert!(lines.next().is_some(), "no heading {heading:?}");
    lines
        .take_while(|l| {
            let hashes = l.chars().take_while(|c| *c == '#').count();
            !(hashes > 0 && hashes <= level && l[hashes..].starts_with(' '))
        })
        .collect()
}

/// The code blocks (```LANG ... ```) of `lines` whose language is `lang`.
fn code_blocks(lines: &[&str], lang: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in lines {
        match current.as_mut() {
            None if line.trim_start().starts_with("```") => {
                current = (line.trim_start().trim_start_matches('`') == lang).then(Vec::new);
                if current.is_none() {
                    // Skip a block of another language up to its end.
                    current = Some(vec!["\u{0}skip".to_string()]);
                }
            }
            None => {}
            Some(block) if line.trim_start().starts_with("```") => {
                if block.first().map(String::as_str) != Some("\u{0}skip") {
                    blocks.push(std::mem::take(block));
                }
                current = None;
            }
            Some(block) => block.push(line.to_string()),
        }
    }
    assert!(current.is_none(), "a code block is not closed");
    blocks
}

/// A line without its comment (from a `#` that starts a word).
fn uncommented(line: &str) -> &str {
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        if c == '#' && prev.is_whitespace() {
            return line[..i].trim_end();
        }
        prev = c;
    }
    line.trim_end()
}

// ---------------------------------------------------------------------------
// The grammar of a documented command line
// ---------------------------------------------------------------------------

/// A part of a documented command line.
#[derive(Debug)]
enum Part {
    /// A word, or the alternatives of one (`PATH|DIR|GLOB`, `A[B]`).
    Word(Vec<String>),
    /// `[ ... | ... ]`: alternatives, any of them or none.
    Optional(Vec<Vec<Part>>),
}

/// The alternatives one word stands for: `X...` is X; `A|B|C` each of A, B,
/// C; `PRE[IN]POST` both PREPOST and PREINPOST.
fn word_alternatives(word: &str) -> Vec<String> {
    let word = word.strip_suffix("...").unwrap_or(word);
    if let (Some(open), Some(close)) = (word.find('['), word.rfind(']')) {
        if open > 0 && close > open {
            let (pre, inner, post) = (&word[..open], &word[open + 1..close], &word[close + 1..]);
            return vec![format!("{pre}{post}"), format!("{pre}{inner}{post}")];
        }
    }
    word.split('|').map(str::to_string).collect()
}

/// The tokens of a command: words, with `[`, `]` and a lone `|` apart.
fn tokens(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in command.split_whitespace() {
        let mut word = word;
        while let Some(rest) = word.strip_prefix('[') {
            out.push("[".to_string());
            word = rest;
        }
        let mut closing = 0;
        while !word.contains('[') && word.ends_with(']') {
            word = &word[..word.len() - 1];
            closing += 1;
        }
        if !word.is_empty() && word != "..." {
            out.push(word.to_string());
        }
        out.extend(std::iter::repeat_n("]".to_string(), closing));
    }
    out
}

/// Parses tokens up to a `]` (or the end) into alternatives split at `|`.
fn alternatives(tokens: &[String], at: &mut usize) -> Vec<Vec<Part>> {
    let mut alts = vec![Vec::new()];
    while *at < tokens.len() {
        let token = &tokens[*at];
        *at += 1;
        match token.as_str() {
            "]" => return alts,
            "|" => alts.push(Vec::new()),
            "[" => {
                let inner = alternatives(tokens, at);
                alts.last_mut()
                    .expect("an alternative")
                    .push(Part::Optional(inner));
            }
            word => alts
                .last_mut()
                .expect("an alternative")
                .push(Part::Word(word_alternatives(word))),
        }
    }
    alts
}

/// Every argument list a sequence of parts stands for.
fn expand(parts: &[Part]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for part in parts {
        let choices: Vec<Vec<String>> = match part {
            Part::Word(alts) => alts.iter().map(|w| vec![w.clone()]).collect(),
            Part::Optional(alts) => std::iter::once(Vec::new())
                .chain(alts.iter().flat_map(|a| expand(a)))
                .collect(),
        };
        out = out
            .iter()
            .flat_map(|head| {
                choices.iter().map(move |c| {
                    let mut v = head.clone();
                    v.extend(c.iter().cloned());
                    v
                })
            })
            .collect();
    }
    out
}

/// The argument lists (after `cestore`) one documented command stands for.
fn command_variants(command: &str, line: &str) -> Vec<Vec<String>> {
    let rest = command.trim().strip_prefix("cestore ").unwrap_or_else(|| {
        panic!(
            "README.md's Use section: {command:?} (in {line:?}) does not start with `cestore `: \
             the section's blocks hold cestore command lines only"
        )
    });
    let toks = tokens(rest);
    let mut at = 0;
    let alts = alternatives(&toks, &mut at);
    assert_eq!(at, toks.len(), "an unmatched `]` in {line:?}");
    let mut out = Vec::new();
    let mut subcommand: Option<String> = None;
    for alt in alts {
        let mut variants = expand(&alt);
        let starts_with_word = matches!(alt.first(), Some(Part::Word(w)) if !w[0].starts_with('-'));
        if starts_with_word {
            if let Some(Part::Word(w)) = alt.first() {
                subcommand = Some(w[0].clone());
            }
        } else {
            let sub = subcommand
                .clone()
                .unwrap_or_else(|| panic!("{line:?}: an alternative before any subcommand"));
            for v in &mut variants {
                v.insert(0, sub.clone());
            }
        }
        out.extend(variants);
    }
    assert!(
        out.len() <= 64,
        "{line:?} stands for {} command lines: split it",
        out.len()
    );
    out
}

/// The commands one documented line runs in one store: each `;`-separated
/// command's variants, paired by index (the last variant repeated), so that
/// every variant of every command runs once.
fn line_runs(line: &str) -> Vec<Vec<Vec<String>>> {
    let commands: Vec<Vec<Vec<String>>> =
        line.split(';').map(|c| command_variants(c, line)).collect();
    let n = commands.iter().map(Vec::len).max().unwrap_or(0);
    (0..n)
        .map(|i| {
            commands
                .iter()
                .map(|variants| variants[i.min(variants.len() - 1)].clone())
                .collect()
        })
        .collect()
}

/// The placeholders of a word: maximal runs of `A-Z`, digits, `_` and
/// inner dots (`X.Y.Z`) that start with a capital letter, with where each
/// stands in the word.
fn placeholders(word: &str) -> Vec<(usize, usize)> {
    let bytes = word.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts =
            bytes[i].is_ascii_uppercase() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len()
            && (bytes[j].is_ascii_uppercase()
                || bytes[j].is_ascii_digit()
                || bytes[j] == b'_'
                || (bytes[j] == b'.' && j + 1 < bytes.len() && bytes[j + 1].is_ascii_uppercase()))
        {
            j += 1;
        }
        out.push((i, j));
        i = j;
    }
    out
}

#[test]
fn the_grammar_expands_as_the_use_section_means_it() {
    let runs = |line: &str| -> Vec<Vec<String>> {
        line_runs(line)
            .into_iter()
            .map(|cmds| cmds.into_iter().map(|c| c.join(" ")).collect())
            .collect()
    };
    assert_eq!(
        runs("cestore list | log | diff OLD NEW"),
        [["list"], ["log"], ["diff OLD NEW"]]
    );
    assert_eq!(
        runs("cestore verify [DIGEST...] | --tree DIR D"),
        [["verify"], ["verify DIGEST"], ["verify --tree DIR D"]]
    );
    assert_eq!(
        runs("cestore show DIGEST [--files | --manifest]"),
        [
            ["show DIGEST"],
            ["show DIGEST --files"],
            ["show DIGEST --manifest"]
        ]
    );
    assert_eq!(
        runs("cestore find --object SHA | --path PATH|DIR"),
        [
            ["find --object SHA"],
            ["find --path PATH"],
            ["find --path DIR"]
        ]
    );
    assert_eq!(
        runs("cestore push DIGEST REGISTRY/REPO[:TAG]; cestore pull REGISTRY/REPO:TAG"),
        [
            ["push DIGEST REGISTRY/REPO", "pull REGISTRY/REPO:TAG"],
            ["push DIGEST REGISTRY/REPO:TAG", "pull REGISTRY/REPO:TAG"]
        ]
    );
    assert_eq!(
        runs("cestore stage --arm ARM ... --plugin-dir DIR"),
        [["stage --arm ARM --plugin-dir DIR"]]
    );
    assert_eq!(runs("cestore audit F [--a] [--b X]").len(), 4);
    assert_eq!(placeholders("REGISTRY/REPO:TAG").len(), 3);
    assert_eq!(placeholders("X.Y.Z"), [(0, 5)]);
    assert_eq!(placeholders("results.jsonl"), []);
    assert_eq!(placeholders("--plugin-version"), []);
}

// ---------------------------------------------------------------------------
// Real inputs for the placeholders
// ---------------------------------------------------------------------------

/// The example release's version and the digest README.md gives for it.
const VERSION: &str = "1.0.0";
const EXAMPLE_DIGEST: &str = "b6d4a715700e4339938995864a004d5541fd8e210ea48d158e0bbca677dd028b";
/// The git tag of the example release in [`Inputs::repo`].
const GIT_TAG: &str = "compound-engineering-v1.0.0";
const PLUGIN: &str = "compound-engineering";

/// What every run reads and never changes: a git repository holding the
/// example release as a marketplace's plugin, committed and tagged.
struct Inputs {
    _env: TestEnv,
    /// The repository.
    repo: PathBuf,
    /// `plugins/compound-engineering` in its work tree: a copy of
    /// `examples/ce-plugin-1.0.0`.
    plugin: PathBuf,
    /// The registry (`127.0.0.1:PORT`, plain HTTP), when one is set.
    registry: Option<String>,
    /// An address where nothing listens, for push and pull without one.
    closed: String,
}

/// Copies a directory tree, keeping each file's mode.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create a directory");
    for entry in fs::read_dir(from).expect("read a directory") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

impl Inputs {
    fn new(test: &str) -> Inputs {
        let env = TestEnv::new();
        let repo = env.path("ce-plugin-repo");
        init(&repo);
        let plugin = repo.join("plugins").join(PLUGIN);
        copy_tree(&root().join("examples/ce-plugin-1.0.0"), &plugin);
        write(
            &repo.join(".claude-plugin/marketplace.json"),
            serde_json::json!({
                "name": "market",
                "plugins": [{"name": PLUGIN, "source": format!("./plugins/{PLUGIN}")}],
            })
            .to_string(),
        );
        commit_all(&repo, "the example release");
        git(&repo, &["tag", GIT_TAG]);
        // Without a registry, push and pull run against a closed port (exit 8).
        let registry = crate::remote::registry(&format!(
            "{test} (push and pull against a registry; run against a closed port instead)"
        ));
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
            let port = listener.local_addr().expect("its address").port();
            format!("127.0.0.1:{port}")
        };
        Inputs {
            _env: env,
            repo,
            plugin,
            registry,
            closed,
        }
    }
}

/// One run's store and what it has made so far, each made when a
/// placeholder first needs it.
struct Fixture<'a> {
    inputs: &'a Inputs,
    env: TestEnv,
    /// The example release's digest, once ingested.
    digest: Option<String>,
    /// A view of it checked out (and recorded).
    view: Option<PathBuf>,
    /// A bundle of it.
    bundle: Option<PathBuf>,
    /// A key pair (private key path), which has signed the snapshot.
    key: Option<PathBuf>,
    /// A second snapshot, for `diff`.
    other: Option<String>,
    /// Paths handed out as new.
    fresh: usize,
}

impl<'a> Fixture<'a> {
    fn new(inputs: &'a Inputs) -> Fixture<'a> {
        let env = TestEnv::new().within(Duration::from_secs(120));
        // A results file, as the harness writes it, naming the example release.
        write(
            &env.path("results.jsonl"),
            format!(
                "{}\n",
                serde_json::json!({
                    "arm": "ce_review",
                    "ce_plugin_version": VERSION,
                    "ce_plugin_manifest_digest": EXAMPLE_DIGEST,
                })
            ),
        );
        Fixture {
            inputs,
            env,
            digest: None,
            view: None,
            bundle: None,
            key: None,
            other: None,
            fresh: 0,
        }
    }

    /// Runs `cestore ARGS --store STORE` in the run's directory.
    fn run(&self, args: &[String]) -> Output {
        let mut cmd = self.env.cmd(args);
        cmd.current_dir(&self.env.base);
        run_within(cmd, Duration::from_secs(120), "cestore")
    }

    /// Runs a setting-up command, which must succeed.
    fn setup(&self, args: &[&str]) -> Output {
        let out = self.run(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert_ok(&out);
        out
    }

    fn path(&mut self, name: &str) -> String {
        self.fresh += 1;
        util::s(&self.env.path(&format!("{name}-{}", self.fresh)))
    }

    fn digest(&mut self) -> String {
        if self.digest.is_none() {
            let plugin = util::s(&self.inputs.plugin);
            let out = self.setup(&["ingest", &plugin, "--version", VERSION, "--json"]);
            let digest = util::digest_of(&parse_json(&out));
            assert_eq!(digest, EXAMPLE_DIGEST, "the example release's digest");
            self.digest = Some(digest);
        }
        self.digest.clone().expect("a digest")
    }

    fn view(&mut self) -> String {
        if self.view.is_none() {
            let digest = self.digest();
            let dest = self.path("view");
            self.setup(&["checkout", &digest, &dest]);
            self.view = Some(PathBuf::from(dest));
        }
        util::s(self.view.as_ref().expect("a view"))
    }

    fn bundle(&mut self) -> String {
        if self.bundle.is_none() {
            let digest = self.digest();
            let file = self.path("bundle.tar");
            self.setup(&["export", &digest, "-o", &file]);
            self.bundle = Some(PathBuf::from(file));
        }
        util::s(self.bundle.as_ref().expect("a bundle"))
    }

    fn key(&mut self) -> String {
        if self.key.is_none() {
            let digest = self.digest();
            let key = self.path("key");
            self.setup(&["key", "generate", &key]);
            self.setup(&["sign", &digest, "--key", &key]);
            self.key = Some(PathBuf::from(key));
        }
        util::s(self.key.as_ref().expect("a key"))
    }

    fn other(&mut self) -> String {
        if self.other.is_none() {
            let src = self.env.path("other-release");
            copy_tree(&self.inputs.plugin, &src);
            write(&src.join("skills/ce-plan/notes.md"), "a note\n");
            let out = self.setup(&["ingest", &util::s(&src), "--version", VERSION, "--json"]);
            self.other = Some(util::digest_of(&parse_json(&out)));
        }
        self.other.clone().expect("another digest")
    }

    fn registry(&self) -> String {
        match &self.inputs.registry {
            Some(r) => r.clone(),
            None => self.inputs.closed.clone(),
        }
    }

    /// The input `name` stands for in a command of `subcommand`, or `None`
    /// when the test does not know the placeholder.
    fn value(&mut self, subcommand: &str, name: &str) -> Option<String> {
        let v = match (subcommand, name) {
            // Inside a snapshot, for `find --path`.
            ("find", "PATH") => "skills/ce-plan/SKILL.md".to_string(),
            ("find", "DIR") => "skills/ce-plan".to_string(),
            ("find", "GLOB") => "skills/*/SKILL.md".to_string(),
            // A tree to compare with a snapshot.
            ("verify", "DIR") => self.view(),
            // A sandbox_copy path of the repository.
            ("ingest", "REL") => format!("plugins/{PLUGIN}"),
            // Paths a command makes, and so must not exist yet.
            ("checkout", "DEST") => self.path("dest"),
            ("materialize", "CLONE") => {
                let clone = self.path("clone");
                fs::create_dir(&clone).expect("create a clone");
                clone
            }
            ("materialize", "TASK_DIGEST") => {
                self.digest();
                crate::tree_views::record_sample(&self.env).task
            }
            // A checkout holding a GitNexus runtime the seed's rules accept.
            ("ingest", "CHECKOUT") => {
                let checkout = self.path("checkout");
                util::gitnexus_harness(Path::new(&checkout), "1.6.9");
                checkout
            }
            ("export", "FILE") => self.path("export.tar"),
            ("key", "FILE") => self.path("new-key"),
            // Paths a command reads.
            ("import", "FILE") => self.bundle(),
            ("sign", "FILE") => self.key(),
            ("push" | "pull", "REGISTRY") => self.registry(),
            ("push" | "pull", "REPO") => format!(
                "cestore-it/readme-{}",
                util::sha_hex(self.env.base.to_string_lossy().as_bytes())[..12].to_owned()
            ),
            // A tag push adds; without one, pull takes the tag push always makes.
            ("push", "TAG") => VERSION.to_string(),
            ("pull", "TAG") => format!("sha256-{}", self.digest()),
            (_, "DEST") => self.view(),
            (_, "DIR") => util::s(&self.inputs.plugin),
            (_, "REPO") => util::s(&self.inputs.repo),
            (_, "TAG") => GIT_TAG.to_string(),
            (_, "PATH") => format!("plugins/{PLUGIN}"),
            (_, "NAME") => PLUGIN.to_string(),
            (_, "X.Y.Z" | "V") => VERSION.to_string(),
            (_, "DIGEST" | "D" | "OLD") => self.digest(),
            (_, "NEW") => self.other(),
            (_, "SHA") => util::sha_hex(
                &fs::read(self.inputs.plugin.join(".claude-plugin/plugin.json"))
                    .expect("read plugin.json"),
            ),
            (_, "ARM") => "ce_review".to_string(),
            (_, "PUB") => format!("{}.pub", self.key()),
            (_, "STORE") => util::s(&self.env.store),
            _ => return None,
        };
        Some(v)
    }
}

/// The argument list with each placeholder replaced (the same placeholder
/// keeps its first value within one line, in `bound`).
fn substitute(
    fx: &mut Fixture,
    args: &[String],
    bound: &mut BTreeMap<String, String>,
    line: &str,
) -> Vec<String> {
    let subcommand = args.first().cloned().unwrap_or_default();
    args.iter()
        .map(|word| {
            let mut out = String::new();
            let mut last = 0;
            for (start, end) in placeholders(word) {
                let name = &word[start..end];
                let value = match bound.get(name) {
                    Some(v) => v.clone(),
                    None => {
                        let v = fx.value(&subcommand, name).unwrap_or_else(|| {
                            panic!(
                                "README.md's Use section: {line:?} has the placeholder {name} \
                                 (in `cestore {subcommand} ...`), which tests/it/readme.rs does \
                                 not know: teach it in `Fixture::value` the real input {name} \
                                 stands for, for `{subcommand}` or for every command"
                            )
                        });
                        bound.insert(name.to_string(), v.clone());
                        v
                    }
                };
                out.push_str(&word[last..start]);
                out.push_str(&value);
                last = end;
            }
            out.push_str(&word[last..]);
            out
        })
        .collect()
}

/// The README's "Use" command lines, without comments.
fn use_lines() -> Vec<String> {
    let readme = read("README.md");
    let lines = section(&readme, "## Use");
    let blocks = code_blocks(&lines, "sh");
    assert!(
        !blocks.is_empty(),
        "README.md's Use section has no ```sh block"
    );
    blocks
        .into_iter()
        .flatten()
        .map(|l| uncommented(&l).to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn every_use_block_runs_against_a_fresh_store() {
    let test = "readme::every_use_block_runs_against_a_fresh_store";
    let inputs = Inputs::new(test);
    let lines = use_lines();
    let mut ran = 0;
    let mut subcommands = BTreeSet::new();
    for line in &lines {
        for run in line_runs(line) {
            let mut fx = Fixture::new(&inputs);
            let mut bound = BTreeMap::new();
            let first = run[0][0].as_str();
            // A fresh store holds the example release, but for the commands
            // that put a release there.
            if !matches!(first, "ingest" | "digest") {
                fx.digest();
            }
            for args in &run {
                let mut args = substitute(&mut fx, args, &mut bound, line);
                let sub = args[0].clone();
                subcommands.insert(sub.clone());
                let remote = matches!(sub.as_str(), "push" | "pull");
                if remote && inputs.registry.is_some() {
                    // The test registry speaks plain HTTP.
                    args.push("--plain-http".to_string());
                }
                let out = fx.run(&args);
                let shown = format!("`cestore {}` (from {line:?})", args.join(" "));
                if remote && inputs.registry.is_none() {
                    // Nothing listens there: the line parsed and was tried.
                    assert_eq!(
                        out.status.code(),
                        Some(8),
                        "{shown} against a closed port: {}",
                        util::describe(&out)
                    );
                } else {
                    assert!(
                        out.status.success(),
                        "{shown} failed: {}",
                        util::describe(&out)
                    );
                }
                if sub == "digest" {
                    assert!(!fx.env.store.exists(), "{shown} made a store");
                }
                ran += 1;
            }
        }
    }
    eprintln!("{} lines, {ran} commands", lines.len());
    // Every subcommand cestore has is in the section.
    let help = Command::new(util::bin())
        .arg("--help")
        .output()
        .expect("cestore --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let listed: BTreeSet<String> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect();
    assert!(listed.len() > 10, "cestore --help lists {listed:?}");
    let missing: Vec<_> = listed.difference(&subcommands).collect();
    assert!(
        missing.is_empty(),
        "README.md's Use section runs no `cestore {missing:?}`"
    );
}

#[test]
fn setup_prints_the_digest_the_readme_names() {
    let readme = read("README.md");
    let setup = section(&readme, "## Set-up").join("\n");
    assert!(
        setup.contains(EXAMPLE_DIGEST),
        "README.md's Set-up no longer names {EXAMPLE_DIGEST}"
    );
    assert!(
        setup.contains("ingest examples/ce-plugin-1.0.0 --version 1.0.0"),
        "README.md's Set-up no longer ingests the example"
    );
    let env = TestEnv::new();
    let out = env.run([
        util::os("ingest"),
        root().join("examples/ce-plugin-1.0.0").as_os_str(),
        util::os("--version"),
        util::os(VERSION),
    ]);
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().next(), Some(EXAMPLE_DIGEST), "{stdout}");
}

// ---------------------------------------------------------------------------
// The set-up and test routes
// ---------------------------------------------------------------------------

#[test]
fn every_route_to_a_binary_builds_with_the_lock_file() {
    let docs = ["README.md", "docs/python.md"];
    let mut installs = 0;
    for doc in docs {
        for line in read(doc).lines().filter(|l| l.contains("cargo install")) {
            installs += 1;
            assert!(
                line.contains("--locked"),
                "{doc}: `{line}` re-resolves every dependency: give it --locked"
            );
        }
    }
    assert!(installs > 0, "README.md gives no `cargo install` route");
    // pip and maturin: [tool.maturin] locked = true passes --locked to cargo.
    let pyproject = read("pyproject.toml");
    let table: Vec<&str> = pyproject
        .lines()
        .skip_while(|l| *l != "[tool.maturin]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .collect();
    assert!(
        table.iter().any(|l| l.replace(' ', "") == "locked=true"),
        "pyproject.toml's [tool.maturin] does not set locked = true: `pip install .` would \
         build on versions the tests never ran with"
    );
}

/// The packages `scripts/install-test-deps` may install (`want+=(PKG)`) and
/// those scripts/test installs from PyPI.
fn test_script_packages() -> Vec<String> {
    let mut out = Vec::new();
    for line in read("scripts/install-test-deps").lines() {
        let line = uncommented(line);
        let mut rest = line;
        while let Some(at) = rest.find("want+=(") {
            let after = &rest[at + "want+=(".len()..];
            let end = after.find(')').expect("want+=(...)");
            out.extend(after[..end].split_whitespace().map(str::to_string));
            rest = &after[end..];
        }
    }
    for line in read("scripts/test").lines() {
        let line = uncommented(line);
        if let Some(at) = line.find("pip\" install") {
            out.extend(
                line[at..]
                    .split_whitespace()
                    .skip(2)
                    .filter(|w| !w.starts_with('-') && !w.starts_with('"') && !w.starts_with('\\'))
                    .map(|w| w.trim_matches('\'').to_string()),
            );
        }
    }
    out
}

#[test]
fn the_readme_names_every_package_the_test_script_installs() {
    let packages = test_script_packages();
    for expected in ["bubblewrap", "e2fsprogs", "docker-registry", "maturin"] {
        assert!(
            packages.iter().any(|p| p == expected),
            "{expected} not found in {packages:?}"
        );
    }
    let readme = read("README.md");
    let setup = section(&readme, "## Set-up").join("\n");
    for package in &packages {
        assert!(
            setup.contains(&format!("`{package}`")),
            "README.md's Set-up does not name `{package}`, which scripts/test may install"
        );
    }
}

#[test]
fn a_venv_in_the_checkout_is_ignored_and_the_readme_makes_none_there() {
    let readme = read("README.md");
    for line in readme.lines().filter(|l| l.contains("-m venv")) {
        let dir = line
            .split("-m venv")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_default();
        assert!(
            dir.starts_with('/')
                || dir.starts_with('~')
                || dir.starts_with("..")
                || dir.starts_with('$'),
            "README.md makes a venv inside the repository: `{line}`"
        );
    }
    assert!(
        read(".gitignore").lines().any(|l| l.trim() == "/.venv/"),
        ".gitignore does not ignore /.venv/"
    );
    // In a git checkout, git agrees.
    if root().join(".git").exists() {
        let out = Command::new("git")
            .args(["check-ignore", "-q", ".venv/bin/python"])
            .current_dir(root())
            .status()
            .expect("git check-ignore");
        assert!(out.success(), "git does not ignore .venv/");
    }
}

#[test]
fn the_skipped_checks_list_names_every_ignored_test() {
    // This binary's own ignored tests, as cargo's --list prints them.
    let me = std::env::current_exe().expect("the test binary");
    let out = Command::new(&me)
        .args(["--list", "--ignored"])
        .output()
        .expect("list the ignored tests");
    assert_ok(&out);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let ignored: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .collect();
    assert!(
        ignored.contains(&"git::every_tag"),
        "git::every_tag is not ignored: {listed}"
    );
    let input = format!("     Running tests/it/main.rs ({})\n{listed}", me.display());
    let mut child = Command::new(root().join("scripts/ignored-tests"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run scripts/ignored-tests");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("write its input");
    }
    let out = util::finish(child, Duration::from_secs(60), "scripts/ignored-tests");
    assert_ok(&out);
    let lines = String::from_utf8_lossy(&out.stdout).into_owned();
    for name in &ignored {
        let line = lines
            .lines()
            .find(|l| l.starts_with(&format!("skipping {name}: ignored (")))
            .unwrap_or_else(|| panic!("no line for {name} in:\n{lines}"));
        assert!(
            line.ends_with(&format!(
                "run it with: cargo test --test it {name} -- --ignored --exact --nocapture"
            )),
            "{line}"
        );
        assert!(!line.contains("(no reason given)"), "{line}");
    }
    assert_eq!(lines.lines().count(), ignored.len(), "{lines}");
}

// ---------------------------------------------------------------------------
// What docs/ quote
// ---------------------------------------------------------------------------

#[test]
fn audit_doc_quotes_what_verify_prints() {
    let env = TestEnv::new();
    let digest = env.ingest_digest(&root().join("examples/ce-plugin-1.0.0"), VERSION);
    let out = env.run(["verify", &digest[..8]]);
    assert_ok(&out);
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        printed,
        "verified 1 snapshot, 5 objects (313 bytes re-hashed): no problems\n"
    );
    let doc = read("docs/audit.md");
    let shown = "```sh\ncestore verify b6d4a715\n```\n";
    let at = doc
        .find(shown)
        .expect("docs/audit.md shows `cestore verify b6d4a715`");
    let after = &doc[at + shown.len()..];
    let quoted = code_blocks(&after.lines().collect::<Vec<_>>(), "text")
        .into_iter()
        .next()
        .expect("a ```text block after it");
    assert_eq!(quoted.join("\n") + "\n", printed);
    assert!(!after[..after.find("### 4").unwrap_or(after.len())].contains("Silent"));
}

#[test]
fn harness_doc_lists_the_seven_gitnexus_mounts() {
    let doc = read("docs/harness.md");
    let lines = section(&doc, "## The GitNexus runtime's seven mounts");
    let rows: Vec<(String, String)> = lines
        .iter()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(|c| c.trim().trim_matches('`')).collect();
            (cells[1].to_string(), cells[2].to_string())
        })
        .collect();
    assert_eq!(rows.len(), 7, "{rows:?}");
    // The doc's smallest root, made by its own commands.
    let env = TestEnv::new();
    let harness = env.path("harness");
    let script = code_blocks(&lines, "sh")
        .into_iter()
        .next()
        .expect("a ```sh block making the smallest root")
        .join("\n");
    let status = Command::new("sh")
        .args(["-euc", &script.replace("ROOT", &util::s(&harness))])
        .status()
        .expect("run sh");
    assert!(status.success(), "the doc's commands failed:\n{script}");
    let json = env.json([
        util::os("mounts"),
        util::os("--arm"),
        util::os("baseline"),
        util::os("--gitnexus-root"),
        harness.as_os_str(),
        util::os("--json"),
    ]);
    // Each mount's source lies in the runtime's view in the store, at the
    // component's path.
    let view = std::fs::canonicalize(json["gitnexus_runtime_view"].as_str().expect("a view"))
        .expect("the view");
    let mounts: Vec<(String, String)> = json["mounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .map(|m: &Value| {
            let source = m["source"].as_str().expect("source");
            let rel = Path::new(source)
                .strip_prefix(&view)
                .unwrap_or_else(|_| panic!("{source} is not under the view"));
            (
                util::s(rel),
                m["target"].as_str().expect("target").to_string(),
            )
        })
        .collect();
    assert_eq!(mounts, rows);
    // And the oracle's, where present.
    if let Some(o) = util::oracle_json([util::os("gitnexus-mounts"), harness.as_os_str()]) {
        let theirs: Vec<(String, String)> = o["mounts"]
            .as_array()
            .expect("the oracle's mounts")
            .iter()
            .map(|m| {
                let source = m["source"].as_str().expect("source");
                let rel = Path::new(source)
                    .strip_prefix(&harness)
                    .expect("under the root");
                (
                    util::s(rel),
                    m["target"].as_str().expect("target").to_string(),
                )
            })
            .collect();
        assert_eq!(theirs, rows);
    } else {
        util::skip(
            "readme::harness_doc_lists_the_seven_gitnexus_mounts (against the oracle)",
            "../shared/reference/oracle.py is not present beside this checkout",
        );
    }
}
