//! The command line: argument definitions ([`args`]), dispatch to the
//! commands, and output at the edge ([`output`], [`text`]), with the
//! `stage --hold` protocol ([`hold`]).
//!
//! Each command returns a report; only here is it written for people or as
//! JSON (`--json`). The exit code comes from the report or from the error (see
//! [`crate::error`]). A URL given where a local path is read is refused
//! first ([`urls`]).

pub mod args;
pub mod hold;
pub mod output;
pub mod text;
pub mod urls;

use std::io::Write;
use std::path::PathBuf;

pub use self::args::{Cli, Command};
use self::output::{emit, Output};
pub use self::output::{
    error_chain, error_json, error_message, hint, usage_message, write_report, Report,
};
use crate::cmd;
use crate::error::{Error, Result};
use crate::profile::ce::rules::ArmRule;
use crate::store;

/// Runs the parsed command line, writing its report to `out`. Returns the exit code.
pub fn execute(cli: &Cli, out: &mut dyn Write) -> Result<u8> {
    urls::check(&cli.command)?;
    let root = if cli.command.needs_store() {
        store::locate(cli.store.as_deref())?
    } else {
        PathBuf::new()
    };
    if cli.trust_store {
        store::trust_any_store();
    }
    let progress = !cli.json;
    let output = output::Output::choose(cli)?;
    match &cli.command {
        Command::Ingest(a) => ingest(output, &root, a, out),
        Command::IngestProfile(a) if a.profile == args::TreeProfileArg::Environment => {
            let members = a.environment_members()?;
            let key = args::signing_key(a.sign_with.as_deref())?;
            emit(
                output,
                out,
                &crate::store::ingest::environment::record(
                    &|need| cmd::open(&root, need),
                    &members,
                    a.name.as_deref(),
                    key.as_ref(),
                )?,
            )
        }
        Command::IngestProfile(a) => {
            let key = args::signing_key(a.sign_with.as_deref())?;
            let mut opts = a.options()?;
            opts.sign_with = key.as_ref();
            emit(
                output,
                out,
                &crate::store::ingest::tree::ingest_tree(&|need| cmd::open(&root, need), &opts)?,
            )
        }
        Command::Digest(a) => emit(output, out, &cmd::digest::digest(&a.into())?),
        Command::Show(a) if a.manifest => {
            emit(output, out, &cmd::show::manifest(&root, &a.digest)?)
        }
        Command::Show(a) => fitted(cli, output, &root, out, &cmd::show::show(&root, &a.into())?),
        Command::Checkout(a) if a.writable => emit(
            output,
            out,
            &cmd::checkout::writable(&root, &a.digest, &a.dest, a.max_fallback_bytes)?,
        ),
        Command::Checkout(a) => emit(output, out, &cmd::checkout::checkout(&root, &a.into())?),
        Command::Materialize(a) => emit(
            output,
            out,
            &cmd::checkout::materialize(&root, &a.digest, &a.clone, a.max_fallback_bytes)?,
        ),
        Command::Discard(a) => emit(output, out, &cmd::discard::discard(&root, &a.into())?),
        Command::Path(a) => emit(output, out, &cmd::path::path(&root, &a.digest)?),
        Command::Stage(a) => stage(output, &root, a, out),
        Command::List(a) => {
            let report = cmd::list::list(&root, a.version.as_deref(), a.name.as_deref())?;
            fitted(cli, output, &root, out, &report)
        }
        Command::Log(a) => fitted(
            cli,
            output,
            &root,
            out,
            &cmd::list::log(&root, a.digest.as_deref())?,
        ),
        Command::Find(a) => {
            let query = cmd::list::FindQuery::try_from(a)?;
            fitted(cli, output, &root, out, &cmd::list::find(&root, &query)?)
        }
        Command::Verify(a) => verify(output, &root, a, progress, out),
        Command::Audit(a) => audit(cli, output, &root, a, progress, out),
        Command::Diff(a) => emit(output, out, &cmd::diff::diff(&root, &a.a, &a.b)?),
        Command::Rm(a) => emit(output, out, &cmd::gc::rm(&root, &a.digest, a.force)?),
        Command::Recover => emit(output, out, &cmd::recover::recover(&root)?),
        Command::Gc(a) => emit(
            output,
            out,
            &cmd::gc::gc(&root, a.dry_run, a.force, progress)?,
        ),
        Command::Mounts(a) => {
            let key = args::signing_key(a.sign_with.as_deref())?;
            let opts = cmd::mounts::MountsOptions {
                sign_with: key.as_ref(),
                ..a.options()
            };
            warn_of_arms([opts.arm], &opts.arm_rule);
            output::emit_mounts(output, out, &cmd::mounts::mounts(&root, &opts)?)
        }
        Command::Push(a) => emit(output, out, &cmd::push::push(&root, &a.options(progress))?),
        Command::Pull(a) => {
            let trusted = a.trust.keys()?;
            emit(
                output,
                out,
                &cmd::pull::pull(&root, &a.options(progress, &trusted))?,
            )
        }
        Command::Export(a) => emit(output, out, &cmd::bundle::export(&root, &a.into())?),
        Command::Import(a) => {
            let trusted = a.trust.keys()?;
            emit(
                output,
                out,
                &cmd::bundle::import(&root, &a.options(&trusted))?,
            )
        }
        Command::Key(args::KeyCommand::Generate { file }) => {
            emit(output, out, &cmd::key::generate(file)?)
        }
        Command::Sign(a) => emit(output, out, &cmd::sign::sign(&root, &a.digest, &a.key)?),
        Command::Attestations(a) => {
            let keys = a.trust.keys()?;
            emit(
                output,
                out,
                &cmd::sign::attestations(&root, &a.digest, &keys)?,
            )
        }
        Command::Substituters => emit(output, out, &cmd::substituters::substituters(&root)?),
        Command::ExitCodes => emit(output, out, &cmd::exit_codes::exit_codes()),
        Command::Rules => emit(output, out, &cmd::rules::rules()),
        Command::Help(a) => emit(output, out, &help(&a.command)?),
    }
}

