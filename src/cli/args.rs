//! The command line's arguments: clap's definitions, and each command's
//! typed options made from them.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::cmd;
use crate::error::{Error, Result};
use crate::profile::ce::rules as ce_rules;
use crate::store::views::build as view;
use crate::store::views::copies as view_copies;

/// A content-addressed snapshot store for pinned plugin releases.
///
/// Ingest a release once, check out frozen read-only views of it instantly,
/// and audit any run by its manifest digest.
#[derive(Debug, Parser)]
#[command(
    name = "cestore",
    version,
    max_term_width = 100,
    after_help = exit_codes_help(),
    disable_help_subcommand = true
)]
pub struct Cli {
    /// The store directory [default: $CESTORE_DIR, else $XDG_DATA_HOME/cestore,
    /// else ~/.local/share/cestore]
    #[arg(long, global = true, value_name = "STORE")]
    pub store: Option<PathBuf>,

    /// Print one JSON object on stdout instead of text, for every outcome,
    /// command-line errors included (one per phase with `stage --hold`; see
    /// docs/json.md).
    #[arg(long, global = true)]
    pub json: bool,

    /// Use a store owned by another user or writable by group or others
    /// (also CESTORE_TRUST_STORE=1); whoever can write a store decides what
    /// its views show.
    #[arg(long, global = true)]
    pub trust_store: bool,

    /// Shorten digests in the text of list, log, show, find and audit to
    /// their shortest unique prefix of at least 12 hex digits, piped too (on
    /// a terminal narrower than 120 columns they are short anyway); every
    /// command takes such a prefix back. `--json` always gives full digests.
    #[arg(long, global = true)]
    pub short: bool,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a plugin release as the reference does, and store it; with
    /// --profile tree|dependency|task|runtime, capture a task's trees as the
    /// benchmark harness does, or the GitNexus runtime.
    #[command(after_help = PROFILE_INGEST_HELP)]
    Ingest(IngestArgs),
    /// `ingest --profile tree|dependency|task|runtime`: capture a task's
    /// trees as the benchmark harness does, or the GitNexus runtime, and
    /// store them (the command line routes `ingest --profile` here).
    #[command(
        name = "ingest-profile",
        hide = true,
        override_usage = "cestore ingest --profile <tree|dependency|task|runtime> <REPO> [OPTIONS]\n       \
                          cestore ingest --profile environment --member ROLE=DIGEST... [OPTIONS]"
    )]
    IngestProfile(ProfileIngestArgs),
    /// Validate a plugin release as ingest does and print its manifest
    /// digest, storing nothing (no store is opened or created).
    Digest(ReleaseArgs),
    /// Show what the store knows about a snapshot.
    Show(ShowArgs),
    /// Materialise a frozen read-only view of a snapshot at a new path.
    Checkout(CheckoutArgs),
    /// Remove a view made by checkout; never changes a file's mode.
    Discard(DiscardArgs),
    /// Replace each root a task snapshot declared (`sandbox_copy`) in a
    /// clone with a writable copy of its tree, as the benchmark harness's
    /// materialize does; a failure leaves the clone as it was.
    ///
    /// Files are reflinks of their objects where the filesystem has them,
    /// else copies, bounded together by --max-fallback-bytes; files 0600,
    /// directories 0700. A symlink at or above a root, or a root that is
    /// neither a file nor a directory, is refused (exit 3) in the harness's
    /// words.
    Materialize(MaterializeArgs),
    /// Stage a run: check the arms as the reference does, ingest the release
    /// (instant when stored), make its view, and print every arm's mounts.
    Stage(StageArgs),
    /// List the snapshots in the store.
    List(ListArgs),
    /// List ingest events: when, from where, by whom, with which cestore.
    Log(LogArgs),
    /// List the snapshots that contain a content or a path.
    ///
    /// --path takes an exact path, a directory (skills/ce-plan or
    /// skills/ce-plan/: every file below it), or a glob when it holds * or ?:
    /// `*` matches within one path component, `?` one character, and a `**`
    /// component any number of components (skills/**/SKILL.md). Exits 1 when
    /// nothing matches.
    Find(FindArgs),
    /// Check every manifest digest of a results file (JSON Lines, as the
    /// harness writes results.jsonl) against the store, and every row
    /// against the arm rule. Exits 1 on any problem.
    ///
    /// Per digest: the version(s) the rows claim against the snapshot's, the
    /// rows, arms, first and last lines, and a status: ok, unknown (not in
    /// the store), version-mismatch, damaged (--verify) or pulled
    /// (--registry). Per row: a ce_* arm (ce_workflow, ce_workflow_direct,
    /// ce_review) must carry a digest and a version, any other arm neither
    /// (arm-mismatch); a digest must be 64 lowercase hex characters
    /// (malformed-digest). A row is a line Python's json.loads reads as an
    /// object (NaN, Infinity, lone surrogates and all); other lines
    /// (blank ones aside) are malformed: listed, and failing the audit, as
    /// any digest in them was not audited (--allow-malformed passes them).
    /// The audit also fails when no line is a row or no
    /// row carries any of the three fields. Values taken from rows are cut
    /// to 80 characters. FILE may be - (standard input); FILE.gz and
    /// FILE.zst are decompressed.
    Audit(AuditArgs),
    /// Re-hash objects and check the catalogue; or, with --tree, audit a
    /// directory against a snapshot. Exits 1 on any problem.
    Verify(VerifyArgs),
    /// List the files added, removed, or changed in content or exec bit
    /// between two snapshots.
    Diff(DiffArgs),
    /// Forget a snapshot; refuses while views of it are recorded.
    Rm(RmArgs),
    /// Remove objects no snapshot uses, stale temporary files and orphan
    /// shared views.
    Gc(GcArgs),
    /// Rebuild the catalogue from the manifests kept in the store: after the
    /// catalogue was lost, emptied or damaged, or disagrees with them.
    ///
    /// An unusable catalogue is set aside (renamed, never deleted) and what
    /// it still holds is salvaged. Nothing else is removed.
    Recover,
    /// Print the path of the snapshot's shared frozen view in the store,
    /// making it once when absent.
    Path(PathArgs),
    /// Print the read-only mounts one benchmark arm's sandbox gets.
    ///
    /// The CE arms (ce_workflow, ce_workflow_direct, ce_review) get the plugin
    /// view at /opt/compound-engineering-plugin and need --view or --digest;
    /// any other arm gets none. With --gitnexus-root, the seven GitNexus
    /// runtime mounts follow, for every arm.
    ///
    /// --view DIR must be a view cestore recorded (by checkout or stage) or a
    /// snapshot's shared view; the report gives its manifest digest, and with
    /// --digest D as well the view must be of D. --digest D alone mounts D's
    /// shared view (made by `cestore path`). --unchecked mounts any directory,
    /// with no digest.
    ///
    /// Output: text by default; the JSON report with --json or --format json
    /// (the same object either way); bubblewrap arguments with --format
    /// bwrap0, each followed by a NUL byte, for `bwrap --args FD`, as in
    /// `bwrap --args 3 ... 3< <(cestore mounts --arm ARM --view DIR --format bwrap0)`;
    /// or with --format bwrap, shell-quoted on one line, for a shell's `eval`
    /// (never an unquoted `$(...)`, which splits paths with spaces). Neither
    /// bwrap form can be combined with --json. Errors are printed as JSON
    /// only with --json.
    Mounts(MountsArgs),
    /// Publish a stored snapshot to an OCI registry as
    /// REGISTRY/REPOSITORY:sha256-DIGEST, uploading only the blobs it lacks;
    /// with REGISTRY/REPOSITORY:TAG, under TAG (e.g. 3.23.1) as well.
    ///
    /// Credentials come from CESTORE_REGISTRY_TOKEN, or CESTORE_REGISTRY_USER and
    /// CESTORE_REGISTRY_PASSWORD, or $DOCKER_CONFIG/config.json (else
    /// ~/.docker/config.json); never from the command line. See docs/remote.md.
    Push(PushArgs),
    /// Take a snapshot from an OCI registry into the store, checking the
    /// manifest digest, the ingest rules and every blob's hash first.
    Pull(PullArgs),
    /// Write a snapshot to one portable bundle file: a tar of the canonical
    /// manifest and the objects, optionally zstd-compressed.
    Export(ExportArgs),
    /// Take a snapshot from a bundle made by export (tar or tar+zstd, told
    /// apart by their first bytes), checking every hash first.
    Import(ImportArgs),
    /// Make and use ed25519 signing keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Sign a stored snapshot: an attestation (a DSSE envelope of an in-toto
    /// statement with SLSA provenance) that vouches for its digest, kept
    /// beside it and carried by push, pull, export and import.
    Sign(SignArgs),
    /// List a snapshot's attestations: who signed, when, and with
    /// --trusted-key whether each vouches for the snapshot.
    Attestations(AttestationsArgs),
    /// Print the substituters: the registries checkout, path, stage and
    /// mounts fetch a full digest the store lacks from (STORE/substituters.json,
    /// or CESTORE_SUBSTITUTERS and CESTORE_SUBSTITUTER_TRUSTED_KEYS), with the
    /// keys trusted and the timeouts. See docs/remote.md.
    Substituters,
    /// List each kind of error, as `--json` names it, with its exit code.
    ExitCodes,
    /// Print the decisions bindings read: the plugin's constants, the CE
    /// arms, the bounds, the exact-version rule, the GitNexus pin, and the
    /// flag behind each keyword of the Python API.
    Rules,
    /// Print this message or the help of the given command.
    Help(HelpArgs),
}

