//! The command line: argument definitions and dispatch to the commands.
//!
//! Each command returns a [`Report`]; only here is it written for people or as
//! JSON (`--json`). The exit code comes from the report or from the error (see
//! [`crate::error`]).

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cmd::{self, Report};
pub use crate::error::error_chain;
use crate::error::{Error, Result};
use crate::store;
use crate::view;

/// A content-addressed snapshot store for pinned plugin releases.
///
/// Ingest a release once, check out frozen read-only views of it instantly,
/// and audit any run by its manifest digest.
#[derive(Debug, Parser)]
#[command(
    name = "cestore",
    version,
    max_term_width = 100,
    after_help = "Exit codes: 0 success, 1 integrity, 2 usage, 3 rejected, 4 not found, \
                  5 ambiguous, 6 conflict, 7 store failure, 8 remote failure \
                  (docs/exit-codes.md; JSON: docs/json.md)."
)]
pub struct Cli {
    /// The store directory [default: $CESTORE_DIR, else $XDG_DATA_HOME/cestore,
    /// else ~/.local/share/cestore]
    #[arg(long, global = true, value_name = "STORE")]
    pub store: Option<PathBuf>,

    /// Print one JSON object on stdout instead of text, for every outcome,
    /// command-line errors included (see docs/json.md).
    #[arg(long, global = true)]
    pub json: bool,