/// Runs `ingest`, signing with `--sign-with`'s key (checked before anything
/// else).
fn ingest(
    output: Output,
    root: &std::path::Path,
    a: &args::IngestArgs,
    out: &mut dyn Write,
) -> Result<u8> {
    let key = args::signing_key(a.sign_with.as_deref())?;
    let mut opts = cmd::ingest::IngestOptions::from(&a.release);
    opts.sign_with = key.as_ref();
    opts.refuse_secrets = a.refuse_secrets;
    let report = cmd::ingest::ingest(root, &opts)?;
    warn_of_secrets(&report.ingest);
    emit(output, out, &report)
}

/// Runs `stage`, held (`--hold`) or not, signing with `--sign-with`'s key.
fn stage(
    output: Output,
    root: &std::path::Path,
    a: &args::StageArgs,
    out: &mut dyn Write,
) -> Result<u8> {
    let key = args::signing_key(a.sign_with.as_deref())?;
    let members = a.members()?;
    let mut opts = cmd::stage::StageOptions::from(a);
    opts.sign_with = key.as_ref();
    opts.environment = a
        .environment
        .as_deref()
        .map(|name| cmd::stage::EnvironmentRequest {
            name,
            members: &members,
        });
    warn_of_arms(opts.arms.iter().map(String::as_str), &opts.arm_rule);
    if a.hold {
        hold::held_stage(output, root, &opts, out)
    } else {
        let report = cmd::stage::stage(root, &opts)?;
        if let Some(ingest) = &report.ingest {
            warn_of_secrets(ingest);
        }
        emit(output, out, &report)
    }
}

/// Warns on stderr of each file an ingest kept whose content looks like a
/// secret: the reference's filters go by name only, and so the snapshot
/// holds it (`--refuse-secrets` refuses such a release).
pub(super) fn warn_of_secrets(ingest: &cmd::ingest::IngestStats) {
    for found in &ingest.secrets_by_content {
        output::warn(&format!(
            "kept '{}', which looks like {} by its content (line {}): the reference's \
             filters go by name only (--refuse-secrets refuses such a release)",
            found.path,
            found.kind.describe(),
            found.line
        ));
    }
}