/// The arguments of `help`.
#[derive(Debug, Args)]
pub struct HelpArgs {
    /// The command (and its subcommand) to print the help of.
    #[arg(value_name = "COMMAND")]
    pub(super) command: Vec<String>,
}

/// The `--help` text's line of exit codes, from the table.
fn exit_codes_help() -> String {
    format!(
        "Exit codes: {}; 128+N stage --hold ended by signal N \
         (`cestore exit-codes`; docs/exit-codes.md; JSON: docs/json.md).",
        crate::error::ErrorKind::code_summaries()
    )
}

impl Command {
    /// Whether the command works on a store (`digest`, `exit-codes`,
    /// `rules` and `help` do not).
    pub(super) fn needs_store(&self) -> bool {
        !matches!(
            self,
            Command::Digest(_)
                | Command::ExitCodes
                | Command::Rules
                | Command::Help(_)
                | Command::Key(_)
        )
    }
}

/// The bounds of a release's walk: the reference's by default, lower on request.
#[derive(Clone, Copy, Debug, Args)]
pub struct BoundsArgs {
    /// Refuse a release of more files than this (at most the default).
    #[arg(long, value_name = "N", default_value_t = ce_rules::MAX_FILES as u64,
          value_parser = clap::value_parser!(u64).range(0..=ce_rules::MAX_FILES as u64))]
    pub(super) max_files: u64,
    /// Refuse a file larger than this many bytes (at most the default).
    #[arg(long, value_name = "BYTES", default_value_t = ce_rules::MAX_FILE_BYTES,
          value_parser = clap::value_parser!(u64).range(0..=ce_rules::MAX_FILE_BYTES))]
    pub(super) max_file_bytes: u64,
    /// Refuse a release whose files hold more bytes than this together (at most the default).
    #[arg(long, value_name = "BYTES", default_value_t = ce_rules::MAX_TOTAL_BYTES,
          value_parser = clap::value_parser!(u64).range(0..=ce_rules::MAX_TOTAL_BYTES))]
    pub(super) max_total_bytes: u64,
    /// Refuse a relative path longer than this many bytes (at most the default).
    #[arg(long, value_name = "BYTES", default_value_t = ce_rules::MAX_PATH_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(0..=ce_rules::MAX_PATH_BYTES as u64))]
    pub(super) max_path_bytes: u64,
}

impl From<BoundsArgs> for ce_rules::Bounds {
    fn from(a: BoundsArgs) -> Self {
        // The parser keeps each value at or below the reference's bound.
        ce_rules::Bounds {
            files: usize::try_from(a.max_files).unwrap_or(ce_rules::MAX_FILES),
            file_bytes: a.max_file_bytes,
            total_bytes: a.max_total_bytes,
            path_bytes: usize::try_from(a.max_path_bytes).unwrap_or(ce_rules::MAX_PATH_BYTES),
        }
        .at_most_reference()
    }
}

/// The arguments of `ingest` and `digest`: a release and its version.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The release's source directory.
    #[arg(required_unless_present = "git", conflicts_with = "git")]
    pub(super) dir: Option<PathBuf>,
    /// Read the release from this local git repository's objects (no
    /// checkout), at --rev, as a checkout of that revision would hold it; a
    /// URL is refused: clone it and give the clone's path.
    #[arg(long, value_name = "REPO", requires = "rev")]
    pub(super) git: Option<PathBuf>,
    /// The revision to read with --git: a tag, a branch or a commit.
    #[arg(long, value_name = "REV", requires = "git")]
    pub(super) rev: Option<String>,
    /// With --git, the plugin's directory is the one the revision's
    /// .claude-plugin/marketplace.json gives the plugin of this name.
    #[arg(long, value_name = "NAME", requires = "git", conflicts_with = "subdir")]
    pub(super) plugin: Option<String>,
    /// With --git, the plugin's directory in the repository (default: its root).
    #[arg(long, value_name = "PATH", requires = "git")]
    pub(super) subdir: Option<PathBuf>,
    /// The exact version the profile's manifest file must carry (X.Y.Z).
    #[arg(long, value_name = "X.Y.Z", help = crate::profile::ce::help::VERSION)]
    pub(super) version: String,
    #[command(flatten)]
    pub(super) bounds: BoundsArgs,
}

impl<'a> From<&'a ReleaseArgs> for cmd::ingest::IngestOptions<'a> {
    fn from(a: &'a ReleaseArgs) -> Self {
        use crate::source::git::PluginDir;
        let git = a.rev.as_deref().map(|rev| {
            let dir = match (&a.plugin, &a.subdir) {
                (Some(name), _) => PluginDir::Plugin(name),
                (None, Some(subdir)) => PluginDir::Subdir(subdir),
                (None, None) => PluginDir::Root,
            };
            (rev, dir)
        });
        // The parser requires a directory or --git, not both.
        let source = a
            .git
            .as_deref()
            .or(a.dir.as_deref())
            .unwrap_or(Path::new(""));
        cmd::ingest::IngestOptions {
            source,
            git,
            version: &a.version,
            bounds: a.bounds.into(),
            sign_with: None,
            refuse_secrets: false,
        }
    }
}

/// The arguments of `ingest`: a release, and a key to sign it with.
#[derive(Debug, Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub(super) release: ReleaseArgs,
    /// Sign the snapshot with this private key (see `cestore sign`): its
    /// attestation is kept and recorded with the ingest. The key is checked
    /// before anything else.
    #[arg(long, value_name = "FILE")]
    pub(super) sign_with: Option<PathBuf>,
    /// Refuse (exit 3, rule secret-content) a release a kept file of which
    /// looks like a private key or a token by its content; without it,
    /// each such file draws a warning on stderr (the reference keeps them:
    /// its filters go by name only).
    #[arg(long)]
    pub(super) refuse_secrets: bool,
}