    /// Use a store owned by another user or writable by group or others
    /// (also CESTORE_TRUST_STORE=1); whoever can write a store decides what
    /// its views show.
    #[arg(long, global = true)]
    pub trust_store: bool,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a plugin release as the reference does, and store it.
    Ingest {
        /// The release's source directory.
        dir: PathBuf,
        /// The exact version its plugin.json must carry (X.Y.Z).
        #[arg(long, value_name = "X.Y.Z")]
        version: String,
    },
    /// Validate a plugin release as ingest does and print its manifest
    /// digest, storing nothing (no store is opened or created).
    Digest {
        /// The release's source directory.
        dir: PathBuf,
        /// The exact version its plugin.json must carry (X.Y.Z).
        #[arg(long, value_name = "X.Y.Z")]
        version: String,
    },
    /// Show what the store knows about a snapshot.
    Show {
        /// A manifest digest or unique prefix.
        digest: String,
        /// List the files in manifest order.
        #[arg(long)]
        files: bool,
        /// Write the canonical manifest bytes exactly as stored.
        #[arg(long, conflicts_with = "files")]
        manifest: bool,
    },
    /// Materialise a frozen read-only view of a snapshot at a new path.
    Checkout {
        /// A manifest digest or unique prefix.
        digest: String,
        /// Where to put the view; it must not exist.
        dest: PathBuf,
        /// How to make the files: hard links with copies where a link is
        /// refused (auto), hard links only, copies, or reflinks.
        #[arg(long, value_enum, default_value = "auto")]
        method: view::Method,
        /// Fail rather than copy where a hard link is refused.
        #[arg(long)]
        require_hardlinks: bool,
    },
    /// Remove a view made by checkout; never changes a file's mode.
    Discard {
        /// The view's path.
        dest: PathBuf,
        /// Remove a path that is not a recorded view, provided that it is
        /// exactly this snapshot.
        #[arg(long, value_name = "DIGEST")]
        force: Option<String>,
    },
    /// Stage a run: check the arms as the reference does, ingest the release
    /// (instant when stored), make its view, and print every arm's mounts.
    Stage {
        /// A benchmark arm; repeat for each arm of the run.
        #[arg(long = "arm", value_name = "ARM", required = true)]
        arms: Vec<String>,
        /// The CE plugin release's source directory.
        #[arg(long, value_name = "DIR", conflicts_with = "digest")]
        plugin_dir: Option<PathBuf>,
        /// The exact version the release's plugin.json must carry.
        #[arg(long, value_name = "X.Y.Z", conflicts_with = "digest")]
        plugin_version: Option<String>,
        /// A snapshot already in the store, instead of a source directory.
        #[arg(long)]
        digest: Option<String>,
        /// Check the view out here (it must not exist); without it the
        /// store's shared view is used.
        #[arg(long, value_name = "DEST")]
        dest: Option<PathBuf>,
        /// How to make the view's files.
        #[arg(long, value_enum, default_value = "auto")]
        method: view::Method,
        /// The harness root holding gitnexus/ and gitnexus-shared/: adds the
        /// pinned GitNexus runtime's mounts to every arm.
        #[arg(long, value_name = "ROOT")]
        gitnexus_root: Option<PathBuf>,
        /// The version the GitNexus runtime's package.json must carry.
        #[arg(long, value_name = "V", default_value = crate::gitnexus::PINNED_VERSION, requires = "gitnexus_root")]
        gitnexus_version: String,
        /// Refuse an arm that is neither a ce_* arm nor given with
        /// --known-arm (a typo such as ce_reviw otherwise silently gets no
        /// plugin, as in the reference).
        #[arg(long)]
        strict_arms: bool,
        /// A non-CE arm --strict-arms accepts; repeat for each.
        #[arg(long = "known-arm", value_name = "ARM", requires = "strict_arms")]
        known_arms: Vec<String>,
    },
    /// List the snapshots in the store.
    List {
        /// Only this version.
        #[arg(long)]
        version: Option<String>,
        /// Only this plugin name.
        #[arg(long)]
        name: Option<String>,
    },
    /// List ingest events: when, from where, by whom, with which cestore.
    Log {
        /// Only this snapshot's events (a digest or unique prefix).
        digest: Option<String>,
    },
    /// List the snapshots that contain a content or a path.
    ///
    /// --path takes an exact path, a directory (skills/ce-plan or
    /// skills/ce-plan/: every file below it), or a glob when it holds * or ?:
    /// `*` matches within one path component, `?` one character, and a `**`
    /// component any number of components (skills/**/SKILL.md).
    Find {
        /// A file content's SHA-256, or a prefix only one stored content has.
        #[arg(
            long,
            value_name = "SHA256",
            conflicts_with = "path",
            required_unless_present = "path"
        )]
        object: Option<String>,
        /// A path relative to the plugin root (skills/ce-plan/SKILL.md), a
        /// directory (skills/ce-plan/), or a glob ('skills/*/SKILL.md').
        #[arg(long, value_name = "PATH|DIR|GLOB")]
        path: Option<String>,
    },
    /// Re-hash objects and check the catalogue; or, with --tree, audit a
    /// directory against a snapshot. Exits 1 on any problem.
    Verify {
        /// Snapshots to check (digests or unique prefixes); all when none.
        digests: Vec<String>,
        /// Audit this directory against the one snapshot named.
        #[arg(long, value_name = "DIR")]
        tree: Option<PathBuf>,
        /// Restore damaged or missing objects from files in this directory
        /// whose SHA-256 matches.
        #[arg(long, value_name = "DIR", conflicts_with = "tree")]
        repair_from: Option<PathBuf>,
    },
    /// List the files added, removed, or changed in content or exec bit
    /// between two snapshots.
    Diff {
        /// The earlier snapshot.
        a: String,
        /// The later snapshot.
        b: String,
    },
    /// Forget a snapshot; refuses while views of it are recorded.
    Rm {
        /// A digest or unique prefix.
        digest: String,
        /// Forget it even though views are recorded (the views stay on disk).
        #[arg(long)]
        force: bool,
    },
    /// Remove objects no snapshot uses, stale temporary files and orphan
    /// shared views.
    Gc {
        /// Only report what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Rebuild the catalogue from the manifests kept in the store: after the
    /// catalogue was lost, emptied or damaged, or disagrees with them.
    ///
    /// An unusable catalogue is set aside (renamed, never deleted) and what
    /// it still holds is salvaged. Nothing else is removed.
    Recover,
    /// Print the path of the snapshot's shared frozen view in the store,
    /// making it once when absent.
    Path {
        /// A manifest digest or unique prefix.
        digest: String,
    },
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
    Mounts {
        /// The benchmark arm.
        #[arg(long)]
        arm: String,
        /// The plugin view directory to mount for a CE arm: a view cestore
        /// recorded, or a shared view (see --unchecked).
        #[arg(long, value_name = "PATH")]
        view: Option<PathBuf>,
        /// A manifest digest or unique prefix: with --view, the snapshot the
        /// view must show; alone, mount the snapshot's shared view in the store
        /// (made by `cestore path`).
        #[arg(long, value_name = "DIGEST")]
        digest: Option<String>,
        /// Mount --view as it is, without checking that cestore made it; the
        /// report then has no digest.
        #[arg(long, requires = "view", conflicts_with = "digest")]
        unchecked: bool,
        /// A harness root holding gitnexus/ and gitnexus-shared/: add the
        /// pinned GitNexus runtime's mounts, checked as the reference checks them.
        #[arg(long, value_name = "ROOT")]
        gitnexus_root: Option<PathBuf>,
        /// The version the GitNexus runtime's package.json must carry.
        #[arg(long, value_name = "V", default_value = crate::gitnexus::PINNED_VERSION, requires = "gitnexus_root")]
        gitnexus_version: String,
        /// Print the JSON report or bubblewrap arguments (bwrap0: NUL-separated,
        /// for `bwrap --args FD`) [default: text, or json with --json].
        #[arg(long, value_enum)]
        format: Option<cmd::mounts::Format>,
    },
    /// Publish a stored snapshot to an OCI registry as
    /// REGISTRY/REPOSITORY:sha256-DIGEST, uploading only the blobs it lacks;
    /// with REGISTRY/REPOSITORY:TAG, under TAG (e.g. 3.23.1) as well.
    ///
    /// Credentials come from CESTORE_REGISTRY_TOKEN, or CESTORE_REGISTRY_USER and
    /// CESTORE_REGISTRY_PASSWORD, or $DOCKER_CONFIG/config.json (else
    /// ~/.docker/config.json); never from the command line. See docs/remote.md.
    Push {
        /// A manifest digest or unique prefix.
        digest: String,
        /// REGISTRY/REPOSITORY, e.g. registry.example/cestore/ce, or
        /// REGISTRY/REPOSITORY:TAG to publish under a human tag too.
        remote: String,
        /// Speak plain HTTP, for a loopback or insecure registry (HTTPS otherwise).
        #[arg(long)]
        plain_http: bool,
        /// Transfers in flight at once.
        #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        jobs: u16,
        /// The most layers one image manifest lists; more distinct files than
        /// this are pushed as an OCI index of several manifests.
        #[arg(long, value_name = "N", default_value_t = crate::remote::oci::DEFAULT_MAX_LAYERS as u32, value_parser = clap::value_parser!(u32).range(1..))]
        max_layers: u32,
        /// Seconds without progress on a registry connection (no byte sent or
        /// received) before giving up with exit 8; connecting waits at most
        /// 10 s, or SECS when shorter.
        #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: u64,
    },
    /// Take a snapshot from an OCI registry into the store, checking the
    /// manifest digest, the ingest rules and every blob's hash first.
    Pull {
        /// REGISTRY/REPOSITORY:sha256-DIGEST, REGISTRY/REPOSITORY:TAG, or
        /// REGISTRY/REPOSITORY@sha256:HEX (the snapshot's digest or the OCI
        /// manifest's).
        reference: String,
        /// Speak plain HTTP, for a loopback or insecure registry (HTTPS otherwise).
        #[arg(long)]
        plain_http: bool,
        /// Transfers in flight at once.
        #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        jobs: u16,
        /// Seconds without progress on a registry connection (no byte sent or
        /// received) before giving up with exit 8; connecting waits at most
        /// 10 s, or SECS when shorter.
        #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: u64,
    },
    /// Write a snapshot to one portable bundle file: a tar of the canonical
    /// manifest and the objects, optionally zstd-compressed.
    Export {
        /// A manifest digest or unique prefix.
        digest: String,
        /// The bundle to write; it must not exist [default: DIGEST.tar or DIGEST.tar.zst].
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// Compress the bundle with zstd.
        #[arg(long)]
        zstd: bool,
    },
    /// Take a snapshot from a bundle made by export (tar or tar+zstd, told
    /// apart by their first bytes), checking every hash first.
    Import {
        /// The bundle, or - for standard input.
        file: PathBuf,
        /// The manifest digest the bundle must hold (64 hex).
        #[arg(long, value_name = "DIGEST")]
        digest: Option<String>,
        /// Only verify the bundle (every hash, its form, the ingest rules):
        /// store nothing, and open no store.
        #[arg(long)]
        check: bool,
    },
}