/// Warns on stderr of each arm that looks mistaken ([`ArmRule::doubtful`]):
/// it gets no plugin, as the reference gives it none. With `--strict-arms`
/// the command refuses it instead.
fn warn_of_arms<'s>(arms: impl IntoIterator<Item = &'s str>, rule: &ArmRule<'_>) {
    if rule.strict {
        return;
    }
    for doubt in rule.doubtful(arms) {
        output::warn(&format!(
            "arm '{}' is not a known arm ({}), so it gets no plugin, as in the reference{} \
             (--known-arm {} declares it; --strict-arms refuses any arm not known)",
            doubt.arm,
            rule.known_arms().join(", "),
            crate::profile::ce::rules::did_you_mean(&doubt.closest),
            output::shell_word(&doubt.arm)
        ));
    }
}

/// Runs `verify`: of the store (with `--trusted-key`, its attestations too),
/// of a tree (`--tree`), or of a snapshot against its commit (`--source`).
fn verify(
    output: Output,
    root: &std::path::Path,
    a: &args::VerifyArgs,
    progress: bool,
    out: &mut dyn Write,
) -> Result<u8> {
    if a.trust.given() && (a.tree.is_some() || a.source.is_some()) {
        return Err(crate::error::Request::TrustedKeyWithTreeOrSource.into());
    }
    match (a.source_check()?, a.tree_audit()?) {
        (Some((repo, digest)), _) => emit(
            output,
            out,
            &cmd::verify::verify_source(root, repo, digest)?,
        ),
        (None, Some((dir, digest))) => {
            emit(output, out, &cmd::verify::verify_tree(root, dir, digest)?)
        }
        (None, None) => {
            let keys = a.trust.keys()?;
            emit(
                output,
                out,
                &cmd::verify::verify(root, &a.options(&keys, progress))?,
            )
        }
    }
}

/// Writes a report whose text follows a [`text::Layout`]: as JSON with
/// `--json`, else laid out as [`text::Layout::decide`] says for this stdout
/// and `--short`.
fn fitted<R: text::Fitted>(
    cli: &Cli,
    output: Output,
    root: &std::path::Path,
    out: &mut dyn Write,
    report: &R,
) -> Result<u8> {
    if output == Output::Json {
        return emit(output, out, report);
    }
    let layout = text::Layout::decide(cli.short, root, report);
    report
        .fitted(&layout, out)
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("write the report", "<stdout>", e))?;
    Ok(report.exit_code())
}

/// Runs `audit`, whose report is printed as a table, a Markdown table or JSON.
fn audit(
    cli: &Cli,
    output: Output,
    root: &std::path::Path,
    a: &args::AuditArgs,
    progress: bool,
    out: &mut dyn Write,
) -> Result<u8> {
    let sources: Vec<_> = a
        .files
        .iter()
        .map(|f| cmd::audit::Source::from_arg(f))
        .collect();
    let keys = a.trust.keys()?;
    let opts = cmd::audit::AuditOptions {
        substitute_root: Some(root),
        ..a.options(&sources, &keys, progress)
    };
    let report = cmd::audit::audit(root, &opts)?;
    fitted(
        cli,
        output,
        root,
        out,
        &text::AuditOutput {
            report,
            style: output,
        },
    )
}

/// The report of `cestore help`: the help text of the command named.
#[derive(Debug, serde::Serialize)]
pub struct HelpReport {
    /// The help text, as `--help` prints it.
    pub help: String,
}

impl Report for HelpReport {
    fn human(&self, w: &mut dyn Write) -> std::io::Result<()> {
        w.write_all(self.help.as_bytes())?;
        if self.help.ends_with('\n') {
            Ok(())
        } else {
            writeln!(w)
        }
    }
}

/// The long help of the command `path` names (of cestore itself when empty).
fn help(path: &[String]) -> Result<HelpReport> {
    use clap::CommandFactory;
    let mut command = Cli::command();
    command.build();
    for name in path {
        command = command
            .find_subcommand(name)
            .cloned()
            .ok_or_else(|| crate::error::Request::NoCommand { name: name.clone() })?;
    }
    Ok(HelpReport {
        help: command.render_long_help().to_string(),
    })
}