/// The tree kinds `ingest --profile` captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TreeProfileArg {
    /// A `sandbox_copy` tree (`--copy`).
    Tree,
    /// A dependency list (`--source`/`--target` pairs).
    Dependency,
    /// A whole task (`--task`, `--resolved-sha`).
    Task,
    /// The GitNexus runtime of a checkout (`--gitnexus-rules`): its seven
    /// mounted components as one tree.
    Runtime,
    /// A named set of stored snapshots (`--member ROLE=DIGEST`, repeated).
    Environment,
}

/// The arguments of `ingest --profile`.
#[derive(Debug, Args)]
pub struct ProfileIngestArgs {
    /// What to capture: tree, dependency, task, runtime or environment.
    #[arg(long, value_enum)]
    pub(super) profile: TreeProfileArg,
    /// The repository the trees are read from (with runtime: the checkout
    /// holding gitnexus/ and gitnexus-shared/; none with environment).
    #[arg(required_unless_present_any = ["git", "members"], conflicts_with = "git")]
    pub(super) repo: Option<PathBuf>,
    /// With environment: a member, ROLE=DIGEST (repeat): the results-row
    /// field it fills (a-z, 0-9, _) and a stored snapshot's full digest.
    #[arg(long = "member", value_name = "ROLE=DIGEST")]
    pub(super) members: Vec<String>,
    /// Read the trees from this local git repository's objects (no
    /// checkout), at --rev, as a checkout of that revision would hold them
    /// (files 0644, or 0755 for git's 100755: a checkout under umask 022).
    #[arg(long, value_name = "REPO", requires = "rev")]
    pub(super) git: Option<PathBuf>,
    /// The revision to read with --git: a tag, a branch or a commit.
    #[arg(long, value_name = "REV", requires = "git")]
    pub(super) rev: Option<String>,
    /// With --git and task: the checkout path the task's repo_identity
    /// names (default: the repository's absolute path).
    #[arg(long, value_name = "PATH", requires = "git")]
    pub(super) repo_identity: Option<PathBuf>,
    /// With tree: a sandbox_copy path of REPO (repeat; none: every name at
    /// REPO's top level).
    #[arg(long = "copy", value_name = "REL")]
    pub(super) copies: Vec<String>,
    /// With dependency: a dependency's source in REPO (repeat, each with a --target).
    #[arg(long = "source", value_name = "REL")]
    pub(super) sources: Vec<String>,
    /// With dependency: where the dependency of the same position is mounted.
    #[arg(long = "target", value_name = "REL")]
    pub(super) targets: Vec<String>,
    /// With task: the task JSON file (its sandbox_copy and sandbox_dependencies).
    #[arg(long, value_name = "TASK.json")]
    pub(super) task: Option<PathBuf>,
    /// With task: the commit the task is bound to (with --git, by default
    /// the revision's commit).
    #[arg(long, value_name = "SHA")]
    pub(super) resolved_sha: Option<String>,
    /// With task: where eval/workflow_bench/review_cases paths are read from.
    #[arg(long, value_name = "DIR")]
    pub(super) harness_root: Option<PathBuf>,
    /// With task: a task binding whose dependency digests the capture must give.
    #[arg(long, value_name = "BINDING.json")]
    pub(super) expect_binding: Option<PathBuf>,
    /// With runtime: the harness revision whose rules check the runtime
    /// before it is captured: seed (the pinned version) or upstream (any
    /// version, linked worktrees).
    #[arg(
        long = "gitnexus-rules",
        value_enum,
        value_name = "REVISION",
        default_value = "seed"
    )]
    pub(super) gitnexus_rules: crate::gitnexus::Revision,
    /// With runtime, under the seed's rules: the version the runtime's
    /// package.json must carry [default: 1.6.9].
    #[arg(long = "gitnexus-version", value_name = "V")]
    pub(super) gitnexus_version: Option<String>,
    /// The snapshot's name (default: its kind; gitnexus-runtime for runtime).
    #[arg(long, value_name = "NAME")]
    pub(super) name: Option<String>,
    /// Sign each snapshot recorded (with task: the tree, the dependency
    /// list and the task) with this private key (see `cestore sign`): its
    /// attestation names the harness's digest and is kept with the ingest.
    /// The key is checked before anything else.
    #[arg(long, value_name = "FILE")]
    pub(super) sign_with: Option<PathBuf>,
    /// Refuse more entries than this, all trees together (at most the default).
    #[arg(long, value_name = "N", default_value_t = crate::profile::tree::capture::MAX_TASK_ASSET_ENTRIES,
          value_parser = clap::value_parser!(u64).range(0..=crate::profile::tree::capture::MAX_TASK_ASSET_ENTRIES))]
    pub(super) max_entries: u64,
    /// Refuse a path longer than this many bytes (at most the default).
    #[arg(long, value_name = "BYTES", default_value_t = crate::profile::tree::capture::MAX_TASK_ASSET_PATH_BYTES,
          value_parser = clap::value_parser!(u64).range(0..=crate::profile::tree::capture::MAX_TASK_ASSET_PATH_BYTES))]
    pub(super) max_path_bytes: u64,
    /// Refuse more bytes than this, all trees together (at most the default).
    #[arg(long, value_name = "BYTES", default_value_t = crate::profile::tree::capture::MAX_TASK_ASSET_BYTES,
          value_parser = clap::value_parser!(u64).range(0..=crate::profile::tree::capture::MAX_TASK_ASSET_BYTES))]
    pub(super) max_bytes: u64,
}

impl ProfileIngestArgs {
    /// With environment: the members, or why the flags do not fit.
    pub(super) fn environment_members(
        &self,
    ) -> Result<Vec<crate::store::ingest::environment::Member>> {
        let usage = |m: &str| Err(Error::Usage(format!("ingest --profile environment: {m}")));
        let other = self.repo.is_some()
            || self.git.is_some()
            || self.rev.is_some()
            || self.repo_identity.is_some()
            || !self.copies.is_empty()
            || !self.sources.is_empty()
            || !self.targets.is_empty()
            || self.task.is_some()
            || self.resolved_sha.is_some()
            || self.harness_root.is_some()
            || self.expect_binding.is_some()
            || self.gitnexus_version.is_some()
            || self.gitnexus_rules != crate::gitnexus::Revision::default();
        if other {
            return usage("takes --member, --name and --sign-with only; it reads no repository");
        }
        if self.members.is_empty() {
            return usage("needs at least one --member ROLE=DIGEST");
        }
        self.members.iter().map(|m| m.parse()).collect()
    }