/// Runs the parsed command line, writing its report to `out`. Returns the exit code.
pub fn execute(cli: &Cli, out: &mut dyn Write) -> Result<u8> {
    let root = match &cli.command {
        // The one command that needs no store.
        Command::Digest { .. } => PathBuf::new(),
        _ => store::locate(cli.store.as_deref())?,
    };
    if cli.trust_store {
        store::trust_any_store();
    }
    match &cli.command {
        Command::Ingest { dir, version } => {
            let opts = cmd::ingest::IngestOptions {
                source: dir,
                version,
            };
            emit(cli, out, &cmd::ingest::ingest(&root, &opts)?)
        }
        Command::Digest { dir, version } => emit(cli, out, &cmd::digest::digest(dir, version)?),
        Command::Show {
            digest,
            files,
            manifest,
        } => {
            if *manifest {
                return emit(cli, out, &cmd::show::manifest(&root, digest)?);
            }
            let opts = cmd::show::ShowOptions {
                digest,
                files: *files,
            };
            emit(cli, out, &cmd::show::show(&root, &opts)?)
        }
        Command::Checkout {
            digest,
            dest,
            method,
            require_hardlinks,
        } => {
            let opts = cmd::checkout::CheckoutOptions {
                digest,
                dest,
                method: *method,
                require_hardlinks: *require_hardlinks,
            };
            emit(cli, out, &cmd::checkout::checkout(&root, &opts)?)
        }
        Command::Discard { dest, force } => {
            let opts = cmd::discard::DiscardOptions {
                dest,
                force_digest: force.as_deref(),
            };
            emit(cli, out, &cmd::discard::discard(&root, &opts)?)
        }
        Command::Path { digest } => emit(cli, out, &cmd::path::path(&root, digest)?),
        Command::Stage {
            arms,
            plugin_dir,
            plugin_version,
            digest,
            dest,
            method,
            gitnexus_root,
            gitnexus_version,
            strict_arms,
            known_arms,
        } => {
            let release = match (plugin_dir, plugin_version, digest) {
                (_, _, Some(d)) => cmd::stage::Release::Digest(d),
                (None, None, None) => cmd::stage::Release::None,
                (dir, version, None) => cmd::stage::Release::Source {
                    dir: dir.as_deref(),
                    version: version.as_deref(),
                },
            };
            let opts = cmd::stage::StageOptions {
                arms,
                release,
                dest: dest.as_deref(),
                method: *method,
                gitnexus_root: gitnexus_root.as_deref(),
                gitnexus_version,
                strict_arms: *strict_arms,
                known_arms,
            };
            emit(cli, out, &cmd::stage::stage(&root, &opts)?)
        }
        Command::List { version, name } => emit(
            cli,
            out,
            &cmd::list::list(&root, version.as_deref(), name.as_deref())?,
        ),
        Command::Log { digest } => emit(cli, out, &cmd::list::log(&root, digest.as_deref())?),
        Command::Find { object, path } => {
            let query = match (object, path) {
                (Some(o), _) => cmd::list::FindQuery::Object(o),
                (None, Some(p)) => cmd::list::FindQuery::Path(p),
                (None, None) => return Err(Error::Usage("find needs --object or --path".into())),
            };
            emit(cli, out, &cmd::list::find(&root, &query)?)
        }
        Command::Verify {
            digests,
            tree,
            repair_from,
        } => {
            if let Some(dir) = tree {
                let [digest] = digests.as_slice() else {
                    return Err(Error::Usage(
                        "verify --tree DIR takes exactly one DIGEST".into(),
                    ));
                };
                return emit(cli, out, &cmd::verify::verify_tree(&root, dir, digest)?);
            }
            let opts = cmd::verify::VerifyOptions {
                digests,
                repair_from: repair_from.as_deref(),
                progress: !cli.json,
            };
            emit(cli, out, &cmd::verify::verify(&root, &opts)?)
        }
        Command::Diff { a, b } => emit(cli, out, &cmd::diff::diff(&root, a, b)?),
        Command::Rm { digest, force } => emit(cli, out, &cmd::gc::rm(&root, digest, *force)?),
        Command::Recover => emit(cli, out, &cmd::recover::recover(&root)?),
        Command::Gc { dry_run } => emit(cli, out, &cmd::gc::gc(&root, *dry_run, !cli.json)?),
        Command::Mounts {
            arm,
            view,
            digest,
            unchecked,
            gitnexus_root,
            gitnexus_version,
            format,
        } => {
            let opts = cmd::mounts::MountsOptions {
                arm,
                view: cmd::mounts::ViewSource::from_args(
                    view.as_deref(),
                    digest.as_deref(),
                    *unchecked,
                ),
                gitnexus_root: gitnexus_root.as_deref(),
                gitnexus_version,
                format: *format,
                json: cli.json,
            };
            let report = cmd::mounts::mounts(&root, &opts)?;
            write_report(report.is_json(), out, &report)
                .map_err(|e| Error::io("write the report", "<stdout>", e))?;
            Ok(0)
        }
        Command::Push {
            digest,
            remote,
            plain_http,
            jobs,
            max_layers,
            timeout,
        } => {
            let opts = cmd::push::PushOptions {
                digest,
                remote,
                remote_options: crate::remote::Options {
                    plain_http: *plain_http,
                    max_layers: *max_layers as usize,
                    push: true,
                    timeouts: crate::remote::oci::client::Timeouts::from_secs(*timeout),
                },
                jobs: usize::from(*jobs),
                progress: !cli.json,
            };
            emit(cli, out, &cmd::push::push(&root, &opts)?)
        }
        Command::Pull {
            reference,
            plain_http,
            jobs,
            timeout,
        } => {
            let opts = cmd::pull::PullOptions {
                reference,
                remote_options: crate::remote::Options {
                    plain_http: *plain_http,
                    timeouts: crate::remote::oci::client::Timeouts::from_secs(*timeout),
                    ..crate::remote::Options::default()
                },
                jobs: usize::from(*jobs),
                progress: !cli.json,
            };
            emit(cli, out, &cmd::pull::pull(&root, &opts)?)
        }
        Command::Export {
            digest,
            output,
            zstd,
        } => {
            let opts = cmd::bundle::ExportOptions {
                digest,
                output: output.as_deref(),
                zstd: *zstd,
            };
            emit(cli, out, &cmd::bundle::export(&root, &opts)?)
        }
        Command::Import {
            file,
            digest,
            check,
        } => {
            let opts = cmd::bundle::ImportOptions {
                file,
                digest: digest.as_deref(),
                check: *check,
            };
            emit(cli, out, &cmd::bundle::import(&root, &opts)?)
        }
    }
}

