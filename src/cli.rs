//! The command line: argument definitions and dispatch to the commands.
//!
//! Each command returns a [`Report`]; only here is it written for people or as
//! JSON (`--json`). The exit code comes from the report or from the error (see
//! [`crate::error`]).

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cmd::{self, Report};
use crate::error::{Error, Result};
use crate::store;
use crate::view;

/// A content-addressed snapshot store for pinned plugin releases.
///
/// Ingest a release once, check out frozen read-only views of it instantly,
/// and audit any run by its manifest digest.
#[derive(Debug, Parser)]
#[command(name = "cestore", version, max_term_width = 100)]
pub struct Cli {
    /// The store directory [default: $CESTORE_DIR, else $XDG_DATA_HOME/cestore,
    /// else ~/.local/share/cestore]
    #[arg(long, global = true, value_name = "STORE")]
    pub store: Option<PathBuf>,

    /// Print one JSON object instead of text.
    #[arg(long, global = true)]
    pub json: bool,

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
    /// Print the path of the snapshot's shared frozen view in the store,
    /// making it once when absent.
    Path {
        /// A manifest digest or unique prefix.
        digest: String,
    },
}

/// Runs the parsed command line, writing its report to `out`. Returns the exit code.
pub fn execute(cli: &Cli, out: &mut dyn Write) -> Result<u8> {
    let root = store::locate(cli.store.as_deref())?;
    match &cli.command {
        Command::Ingest { dir, version } => {
            let opts = cmd::ingest::IngestOptions {
                source: dir,
                version,
            };
            emit(cli, out, &cmd::ingest::ingest(&root, &opts)?)
        }
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
    }
}

/// Writes a report in the form the command line asked for.
fn emit<R: Report>(cli: &Cli, out: &mut dyn Write, report: &R) -> Result<u8> {
    write_report(cli.json, out, report).map_err(|e| Error::io("write the report", "<stdout>", e))?;
    Ok(0)
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
        serde_json::to_writer(&mut *out, &Envelope { ok: true, report })?;
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
    if let Error::Io { path, .. } = err {
        e["path"] = path.to_string_lossy().into();
    }
    serde_json::json!({ "ok": false, "error": e })
}

/// An error and its sources, joined by ": ".
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = e.source();
    }
    s
}