    /// The options, or why the flags do not fit the profile.
    pub(super) fn options(&self) -> Result<crate::store::ingest::tree::TreeIngestOptions<'_>> {
        use crate::store::ingest::tree::TreeForm;
        let usage = |m: &str| {
            Err(Error::Usage(format!(
                "ingest --profile {}: {m}",
                match self.profile {
                    TreeProfileArg::Tree => "tree",
                    TreeProfileArg::Dependency => "dependency",
                    TreeProfileArg::Task => "task",
                    TreeProfileArg::Runtime => "runtime",
                    TreeProfileArg::Environment => "environment",
                }
            )))
        };
        if self.profile == TreeProfileArg::Environment {
            return usage(
                "records stored snapshots (--member ROLE=DIGEST); it reads no repository",
            );
        }
        if !self.members.is_empty() {
            return usage("takes --member only with environment");
        }
        let task_flags = self.task.is_some()
            || self.resolved_sha.is_some()
            || self.harness_root.is_some()
            || self.expect_binding.is_some();
        let pairs = !self.sources.is_empty() || !self.targets.is_empty();
        let form = match self.profile {
            TreeProfileArg::Tree if pairs || task_flags => {
                return usage("takes --copy, not --source, --target, --task, --resolved-sha, --harness-root or --expect-binding")
            }
            TreeProfileArg::Tree => TreeForm::Tree {
                copies: self.copies.clone(),
            },
            TreeProfileArg::Dependency if !self.copies.is_empty() || task_flags => {
                return usage("takes --source and --target pairs, not --copy or the task's flags")
            }
            TreeProfileArg::Dependency if self.sources.len() != self.targets.len() => {
                return usage("each --source needs a --target, in the same order")
            }
            TreeProfileArg::Dependency => TreeForm::Dependency {
                pairs: self
                    .sources
                    .iter()
                    .cloned()
                    .zip(self.targets.iter().cloned())
                    .collect(),
            },
            TreeProfileArg::Task if !self.copies.is_empty() || pairs => {
                return usage("reads the declarations from --task, not from --copy, --source or --target")
            }
            TreeProfileArg::Task => match (&self.task, &self.resolved_sha) {
                (Some(task), sha) if sha.is_some() || self.git.is_some() => TreeForm::Task {
                    task: task.clone(),
                    resolved_sha: sha.clone(),
                    harness_root: self.harness_root.clone(),
                    expect_binding: self.expect_binding.clone(),
                },
                _ => return usage("needs --task and --resolved-sha"),
            },
            TreeProfileArg::Runtime if !self.copies.is_empty() || pairs || task_flags => {
                return usage("reads the runtime's seven components; it takes no --copy, --source, --target or task flags")
            }
            TreeProfileArg::Runtime if self.git.is_some() => {
                return usage("reads the runtime from a checkout, not from --git")
            }
            TreeProfileArg::Environment => return usage("reads no repository"),
            TreeProfileArg::Runtime => TreeForm::Runtime {
                rules: crate::gitnexus::Rules::new(
                    self.gitnexus_rules,
                    self.gitnexus_version.as_deref(),
                )?,
            },
        };
        let runtime_flags = self.gitnexus_version.is_some()
            || self.gitnexus_rules != crate::gitnexus::Revision::default();
        if runtime_flags && self.profile != TreeProfileArg::Runtime {
            return usage("takes --gitnexus-rules and --gitnexus-version only with runtime");
        }
        if self.rev.is_some() && self.git.is_none() {
            return usage("takes --rev only with --git REPO");
        }
        if self.repo_identity.is_some() && !matches!(self.profile, TreeProfileArg::Task) {
            return usage("takes --repo-identity only with task");
        }
        let (repo, git) = match (&self.git, &self.repo, &self.rev) {
            (Some(git), _, Some(rev)) => (
                git.as_path(),
                Some(crate::store::ingest::tree::GitRevision {
                    rev: rev.as_str(),
                    repo_identity: self.repo_identity.as_deref(),
                }),
            ),
            (_, Some(repo), _) => (repo.as_path(), None),
            _ => return usage("needs REPO, or --git REPO --rev REV"),
        };
        Ok(crate::store::ingest::tree::TreeIngestOptions {
            repo,
            git,
            form,
            name: self.name.as_deref(),
            sign_with: None,
            limits: crate::profile::tree::capture::Limits {
                max_entries: self.max_entries,
                max_path_bytes: self.max_path_bytes,
                max_total_bytes: self.max_bytes,
            },
        })
    }
}

/// What `ingest --help` says of the tree kinds: `--profile` routes to a
/// command of its own, with its own flags and help.
const PROFILE_INGEST_HELP: &str =
    "Tree snapshots: `cestore ingest --profile tree|dependency|task|runtime REPO ...` \
captures a task's sandbox_copy tree (--copy REL), its dependency list (--source REL --target REL) \
or the whole task (--task TASK.json --resolved-sha SHA) as the benchmark harness does, or a \
checkout's GitNexus runtime, and stores them; its flags are its own: \
`cestore ingest --profile tree --help`. `cestore ingest --profile environment --member ROLE=DIGEST ...` \
records stored snapshots as one environment.";

/// The command line with `ingest ... --profile ...` routed to the hidden
/// `ingest-profile` command: a CE ingest's flags and messages stay as
/// they are, and a tree-kind ingest has flags of its own.
pub fn route_profile_ingest(argv: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut at = 1;
    while at < argv.len() {
        let arg = argv[at].as_encoded_bytes();
        match arg {
            b"--json" | b"--trust-store" | b"--short" => at += 1,
            b"--store" => at += 2,
            _ if arg.starts_with(b"--store=") => at += 1,
            _ => break,
        }
    }
    let wants_profile = |rest: &[std::ffi::OsString]| {
        rest.iter()
            .map(|a| a.as_encoded_bytes())
            .take_while(|a| *a != b"--")
            .any(|a| a == b"--profile" || a.starts_with(b"--profile="))
    };
    let mut argv = argv;
    if at < argv.len() && argv[at] == "ingest" && wants_profile(&argv[at + 1..]) {
        argv[at] = "ingest-profile".into();
    }
    argv
}

/// The private key a `--sign-with FILE` names, loaded (and its file
/// checked) before anything else is done.
pub(super) fn signing_key(file: Option<&Path>) -> Result<Option<crate::sign::PrivateKey>> {
    Ok(file.map(crate::sign::PrivateKey::load).transpose()?)
}

/// The arguments of `show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION (the one snapshot with that version).
    pub(super) digest: String,
    /// List the files in manifest order.
    #[arg(long)]
    pub(super) files: bool,
    /// Write the canonical manifest bytes exactly as stored.
    #[arg(long, conflicts_with = "files")]
    pub(super) manifest: bool,
}

impl<'a> From<&'a ShowArgs> for cmd::show::ShowOptions<'a> {
    fn from(a: &'a ShowArgs) -> Self {
        cmd::show::ShowOptions {
            digest: &a.digest,
            files: a.files,
        }
    }
}

/// The arguments of `checkout`.
#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION (the one snapshot with that version).
    pub(super) digest: String,
    /// Where to put the view; it must not exist.
    pub(super) dest: PathBuf,
    /// How to make the files: hard links with copies where a link is
    /// refused (auto), hard links only, copies, or reflinks.
    #[arg(long, value_enum, default_value = "auto")]
    pub(super) method: view::Method,
    /// Fail rather than copy where a hard link is refused.
    #[arg(long)]
    pub(super) require_hardlinks: bool,
    /// Make a writable copy instead of a view: every file the copy's own
    /// (0600; a reflink of its object, or a copy where the filesystem has
    /// no reflinks), directories 0700, symlinks recreated. Nothing is
    /// recorded: remove it as any directory.
    #[arg(long, conflicts_with_all = ["method", "require_hardlinks"])]
    pub(super) writable: bool,
    /// With --writable: refuse to copy more than this many bytes where the
    /// filesystem cannot reflink (at most the default, 2 GiB).
    #[arg(long, value_name = "BYTES", requires = "writable",
          value_parser = clap::value_parser!(u64).range(0..=view_copies::MAX_FALLBACK_BYTES))]
    pub(super) max_fallback_bytes: Option<u64>,
}