/// Writes a report in the form the command line asked for.
fn emit<R: Report>(cli: &Cli, out: &mut dyn Write, report: &R) -> Result<u8> {
    write_report(cli.json, out, report)
        .map_err(|e| Error::io("write the report", "<stdout>", e))?;
    Ok(report.exit_code())
}

/// Writes a report as JSON (with `"ok": true`) or as text.
pub fn write_report<R: Report>(json: bool, out: &mut dyn Write, report: &R) -> io::Result<()> {
    if json {
        #[derive(serde::Serialize)]
        struct Envelope<'a, R> {
            ok: bool,
            #[serde(flatten)]
            report: &'a R,
        }
        let ok = report.exit_code() == 0;
        serde_json::to_writer(&mut *out, &Envelope { ok, report })?;
        writeln!(out)?;
    } else {
        report.human(out)?;
    }
    out.flush()
}

/// The JSON form of an error: `{"ok": false, "error": {...}}`.
pub fn error_json(err: &Error) -> serde_json::Value {
    let mut e = serde_json::json!({
        "code": err.exit_code(),
        "kind": err.kind(),
        "message": error_chain(err),
    });
    if let Error::Rejected(r) = err {
        e["rule"] = r.rule().into();
        if let Some(p) = r.path() {
            e["path"] = p.to_string_lossy().into();
        }
    }
    if let Error::GitNexus(g) = err {
        e["rule"] = g.rule().into();
        if let crate::gitnexus::GitNexusError::RootUnavailable { path, .. } = g {
            e["path"] = path.to_string_lossy().into();
        }
    }
    match err {
        Error::Io { path, .. }
        | Error::NotFound { path, .. }
        | Error::Absent { path, .. }
        | Error::Catalogue { path, .. }
        | Error::CatalogueTooNew { path, .. }
        | Error::BadStore { path, .. } => {
            e["path"] = json_path(path).into();
        }
        _ => {}
    }
    serde_json::json!({ "ok": false, "error": e })
}

/// The one-line message of a command line the parser refused: its first
/// paragraph on one line, without the `error: ` prefix.
pub fn usage_message(err: &clap::Error) -> String {
    if err.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "no command given; see `cestore --help` for the commands".into();
    }
    let text = err.render().to_string();
    let first: Vec<&str> = text
        .trim_start()
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let first = first.join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    format!("{first}; see --help")
}

/// A path as JSON carries it: absolute, unless it names a stream (`<stdout>`).
fn json_path(path: &std::path::Path) -> String {
    if path.as_os_str().as_encoded_bytes().starts_with(b"<") {
        return path.to_string_lossy().into_owned();
    }
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .into_owned()
}
