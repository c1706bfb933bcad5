//! The command line's output: a report written for people or as JSON, the
//! JSON form of an error, and the forms `mounts` prints.
//!
//! Every command's report is a serde type beside the library function that
//! makes it; [`Report`] adds its human text (in [`super::text`]) and the
//! exit code it calls for. Only here is one form chosen: `--json` (and
//! `mounts --format`) decide.

use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;

use crate::cmd::mounts::MountsReport;
pub use crate::error::error_chain;
use crate::error::{Error, Result};
use crate::profile::ce::rules::Rejection;
use crate::remote::RemoteError;

/// A command's result, printable for people or as JSON.
pub trait Report: serde::Serialize {
    /// Writes the report for a person to read.
    fn human(&self, w: &mut dyn Write) -> io::Result<()>;

    /// The exit code the report calls for: 0 unless it found problems.
    fn exit_code(&self) -> u8 {
        0
    }
}

/// Writes a report in the form asked for, and returns its exit code.
pub fn emit<R: Report>(output: Output, out: &mut dyn Write, report: &R) -> Result<u8> {
    write_report(output, out, report).map_err(|e| Error::io("write the report", "<stdout>", e))?;
    Ok(report.exit_code())
}

/// Writes a report as JSON (with `"ok": true`) or as text (every form but
/// JSON is the report's own text: see [`Report::human`]).
pub fn write_report<R: Report>(output: Output, out: &mut dyn Write, report: &R) -> io::Result<()> {
    if output == Output::Json {
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

/// Writes a warning on stderr, `cestore: warning: MESSAGE`: the command
/// goes on, and its report (JSON included) is unchanged.
pub fn warn(message: &str) {
    let _ = writeln!(io::stderr().lock(), "cestore: warning: {message}");
}

/// A word as a POSIX shell reads it back (`shell_quote`), as text.
pub fn shell_word(word: &str) -> String {
    String::from_utf8_lossy(&shell_quote(word.as_bytes())).into_owned()
}

/// The JSON form of an error: `{"ok": false, "error": {...}}`.
pub fn error_json(err: &Error) -> serde_json::Value {
    let mut e = serde_json::json!({
        "code": err.exit_code(),
        "kind": err.kind(),
        "message": error_message(err),
    });
    if let Some(rule) = err.rule() {
        e["rule"] = rule.into();
    }
    if let Some(words) = match err {
        Error::Rejected(r) => crate::profile::ce::reference::reference_message(r),
        _ => None,
    } {
        e["reference_message"] = words.into();
    }
    if let Some(hint) = hint(err) {
        e["hint"] = hint.into();
    }
    if let Some(path) = err.path() {
        // A rule names the path as the reference does; other errors, absolute.
        e["path"] = if err.rule().is_some() {
            path.to_string_lossy().into_owned()
        } else {
            json_path(path)
        }
        .into();
    }
    if let Some(matches) = ambiguity_matches(err) {
        e["matches"] = matches;
    }
    if let Error::UnknownVersion { versions, .. } = err {
        e["versions"] = versions.clone().into();
    }
    serde_json::json!({ "ok": false, "error": e })
}

/// The next step after an error, when the command line knows one: printed
/// after the error as `hint: ...`, and as the JSON error's `hint`.
pub fn hint(err: &Error) -> Option<String> {
    match err {
        Error::InRevision { error, .. } => hint(error),
        Error::Exists {
            path,
            view_of: Some(digest),
            ..
        } => Some(format!(
            "'{path}' is a view of {digest} that cestore recorded; \
             `cestore discard {path}` removes it",
            path = path.display()
        )),
        Error::Misuse(m) => m.hint(shell_word),
        Error::StoreNotFound { .. } => Some(
            "name a store with --store STORE or CESTORE_DIR; \
             `cestore ingest DIR --version X.Y.Z` creates one"
                .into(),
        ),
        Error::StoreNotWritable { .. } => Some(
            "every command that changes the store needs write access to it: an ingest \
             records its snapshot, and a checkout records its view, so checkout, stage \
             and path need it too; use a store you can write (--store STORE or CESTORE_DIR)"
                .into(),
        ),
        Error::Rejected(
            Rejection::ManifestDirUnavailable { path, .. }
            | Rejection::ManifestDirNotReal { path }
            | Rejection::ManifestMissing { path },
        ) => {
            // The profile's files directory, or a file in it.
            let dir = path
                .ancestors()
                .find(|p| {
                    p.file_name()
                        .is_some_and(|n| n == crate::profile::ce::LAYOUT.files_dir)
                })?
                .parent()?;
            Some(format!(
                "'{}' must be the plugin's root: the directory that holds {}",
                dir.display(),
                crate::profile::ce::manifest::PLUGIN_JSON
            ))
        }
        Error::Io { source, path, .. }
            if source.kind() == std::io::ErrorKind::StorageFull
                || source.raw_os_error() == Some(libc::ENOSPC) =>
        {
            Some(format!(
                "the filesystem holding '{}' is full: free space on it (`cestore gc` \
                 removes what no snapshot uses), then run the command again",
                path.display()
            ))
        }
        Error::Remote(c) => match c.downcast_ref::<crate::remote::substitute::SubstituteError>()? {
            crate::remote::substitute::SubstituteError::Prefix { .. } => Some(
                "substituters are configured, but a digest prefix is never fetched from \
                 them (it may name several snapshots): give the full 64-digit digest"
                    .into(),
            ),
            _ => None,
        },
        _ => None,
    }
}

/// What an ambiguous name matches, for the error object's `matches`: each
/// snapshot's `manifest_digest`, `version` and `ingested_at`, or each stored
/// content's `sha256`.
fn ambiguity_matches(err: &Error) -> Option<serde_json::Value> {
    match err {
        Error::AmbiguousDigest { matches, .. } => serde_json::to_value(matches).ok(),
        Error::AmbiguousObject { matches, .. } => Some(
            matches
                .iter()
                .map(|id| serde_json::json!({ "sha256": id }))
                .collect(),
        ),
        _ => None,
    }
}

/// An error's message as the command line gives it: its context chain,
/// with the options the library speaks of named by their flags.
pub fn error_message(err: &Error) -> String {
    let chain = error_chain(err);
    let Some(head) = flagged_message(err) else {
        return chain;
    };
    // The chain starts with the error's own message; its sources follow.
    let sources = chain.strip_prefix(&err.to_string()).unwrap_or_default();
    format!("{head}{sources}")
}

/// The message of an error whose library wording names no flag, worded with
/// the flags of the command line.
fn flagged_message(err: &Error) -> Option<String> {
    match err {
        Error::Misuse(m) => Some(m.flagged()),
        Error::Rejected(Rejection::PluginInputsWithoutCeArm) => Some(format!(
            "--plugin-dir, --plugin-version and --digest require at least one ce_* arm ({})",
            crate::profile::ce::rules::ce_arms_listed()
        )),
        Error::Rejected(Rejection::UnknownArm { arm, closest }) => Some(format!(
            "unknown arm '{arm}': it is neither a ce_* arm ({}) nor one given with --known-arm{}",
            crate::profile::ce::rules::ce_arms_listed(),
            crate::profile::ce::rules::did_you_mean(closest)
        )),
        Error::Rejected(Rejection::SecretContent { path, kind, line }) => Some(format!(
            "Compound Engineering plugin file looks like {} by its content (line {line}), \
             and --refuse-secrets refuses a release holding one: {}",
            kind.describe(),
            path.display()
        )),
        Error::Rejected(Rejection::CeArmWithoutPluginInputs) => Some(
            "ce_* arms require both --plugin-dir and --plugin-version, \
             or a --digest already in the store"
                .into(),
        ),
        Error::Remote(remote) => flagged_remote(remote.downcast_ref::<RemoteError>()?),
        _ => None,
    }
}

/// A remote's error, worded with the flags of the command line when it
/// speaks of an option.
fn flagged_remote(err: &RemoteError) -> Option<String> {
    match err {
        RemoteError::Transport {
            method,
            url,
            plain_http: true,
            ..
        } => Some(format!(
            "{method} {url} failed (the registry speaks plain HTTP? \
             pass --plain-http for a loopback or insecure registry)"
        )),
        RemoteError::Timeout {
            registry,
            request,
            connect,
            idle,
            ..
        } => Some(format!(
            "the registry {registry} did not answer in time ({request}: connect timeout \
             {connect} s, idle timeout {idle} s; --timeout SECS sets them)"
        )),
        RemoteError::TooSlow {
            registry,
            request,
            detail,
        } => Some(format!(
            "the registry {registry} was too slow ({request}: {detail}; \
             --min-speed BYTES and --timeout SECS set this floor)"
        )),
        _ => None,
    }
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

/// How the mounts are printed (`--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The mount report as one JSON object (what `--json` prints).
    Json,
    /// bubblewrap arguments: `--ro-bind SOURCE TARGET` per mount, on one
    /// line, each word quoted for a POSIX shell.
    Bwrap,
    /// bubblewrap arguments, each followed by a NUL byte, for `bwrap --args FD`.
    Bwrap0,
}

/// How a command's report is written: the one choice of its form, made at
/// the edge by [`Output::choose`] and passed down to the report writers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Text for people.
    Human,
    /// The JSON report (`--json`, `mounts --format json`).
    Json,
    /// A Markdown table, to paste into a report (`audit --markdown`).
    Markdown,
    /// bubblewrap arguments, shell-quoted on one line.
    Bwrap,
    /// bubblewrap arguments, NUL-terminated.
    Bwrap0,
}

impl Output {
    /// The form the command line asks for, from every flag that asks for
    /// one: `--json` (any command), `mounts --format`, `audit --markdown`.
    /// Two forms at once (`audit --markdown --json`, `mounts --format bwrap
    /// --json`) are refused.
    pub fn choose(cli: &super::Cli) -> Result<Output> {
        match &cli.command {
            super::Command::Mounts(a) => Self::of_format(a.format, cli.json),
            super::Command::Audit(a) if a.markdown && cli.json => {
                Err(crate::error::Request::MarkdownWithJson.into())
            }
            super::Command::Audit(a) if a.markdown => Ok(Output::Markdown),
            _ if cli.json => Ok(Output::Json),
            _ => Ok(Output::Human),
        }
    }

    /// `--format` wins; without it `--json` picks JSON and otherwise text.
    /// `--format bwrap --json` (or `bwrap0`) asks for two forms at once and is refused.
    fn of_format(format: Option<Format>, json: bool) -> Result<Output> {
        match (format, json) {
            (Some(Format::Bwrap | Format::Bwrap0), true) => {
                Err(crate::error::Request::BwrapWithJson.into())
            }
            (Some(Format::Bwrap), false) => Ok(Output::Bwrap),
            (Some(Format::Bwrap0), false) => Ok(Output::Bwrap0),
            (Some(Format::Json), _) | (None, true) => Ok(Output::Json),
            (None, false) => Ok(Output::Human),
        }
    }
}

/// Writes the report of `mounts` in the form `output` names (JSON, text or
/// bubblewrap arguments).
pub fn emit_mounts(output: Output, out: &mut dyn Write, report: &MountsReport) -> Result<u8> {
    if output == Output::Json {
        if let Some(m) = report.mounts.iter().find(|m| m.source.to_str().is_none()) {
            return Err(crate::error::Request::NotUtf8 {
                path: m.source.clone(),
            }
            .into());
        }
    }
    let written = match output {
        Output::Json | Output::Human | Output::Markdown => write_report(output, out, report),
        Output::Bwrap => {
            let words: Vec<Vec<u8>> = bwrap_args(report).into_iter().map(shell_quote).collect();
            out.write_all(&words.join(&b' '))
                .and_then(|()| writeln!(out))
                .and_then(|()| out.flush())
        }
        Output::Bwrap0 => bwrap_args(report)
            .into_iter()
            .try_for_each(|arg| out.write_all(arg).and_then(|()| out.write_all(b"\0")))
            .and_then(|()| out.flush()),
    };
    written.map_err(|e| Error::io("write the report", "<stdout>", e))?;
    Ok(0)
}

/// The bubblewrap arguments: `--ro-bind SOURCE TARGET` per mount.
fn bwrap_args(report: &MountsReport) -> Vec<&[u8]> {
    report
        .mounts
        .iter()
        .flat_map(|m| {
            [
                &b"--ro-bind"[..],
                m.source.as_os_str().as_bytes(),
                m.target.as_bytes(),
            ]
        })
        .collect()
}

/// One word quoted for a POSIX shell: left bare when it holds only
/// characters no shell treats specially, else in single quotes.
fn shell_quote(word: &[u8]) -> Vec<u8> {
    let bare = |b: &u8| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(b);
    if !word.is_empty() && word.iter().all(bare) {
        return word.to_vec();
    }
    let mut out = vec![b'\''];
    for &b in word {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Misuse, RowField};

    /// The hint of an `rm` a view stands in the way of names each discard,
    /// then the `rm`, each a command a shell runs as written.
    #[test]
    fn rm_in_the_way_of_views_hints_each_discard_then_the_rm() {
        let digest: crate::digest::ManifestDigest = "ab".repeat(32).parse().unwrap();
        let one = Misuse::SnapshotHasViews {
            digest,
            views: vec!["/v".into()],
        };
        assert_eq!(
            hint(&one.into()).as_deref(),
            Some(
                format!(
                    "`cestore discard /v` removes it; then `cestore rm {digest}` forgets the \
                     snapshot (its shared view, if any, goes with it, and `cestore gc` \
                     removes that)"
                )
                .as_str()
            )
        );
        let two = Misuse::SnapshotHasViews {
            digest,
            views: vec!["/v".into(), "/my views/w".into()],
        };
        assert!(hint(&two.into()).is_some_and(|h| h.starts_with(
            "`cestore discard /v` and `cestore discard '/my views/w'` remove them; then"
        )));
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote(b"/opt/x-1.2_3"), b"/opt/x-1.2_3");
        assert_eq!(shell_quote(b""), b"''");
        assert_eq!(shell_quote(b"a b"), b"'a b'");
        assert_eq!(shell_quote(b"it's"), b"'it'\\''s'");
    }

    /// Each error's command-line message is the one given, and its library
    /// message names no flag.
    fn check_flagged(cases: Vec<(Error, String)>) {
        for (err, want) in cases {
            assert_eq!(error_message(&err), want);
            assert!(!err.to_string().contains("--"), "{err}");
        }
    }

    /// The command line words the library's misuses with its flags, as it
    /// always has.
    #[test]
    fn misuses_are_named_by_their_flags() {
        let digest: crate::digest::ManifestDigest = "ab".repeat(32).parse().unwrap();
        let expected: crate::digest::ManifestDigest = "cd".repeat(32).parse().unwrap();
        let cases: Vec<(Error, String)> = vec![
            (
                Misuse::FieldWithEmptyKey {
                    field: RowField::Version,
                    path: "a..b".into(),
                }
                .into(),
                "--version-field 'a..b': a field is a key or a dotted path of keys \
                 (ce_plugin.manifest_digest), with no empty key"
                    .into(),
            ),
            (
                Misuse::FieldsOverlap {
                    field: RowField::Arm,
                    path: "a".into(),
                    others: vec![
                        (RowField::Digest, "a.b".into()),
                        (RowField::Version, "c".into()),
                    ],
                }
                .into(),
                "--arm-field 'a' is, holds or lies inside another field \
                 (--digest-field 'a.b', --version-field 'c'); \
                 the three fields must be distinct and not nested in each other"
                    .into(),
            ),
            (
                Misuse::FieldSpec {
                    spec: "x".into(),
                    why: "it has no '='".into(),
                }
                .into(),
                format!(
                    "--field 'x': it has no '='; {}",
                    crate::audit::FIELD_SPEC_RULE
                ),
            ),
            (
                Misuse::NoStoreGiven.into(),
                "no store given: pass --store, or set CESTORE_DIR, XDG_DATA_HOME or HOME".into(),
            ),
            (
                Misuse::UntrustedStore {
                    path: "/s".into(),
                    why: "is writable by others (mode 0777)".into(),
                }
                .into(),
                "the store '/s' is writable by others (mode 0777); whoever can write there \
                 decides what every view shows. \
                 If you trust it, pass --trust-store or set CESTORE_TRUST_STORE=1"
                    .into(),
            ),
            (
                Misuse::NotARecordedView { path: "/v".into() }.into(),
                "'/v' is not a recorded view; to remove a tree that is exactly a snapshot, \
                 pass --force DIGEST"
                    .into(),
            ),
            (
                Misuse::NotAView { path: "/v".into() }.into(),
                "'/v' is not a view cestore recorded; make one with `cestore checkout` \
                 or `cestore path`, or pass --unchecked to mount a tree cestore did not make"
                    .into(),
            ),
            (
                Misuse::ViewOfAnother {
                    path: "/v".into(),
                    digest,
                    expected,
                }
                .into(),
                format!("'/v' is a view of {digest}, not of {expected} as --digest expects"),
            ),
            (
                Misuse::SnapshotHasViews {
                    digest,
                    views: vec!["/v".into()],
                }
                .into(),
                format!("{digest} has 1 recorded view (/v); discard it first, or pass --force"),
            ),
            (
                Misuse::SnapshotHasViews {
                    digest,
                    views: vec!["/v".into(), "/w".into()],
                }
                .into(),
                format!(
                    "{digest} has 2 recorded views (/v, /w); discard them first, or pass --force"
                ),
            ),
        ];
        check_flagged(cases);
    }

    /// The arm rules and a registry's plain-HTTP hint name their flags on the
    /// command line alone.
    #[test]
    fn rules_and_remotes_are_named_by_their_flags() {
        let cases: Vec<(Error, String)> = vec![
            (
                Rejection::PluginInputsWithoutCeArm.into(),
                "--plugin-dir, --plugin-version and --digest require at least one ce_* arm \
                 (ce_workflow, ce_workflow_direct, ce_review)"
                    .into(),
            ),
            (
                Rejection::UnknownArm {
                    arm: "x".into(),
                    closest: None,
                }
                .into(),
                "unknown arm 'x': it is neither a ce_* arm (ce_workflow, ce_workflow_direct, \
                 ce_review) nor one given with --known-arm"
                    .into(),
            ),
            (
                Rejection::UnknownArm {
                    arm: "ce_reviw".into(),
                    closest: Some("ce_review".into()),
                }
                .into(),
                "unknown arm 'ce_reviw': it is neither a ce_* arm (ce_workflow, \
                 ce_workflow_direct, ce_review) nor one given with --known-arm; \
                 did you mean 'ce_review'?"
                    .into(),
            ),
            (
                Rejection::CeArmWithoutPluginInputs.into(),
                "ce_* arms require both --plugin-dir and --plugin-version, \
                 or a --digest already in the store"
                    .into(),
            ),
            (
                Error::Remote(crate::error::Classified::new(RemoteError::Transport {
                    method: "GET".into(),
                    url: "https://r/v2/".into(),
                    plain_http: true,
                    source: Box::new(io::Error::other("corrupt message")),
                })),
                "GET https://r/v2/ failed (the registry speaks plain HTTP? \
                 pass --plain-http for a loopback or insecure registry): corrupt message"
                    .into(),
            ),
        ];
        check_flagged(cases);
    }

    #[test]
    fn format_and_json() {
        assert_eq!(Output::of_format(None, false).ok(), Some(Output::Human));
        assert_eq!(Output::of_format(None, true).ok(), Some(Output::Json));
        assert_eq!(
            Output::of_format(Some(Format::Json), false).ok(),
            Some(Output::Json)
        );
        assert_eq!(
            Output::of_format(Some(Format::Json), true).ok(),
            Some(Output::Json)
        );
        assert_eq!(
            Output::of_format(Some(Format::Bwrap), false).ok(),
            Some(Output::Bwrap)
        );
        assert!(Output::of_format(Some(Format::Bwrap), true).is_err());
        assert_eq!(
            Output::of_format(Some(Format::Bwrap0), false).ok(),
            Some(Output::Bwrap0)
        );
        assert!(Output::of_format(Some(Format::Bwrap0), true).is_err());
    }

    #[test]
    fn one_choice_of_the_form_from_the_command_line() {
        use clap::Parser;
        let choose = |args: &[&str]| {
            let cli = crate::cli::Cli::try_parse_from(args).unwrap();
            Output::choose(&cli).ok()
        };
        assert_eq!(choose(&["cestore", "list"]), Some(Output::Human));
        assert_eq!(choose(&["cestore", "list", "--json"]), Some(Output::Json));
        assert_eq!(
            choose(&["cestore", "audit", "r.jsonl"]),
            Some(Output::Human)
        );
        assert_eq!(
            choose(&["cestore", "audit", "--markdown", "r.jsonl"]),
            Some(Output::Markdown)
        );
        assert_eq!(
            choose(&["cestore", "audit", "--markdown", "--json", "r.jsonl"]),
            None
        );
        assert_eq!(
            choose(&["cestore", "mounts", "--arm", "ce", "--format", "bwrap0"]),
            Some(Output::Bwrap0)
        );
    }
}