/// The arguments of `materialize`.
#[derive(Debug, Args)]
pub struct MaterializeArgs {
    /// A task snapshot's digest (as `ingest --profile task` printed it), or
    /// a unique prefix of it.
    pub(super) digest: String,
    /// The clone whose declared `sandbox_copy` roots are replaced: an
    /// existing directory reached through no symlink.
    pub(super) clone: PathBuf,
    /// Refuse to copy more than this many bytes where the filesystem cannot
    /// reflink (at most the default, 2 GiB).
    #[arg(long, value_name = "BYTES",
          value_parser = clap::value_parser!(u64).range(0..=view_copies::MAX_FALLBACK_BYTES))]
    pub(super) max_fallback_bytes: Option<u64>,
}

impl<'a> From<&'a CheckoutArgs> for cmd::checkout::CheckoutOptions<'a> {
    fn from(a: &'a CheckoutArgs) -> Self {
        cmd::checkout::CheckoutOptions {
            digest: &a.digest,
            dest: &a.dest,
            method: a.method,
            require_hardlinks: a.require_hardlinks,
        }
    }
}

/// The arguments of `discard`.
#[derive(Debug, Args)]
pub struct DiscardArgs {
    /// The view's path.
    pub(super) dest: PathBuf,
    /// Remove a path that is not a recorded view, provided that it is
    /// exactly this snapshot (a digest, a unique prefix or @VERSION).
    #[arg(long, value_name = "DIGEST")]
    pub(super) force: Option<String>,
    /// Keep the checkout whole, as a spare the next checkout of its snapshot
    /// takes after checking it, instead of deleting its files. Only when no
    /// process (working directory, open file) and no sandbox mount still
    /// uses the view: those would see the next view.
    #[arg(long, conflicts_with = "force")]
    pub(super) spare: bool,
}

impl<'a> From<&'a DiscardArgs> for cmd::discard::DiscardOptions<'a> {
    fn from(a: &'a DiscardArgs) -> Self {
        cmd::discard::DiscardOptions {
            dest: &a.dest,
            force_digest: a.force.as_deref(),
            spare: a.spare,
        }
    }
}

/// The arguments of `stage`.
#[derive(Debug, Args)]
pub struct StageArgs {
    /// A benchmark arm; repeat for each arm of the run.
    #[arg(long = "arm", value_name = "ARM", required = true)]
    pub(super) arms: Vec<String>,
    /// The CE plugin release's source directory.
    #[arg(long, value_name = "DIR", conflicts_with = "digest")]
    pub(super) plugin_dir: Option<PathBuf>,
    /// The exact version the profile's manifest file must carry.
    #[arg(long, value_name = "X.Y.Z", conflicts_with = "digest", help = crate::profile::ce::help::PLUGIN_VERSION)]
    pub(super) plugin_version: Option<String>,
    /// A snapshot already in the store, instead of a source directory: a
    /// digest, a unique prefix of 4 hex digits or more, or @VERSION.
    #[arg(long)]
    pub(super) digest: Option<String>,
    /// Check the view out here (it must not exist); without it the
    /// store's shared view is used.
    #[arg(long, value_name = "DEST")]
    pub(super) dest: Option<PathBuf>,
    /// How to make the view's files.
    #[arg(long, value_enum, default_value = "auto")]
    pub(super) method: view::Method,
    #[command(flatten)]
    gitnexus: GitNexusArgs,
    #[command(flatten)]
    arm_rule: ArmRuleArgs,
    /// Once the view is made and reported, wait for one line on standard
    /// input, then discard the view and report that too: `discard --spare`
    /// keeps it as a spare, `discard` (or any other line, or the end of
    /// input, as when the caller dies) removes it, as SIGTERM, SIGINT or
    /// SIGHUP does (the exit code is then 128 + the signal's number). One
    /// process for a sweep's whole staging; nothing of the store is held
    /// while waiting.
    /// Without a ce_* arm there is no view, and nothing to wait for.
    #[arg(long, requires = "dest")]
    pub(super) hold: bool,
    #[command(flatten)]
    pub(super) bounds: BoundsArgs,
    /// Sign the snapshot the stage ingests with this private key (see
    /// `cestore sign`); the key is checked before anything else.
    #[arg(long, value_name = "FILE", conflicts_with = "digest")]
    pub(super) sign_with: Option<PathBuf>,
    /// Refuse (exit 3, rule secret-content) a release a kept file of which
    /// looks like a private key or a token by its content; without it,
    /// each such file draws a warning on stderr. Only a source read here
    /// is looked at, not a --digest already stored.
    #[arg(long)]
    pub(super) refuse_secrets: bool,
    /// Record an environment named NAME of what the stage mounts: the
    /// release (ce_plugin_manifest_digest), the GitNexus runtime
    /// (gitnexus_runtime_manifest_digest) and each --member.
    #[arg(long, value_name = "NAME")]
    pub(super) environment: Option<String>,
    /// With --environment: another stored snapshot it names, ROLE=DIGEST
    /// (a task's: task_asset_snapshot_digest=D); repeat for each.
    #[arg(long = "member", value_name = "ROLE=DIGEST", requires = "environment")]
    pub(super) members: Vec<String>,
}

impl StageArgs {
    /// The members `--member` names, read.
    pub(super) fn members(&self) -> Result<Vec<crate::store::ingest::environment::Member>> {
        self.members.iter().map(|m| m.parse()).collect()
    }

    /// The release the CE arms see: a stored snapshot (`--digest`), a source
    /// directory and version (either may be missing; stage names the gap), or
    /// none.
    fn release(&self) -> cmd::stage::Release<'_> {
        match (&self.plugin_dir, &self.plugin_version, &self.digest) {
            (_, _, Some(d)) => cmd::stage::Release::Digest(d),
            (None, None, None) => cmd::stage::Release::None,
            (dir, version, None) => cmd::stage::Release::Source {
                dir: dir.as_deref(),
                version: version.as_deref(),
            },
        }
    }
}

impl<'a> From<&'a StageArgs> for cmd::stage::StageOptions<'a> {
    fn from(a: &'a StageArgs) -> Self {
        cmd::stage::StageOptions {
            arms: &a.arms,
            release: a.release(),
            dest: a.dest.as_deref(),
            method: a.method,
            gitnexus: a.gitnexus.runtime(),
            arm_rule: a.arm_rule.rule(),
            bounds: a.bounds.into(),
            sign_with: None,
            refuse_secrets: a.refuse_secrets,
            environment: None,
        }
    }
}

/// The arguments of `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this version.
    #[arg(long)]
    pub(super) version: Option<String>,
    /// Only this plugin name.
    #[arg(long)]
    pub(super) name: Option<String>,
}

/// The arguments of `log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only this snapshot's events (a digest, a unique prefix of 4 hex
    /// digits or more, or @VERSION).
    pub(super) digest: Option<String>,
}

/// The arguments of `find`.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct FindArgs {
    /// A file content's SHA-256, or a prefix of it (4 hex digits or more)
    /// that only one stored content has.
    #[arg(long, value_name = "SHA256")]
    pub(super) object: Option<String>,
    /// A path relative to the plugin root (skills/ce-plan/SKILL.md), a
    /// directory (skills/ce-plan/), or a glob ('skills/*/SKILL.md').
    #[arg(long, value_name = "PATH|DIR|GLOB")]
    pub(super) path: Option<String>,
}

impl<'a> TryFrom<&'a FindArgs> for cmd::list::FindQuery<'a> {
    type Error = Error;

    /// `--object` or `--path`; the parser requires one of them.
    fn try_from(a: &'a FindArgs) -> Result<Self> {
        match (&a.object, &a.path) {
            (Some(o), _) => Ok(cmd::list::FindQuery::Object(o)),
            (None, Some(p)) => Ok(cmd::list::FindQuery::Path(p)),
            // clap's group already requires one; this is only the type's own guard.
            (None, None) => Err(Error::Usage("find needs --object or --path".into())),
        }
    }
}

/// The arguments of `verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Snapshots to check (digests, unique prefixes of 4 hex digits or more,
    /// or @VERSION); all when none.
    pub(super) digests: Vec<String>,
    /// Audit this directory against the one snapshot named.
    #[arg(long, value_name = "DIR")]
    pub(super) tree: Option<PathBuf>,
    /// Restore damaged or missing objects from files in this directory
    /// whose SHA-256 matches.
    #[arg(long, value_name = "DIR", conflicts_with = "tree")]
    pub(super) repair_from: Option<PathBuf>,
    /// Re-derive the one snapshot named from the commit its source record
    /// names, read from this local clone, and compare the digests.
    #[arg(long, value_name = "REPO", conflicts_with_all = ["tree", "repair_from"])]
    pub(super) source: Option<PathBuf>,
    /// Also check every stored attestation of the snapshots: signed by one
    /// of these keys, about its own snapshot's digest.
    #[command(flatten)]
    pub(super) trust: TrustArgs,
}

impl VerifyArgs {
    /// With `--tree DIR`, the directory and the one snapshot to audit it
    /// against; `None` when the store itself is to be verified.
    pub(super) fn tree_audit(&self) -> Result<Option<(&std::path::Path, &str)>> {
        let Some(dir) = &self.tree else {
            return Ok(None);
        };
        let [digest] = self.digests.as_slice() else {
            return Err(crate::error::Request::OneDigest {
                option: "--tree DIR",
            }
            .into());
        };
        Ok(Some((dir, digest)))
    }

    /// With `--source REPO`, the repository and the one snapshot to
    /// re-derive from it; `None` otherwise.
    pub(super) fn source_check(&self) -> Result<Option<(&std::path::Path, &str)>> {
        let Some(repo) = &self.source else {
            return Ok(None);
        };
        let [digest] = self.digests.as_slice() else {
            return Err(crate::error::Request::OneDigest {
                option: "--source REPO",
            }
            .into());
        };
        Ok(Some((repo, digest)))
    }

    /// The options of a store verification, drawing progress when asked.
    pub(super) fn options<'a>(
        &'a self,
        trusted: &'a [crate::sign::PublicKey],
        progress: bool,
    ) -> cmd::verify::VerifyOptions<'a> {
        cmd::verify::VerifyOptions {
            digests: &self.digests,
            repair_from: self.repair_from.as_deref(),
            trusted,
            progress,
        }
    }
}

/// The arguments of `audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Results files (JSON Lines); - for standard input.
    #[arg(required = true, value_name = "FILE")]
    pub(super) files: Vec<PathBuf>,
    /// Print a Markdown table, to paste into a report (not with --json).
    #[arg(long)]
    pub(super) markdown: bool,
    /// Re-hash every object of each snapshot named (once per snapshot), and
    /// name the damaged ones.
    #[arg(long)]
    pub(super) verify: bool,
    /// Pull digests the store lacks from REGISTRY/REPOSITORY (as
    /// `cestore pull REGISTRY/REPOSITORY:sha256-DIGEST`).
    #[arg(long, value_name = "REGISTRY/REPOSITORY")]
    pub(super) registry: Option<String>,
    /// Speak plain HTTP to the registry (loopback or insecure registries).
    #[arg(long, requires = "registry")]
    pub(super) plain_http: bool,
    /// Seconds without progress on a registry connection before giving up
    /// on that digest.
    #[arg(long, value_name = "SECS", default_value_t = 30, requires = "registry",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(super) timeout: u64,
    /// The slowest transfer with the registry kept up: fewer bytes a second
    /// than this over SECS of --timeout gives up on that digest; 0 for no floor.
    #[arg(long, value_name = "BYTES", default_value_t = crate::remote::oci::client::Timeouts::DEFAULT_MIN_SPEED,
          requires = "registry")]
    pub(super) min_speed: u64,
    /// The digest's field; a dotted path reads nested objects
    /// (ce_plugin.manifest_digest).
    #[arg(long, value_name = "F", default_value = crate::audit::DEFAULT_DIGEST_FIELD)]
    pub(super) digest_field: String,
    /// The claimed version's field.
    #[arg(long, value_name = "F", default_value = crate::audit::DEFAULT_VERSION_FIELD)]
    pub(super) version_field: String,
    /// The arm's field.
    #[arg(long, value_name = "F", default_value = crate::audit::DEFAULT_ARM_FIELD)]
    pub(super) arm_field: String,
    /// Audit the digest field NAME (a key, or a dotted path) as naming a
    /// snapshot of KIND: ce, tree, dependencies, task, or
    /// dependencies-content (a dependency list's content digest); a field
    /// of the default table is re-mapped. Repeatable. The default table:
    /// task_asset_snapshot_digest=task, task_asset_manifest_digest=tree,
    /// sandbox_dependency_manifest_digest=dependencies,
    /// sandbox_dependency_content_digest=dependencies-content,
    /// gitnexus_runtime_manifest_digest=tree.
    #[arg(long = "field", value_name = "NAME=KIND")]
    pub(super) field: Vec<String>,
    /// Fail every digest that has no clean source record naming a commit.
    #[arg(long)]
    pub(super) require_clean_source: bool,
    /// Re-derive each digest from the commit its newest source record
    /// names, read from this local clone, and fail those that differ.
    #[arg(long, value_name = "REPO")]
    pub(super) source_repo: Option<PathBuf>,
    /// Pass the audit despite malformed lines (lines json.loads refuses or
    /// reads as no object), when all else passes; they are still listed and
    /// counted. Without it a malformed line fails the audit: any digest in
    /// it was not audited.
    #[arg(long)]
    pub(super) allow_malformed: bool,
    /// With a key given, fail every digest that no stored attestation
    /// signed by one of the keys vouches for.
    #[command(flatten)]
    pub(super) trust: TrustArgs,
}

impl AuditArgs {
    /// The options of `audit`, drawing progress when asked.
    pub(super) fn options<'a>(
        &'a self,
        sources: &'a [cmd::audit::Source],
        trusted: &'a [crate::sign::PublicKey],
        progress: bool,
    ) -> cmd::audit::AuditOptions<'a> {
        cmd::audit::AuditOptions {
            sources,
            fields: cmd::audit::Fields {
                digest: self.digest_field.clone(),
                version: self.version_field.clone(),
                arm: self.arm_field.clone(),
            },
            field_specs: &self.field,
            verify: self.verify,
            require_clean_source: self.require_clean_source,
            source_repo: self.source_repo.as_deref(),
            trusted,
            registry: self.registry.as_deref(),
            remote_options: crate::remote::Options {
                plain_http: self.plain_http,
                timeouts: crate::remote::oci::client::Timeouts::new(self.timeout, self.min_speed),
                ..crate::remote::Options::default()
            },
            progress,
            substitute_root: None,
            allow_malformed: self.allow_malformed,
        }
    }
}

/// The arguments of `diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier snapshot: a digest, a unique prefix of 4 hex digits or
    /// more, or @VERSION.
    pub(super) a: String,
    /// The later snapshot, named as the earlier one.
    pub(super) b: String,
}

/// The public keys a command trusts.
#[derive(Clone, Debug, Default, Args)]
pub struct TrustArgs {
    /// A public key (SubjectPublicKeyInfo PEM, as `key generate` writes
    /// FILE.pub) whose attestations are trusted; repeatable.
    #[arg(long = "trusted-key", value_name = "PUB")]
    pub(super) trusted_key: Vec<PathBuf>,
    /// A file of trusted public keys in PEM, one after another (lines
    /// outside the keys are comments); repeatable.
    #[arg(long = "trusted-keys", value_name = "FILE")]
    pub(super) trusted_keys: Vec<PathBuf>,
}

impl TrustArgs {
    /// The keys trusted; empty when none is given.
    pub(super) fn keys(&self) -> Result<Vec<crate::sign::PublicKey>> {
        Ok(crate::sign::trusted_keys(
            &self.trusted_key,
            &self.trusted_keys,
        )?)
    }

    /// Whether any key is given.
    pub(super) fn given(&self) -> bool {
        !self.trusted_key.is_empty() || !self.trusted_keys.is_empty()
    }
}

/// The arguments of `sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION.
    pub(super) digest: String,
    /// The private key to sign with (PKCS#8 PEM, mode 0600, as `key
    /// generate` writes it).
    #[arg(long, value_name = "FILE")]
    pub(super) key: PathBuf,
}

/// The arguments of `attestations`.
#[derive(Debug, Args)]
pub struct AttestationsArgs {
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION.
    pub(super) digest: String,
    #[command(flatten)]
    pub(super) trust: TrustArgs,
}

/// The subcommands of `key`.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Write a new ed25519 key pair: FILE, the private key (PKCS#8 PEM, mode
    /// 0600), and FILE.pub, the public key (SubjectPublicKeyInfo PEM). The
    /// key id is the SHA-256 of the public key's DER bytes. Refuses to
    /// replace either file.
    Generate {
        /// The private key file to make; the public key goes to FILE.pub.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// The arguments of `rm`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION (the one snapshot with that version).
    pub(super) digest: String,
    /// Forget it even though views are recorded (the views stay on disk).
    #[arg(long)]
    pub(super) force: bool,
}

/// The arguments of `gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Only report what would be removed.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// Sweep even while a manifest is damaged or a recorded snapshot lacks
    /// its manifest (gc otherwise refuses, exit 6), and let go of the
    /// objects only set-aside manifests name. Every object name still found
    /// in a damaged manifest stays kept.
    #[arg(long)]
    pub(super) force: bool,
}

/// The arguments of `path`.
#[derive(Debug, Args)]
pub struct PathArgs {
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION (the one snapshot with that version).
    pub(super) digest: String,
}

/// The arguments of `mounts`.
#[derive(Debug, Args)]
pub struct MountsArgs {
    /// The benchmark arm.
    #[arg(long)]
    pub(super) arm: String,
    /// The plugin view directory to mount for a CE arm: a view cestore
    /// recorded, or a shared view (see --unchecked).
    #[arg(long, value_name = "PATH")]
    pub(super) view: Option<PathBuf>,
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION: with --view, the snapshot the view must show; alone, mount
    /// the snapshot's shared view in the store (made by `cestore path`).
    #[arg(long, value_name = "DIGEST")]
    pub(super) digest: Option<String>,
    /// Mount --view as it is, without checking that cestore made it; the
    /// report then has no digest.
    #[arg(long, requires = "view", conflicts_with = "digest")]
    pub(super) unchecked: bool,
    #[command(flatten)]
    gitnexus: GitNexusArgs,
    /// Sign the runtime snapshot --gitnexus-root ingests with this private
    /// key (see `cestore sign`); the key is checked before anything else.
    #[arg(long, value_name = "FILE", requires = "root")]
    pub(super) sign_with: Option<PathBuf>,
    #[command(flatten)]
    arm_rule: ArmRuleArgs,
    /// Print the JSON report or bubblewrap arguments (bwrap0: NUL-separated,
    /// for `bwrap --args FD`) [default: text, or json with --json].
    #[arg(long, value_enum)]
    pub(super) format: Option<super::output::Format>,
}

impl MountsArgs {
    /// The options of `mounts`.
    pub(super) fn options(&self) -> cmd::mounts::MountsOptions<'_> {
        let view = match (self.view.as_deref(), self.digest.as_deref()) {
            // The parser keeps --unchecked from --digest and requires --view with it.
            (Some(p), _) if self.unchecked => cmd::mounts::ViewSource::Unchecked(p),
            (Some(path), expect) => cmd::mounts::ViewSource::Recorded { path, expect },
            (None, Some(d)) => cmd::mounts::ViewSource::Digest(d),
            (None, None) => cmd::mounts::ViewSource::None,
        };
        cmd::mounts::MountsOptions {
            arm: &self.arm,
            view,
            gitnexus: self.gitnexus.runtime(),
            arm_rule: self.arm_rule.rule(),
            sign_with: None,
        }
    }
}

/// Which arms `stage` and `mounts` accept.
#[derive(Args, Debug)]
struct ArmRuleArgs {
    /// Refuse an arm that is neither a ce_* arm nor given with
    /// --known-arm (without it, such an arm gets no plugin, as in the
    /// reference, and one that looks mistaken, such as ce_reviw, draws a
    /// warning on stderr).
    #[arg(long)]
    strict_arms: bool,
    /// A non-CE arm the run expects; repeat for each. --strict-arms accepts
    /// it, and once any is given, every arm that is neither a ce_* arm nor
    /// one of them draws a warning.
    #[arg(long = "known-arm", value_name = "ARM")]
    known_arms: Vec<String>,
}

impl ArmRuleArgs {
    /// The rule the flags ask for.
    fn rule(&self) -> ce_rules::ArmRule<'_> {
        ce_rules::ArmRule {
            strict: self.strict_arms,
            known: &self.known_arms,
        }
    }
}

/// The arguments of `push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION (the one snapshot with that version).
    pub(super) digest: String,
    /// REGISTRY/REPOSITORY, e.g. registry.example/cestore/ce, or
    /// REGISTRY/REPOSITORY:TAG to publish under a human tag too.
    pub(super) remote: String,
    /// Speak plain HTTP, for a loopback or insecure registry (HTTPS otherwise).
    #[arg(long)]
    pub(super) plain_http: bool,
    /// Transfers in flight at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(super) jobs: u16,
    /// The most layers one image manifest lists; more distinct files than
    /// this are pushed as an OCI index of several manifests.
    #[arg(long, value_name = "N", default_value_t = crate::remote::oci::DEFAULT_MAX_LAYERS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_layers: u32,
    /// How long to wait on the registry, and how slow it may be.
    #[command(flatten)]
    pub(super) limits: RegistryLimits,
    /// The format to publish: 2 (packs), or 1 (one layer per file, as
    /// earlier cestores wrote; for compatibility tests).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2), hide = true)]
    pub(super) format: u8,
}

impl PushArgs {
    /// The options of `push`, drawing progress when asked.
    pub(super) fn options(&self, progress: bool) -> cmd::push::PushOptions<'_> {
        cmd::push::PushOptions {
            digest: &self.digest,
            remote: &self.remote,
            remote_options: crate::remote::Options {
                plain_http: self.plain_http,
                max_layers: self.max_layers as usize,
                push: true,
                timeouts: self.limits.timeouts(),
            },
            jobs: usize::from(self.jobs),
            format: if self.format == 1 {
                crate::remote::Format::V1
            } else {
                crate::remote::Format::V2
            },
            progress,
        }
    }
}

/// How long push and pull wait on a registry, and how slow it may be
/// (listed together, after the command's other options).
#[derive(Debug, Args)]
#[command(next_display_order = 100)]
pub struct RegistryLimits {
    /// Seconds without progress on a registry connection (no byte sent or
    /// received, or an answer's headers not all in) before giving up with
    /// exit 8; also the period --min-speed is measured over. Connecting
    /// waits at most 10 s, or SECS when shorter; a credential helper at
    /// most 30 s, or SECS when shorter.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(super) timeout: u64,
    /// The slowest transfer kept up: a body that moves fewer than BYTES
    /// bytes a second over a period of SECS (--timeout) is given up on with
    /// exit 8 (an upload of N bytes must be sent and answered within
    /// SECS + N/BYTES seconds); 0 for no floor.
    #[arg(long, value_name = "BYTES", default_value_t = crate::remote::oci::client::Timeouts::DEFAULT_MIN_SPEED)]
    pub(super) min_speed: u64,
}

impl RegistryLimits {
    /// The client's timeouts and transfer-rate floor.
    fn timeouts(&self) -> crate::remote::oci::client::Timeouts {
        crate::remote::oci::client::Timeouts::new(self.timeout, self.min_speed)
    }
}

/// The arguments of `pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// REGISTRY/REPOSITORY:sha256-DIGEST, REGISTRY/REPOSITORY:TAG, or
    /// REGISTRY/REPOSITORY@sha256:HEX (the snapshot's digest or the OCI
    /// manifest's).
    pub(super) reference: String,
    /// Speak plain HTTP, for a loopback or insecure registry (HTTPS otherwise).
    #[arg(long)]
    pub(super) plain_http: bool,
    /// Transfers in flight at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(super) jobs: u16,
    /// How long to wait on the registry, and how slow it may be.
    #[command(flatten)]
    pub(super) limits: RegistryLimits,
    /// Adopt the snapshot only when one of its attestations vouches for it
    /// under one of these keys; otherwise exit 9 (`untrusted`) and leave the
    /// store as it was.
    #[command(flatten)]
    pub(super) trust: TrustArgs,
}

impl PullArgs {
    /// The options of `pull`, drawing progress when asked, trusting `trusted`.
    pub(super) fn options<'a>(
        &'a self,
        progress: bool,
        trusted: &'a [crate::sign::PublicKey],
    ) -> cmd::pull::PullOptions<'a> {
        cmd::pull::PullOptions {
            reference: &self.reference,
            remote_options: crate::remote::Options {
                plain_http: self.plain_http,
                timeouts: self.limits.timeouts(),
                ..crate::remote::Options::default()
            },
            jobs: usize::from(self.jobs),
            progress,
            trusted,
        }
    }
}

/// The arguments of `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A manifest digest, a unique prefix of it (4 hex digits or more), or
    /// @VERSION (the one snapshot with that version).
    pub(super) digest: String,
    /// The bundle to write; it must not exist [default: DIGEST.tar or DIGEST.tar.zst].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(super) output: Option<PathBuf>,
    /// Compress the bundle with zstd.
    #[arg(long)]
    pub(super) zstd: bool,
}

impl<'a> From<&'a ExportArgs> for cmd::bundle::ExportOptions<'a> {
    fn from(a: &'a ExportArgs) -> Self {
        cmd::bundle::ExportOptions {
            digest: &a.digest,
            output: a.output.as_deref(),
            zstd: a.zstd,
        }
    }
}

/// The arguments of `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle, or - for standard input.
    pub(super) file: PathBuf,
    /// The manifest digest the bundle must hold (64 hex).
    #[arg(long, value_name = "DIGEST")]
    pub(super) digest: Option<String>,
    /// Only verify the bundle (every hash, its form, the ingest rules):
    /// store nothing, and open no store.
    #[arg(long)]
    pub(super) check: bool,
    /// Take the snapshot only when one of the bundle's attestations vouches
    /// for it under one of these keys; otherwise exit 9 (`untrusted`) and
    /// leave the store as it was.
    #[command(flatten)]
    pub(super) trust: TrustArgs,
}

impl ImportArgs {
    /// The options of `import`, trusting `trusted`.
    pub(super) fn options<'a>(
        &'a self,
        trusted: &'a [crate::sign::PublicKey],
    ) -> cmd::bundle::ImportOptions<'a> {
        cmd::bundle::ImportOptions {
            file: &self.file,
            digest: self.digest.as_deref(),
            check: self.check,
            trusted,
        }
    }
}

/// The GitNexus runtime's arguments, shared by `mounts` and `stage`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("gitnexus_runtime").multiple(true)))]
struct GitNexusArgs {
    /// The harness root holding gitnexus/ and gitnexus-shared/: adds the
    /// GitNexus runtime's mounts to every arm, checked as the harness
    /// checks them. The runtime is ingested (instant when unchanged) and
    /// mounted from its snapshot's shared view in the store.
    #[arg(
        long = "gitnexus-root",
        value_name = "ROOT",
        group = "gitnexus_runtime"
    )]
    pub(super) root: Option<PathBuf>,
    /// Mount this stored runtime snapshot (digest or unique prefix) instead
    /// of ingesting the checkout's; a --gitnexus-root given is still checked.
    #[arg(
        long = "gitnexus-runtime",
        value_name = "DIGEST",
        group = "gitnexus_runtime"
    )]
    pub(super) stored: Option<String>,
    /// The harness revision whose rules check the GitNexus runtime: seed
    /// (the pinned version) or upstream (any version, linked worktrees).
    #[arg(
        long = "gitnexus-rules",
        value_enum,
        value_name = "REVISION",
        default_value = "seed",
        requires = "gitnexus_runtime"
    )]
    pub(super) rules: crate::gitnexus::Revision,
    /// The version the GitNexus runtime's package.json must carry under
    /// the seed's rules [default: 1.6.9].
    #[arg(
        long = "gitnexus-version",
        value_name = "V",
        requires = "gitnexus_runtime"
    )]
    pub(super) version: Option<String>,
}

impl GitNexusArgs {
    /// The runtime the arguments name.
    fn runtime(&self) -> cmd::stage::GitNexusRuntime<'_> {
        cmd::stage::GitNexusRuntime {
            root: self.root.as_deref(),
            revision: self.rules,
            version: self.version.as_deref(),
            stored: self.stored.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::route_profile_ingest;

    fn routed(args: &[&str]) -> Vec<String> {
        route_profile_ingest(args.iter().map(Into::into).collect())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    /// `ingest ... --profile` goes to its own flags, after the global ones
    /// too; every other command line is left as it is.
    #[test]
    fn only_an_ingest_with_a_profile_is_routed() {
        assert_eq!(
            routed(&[
                "cestore",
                "--store",
                "s",
                "--json",
                "ingest",
                "r",
                "--profile",
                "tree"
            ]),
            [
                "cestore",
                "--store",
                "s",
                "--json",
                "ingest-profile",
                "r",
                "--profile",
                "tree"
            ]
        );
        assert_eq!(
            routed(&["cestore", "--store=s", "ingest", "--profile=task", "r"])[2],
            "ingest-profile"
        );
        for line in [
            &["cestore", "ingest", "dir", "--version", "1.0.0"][..],
            &["cestore", "ingest", "dir", "--", "--profile"],
            &["cestore", "show", "--profile"],
            &["cestore", "--store", "ingest", "show", "--profile"],
        ] {
            assert_eq!(routed(line), line, "{line:?}");
        }
    }
}
