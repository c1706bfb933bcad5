//! URLs on the command line: refused where cestore reads something local,
//! and never shown with a user part, a query or a fragment.
//!
//! cestore reads only local repositories, directories and files. An
//! argument that names none of them and that git reads as a URL
//! ([`crate::source::url::is_remote`]) is a usage error, before anything is
//! done, whose message shows the URL redacted and says what to do instead;
//! a registry reference that holds a user part, a query or a fragment is
//! refused the same way (credentials come from the environment or a
//! credential helper, never the command line). [`scrub`] is the last guard:
//! an error's text, the parser's included, shows every such URL of the
//! command line redacted, as given and as the absolute path it would be.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::args::{Command, TrustArgs};
use crate::error::{Error, Result};
use crate::source::url::{is_file_url, is_remote, redact_address, redact_url};

/// What a command-line path names, for the message that refuses a URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Local {
    /// A git repository (`--git`, `verify --source`, `audit --source-repo`).
    Repository,
    /// A release's directory.
    Directory,
    /// A file to read: a key, a results file, a bundle.
    File,
}

/// The key files of `--trusted-key` and `--trusted-keys`.
fn trusted(trust: &TrustArgs) -> impl Iterator<Item = (&'static str, &Path, Local)> {
    let keys = trust.trusted_key.iter().map(|p| ("--trusted-key", p));
    let lists = trust.trusted_keys.iter().map(|p| ("--trusted-keys", p));
    keys.chain(lists)
        .map(|(flag, path)| (flag, path.as_path(), Local::File))
}

/// `path`, when given, with its flag and what it names.
fn one<'a>(
    flag: &'static str,
    path: Option<&'a PathBuf>,
    what: Local,
) -> Option<(&'static str, &'a Path, Local)> {
    path.map(|p| (flag, p.as_path(), what))
}

/// The arguments of `command` that name something local for cestore to
/// read: each with its flag (or its value's name) and what it names.
fn local_inputs(command: &Command) -> Vec<(&'static str, &Path, Local)> {
    let mut out: Vec<_> = match command {
        Command::Ingest(a) => vec![
            one("DIR", a.release.dir.as_ref(), Local::Directory),
            one("--git", a.release.git.as_ref(), Local::Repository),
            one("--sign-with", a.sign_with.as_ref(), Local::File),
        ],
        Command::IngestProfile(a) => vec![
            one("REPO", a.repo.as_ref(), Local::Directory),
            one("--git", a.git.as_ref(), Local::Repository),
            one("--task", a.task.as_ref(), Local::File),
            one("--harness-root", a.harness_root.as_ref(), Local::Directory),
            one("--expect-binding", a.expect_binding.as_ref(), Local::File),
            one("--sign-with", a.sign_with.as_ref(), Local::File),
        ],
        Command::Digest(a) => vec![
            one("DIR", a.dir.as_ref(), Local::Directory),
            one("--git", a.git.as_ref(), Local::Repository),
        ],
        Command::Stage(a) => vec![
            one("--plugin-dir", a.plugin_dir.as_ref(), Local::Directory),
            one("--sign-with", a.sign_with.as_ref(), Local::File),
        ],
        Command::Verify(a) => vec![
            one("--tree", a.tree.as_ref(), Local::Directory),
            one("--repair-from", a.repair_from.as_ref(), Local::Directory),
            one("--source", a.source.as_ref(), Local::Repository),
        ],
        Command::Audit(a) => a
            .files
            .iter()
            .filter(|f| f.as_os_str() != "-")
            .map(|f| one("FILE", Some(f), Local::File))
            .chain([one(
                "--source-repo",
                a.source_repo.as_ref(),
                Local::Repository,
            )])
            .collect(),
        Command::Import(a) => vec![one(
            "FILE",
            Some(&a.file).filter(|f| f.as_os_str() != "-"),
            Local::File,
        )],
        Command::Sign(a) => vec![one("--key", Some(&a.key), Local::File)],
        _ => Vec::new(),
    }
    .into_iter()
    .flatten()
    .collect();
    let trust = match command {
        Command::Verify(a) => Some(&a.trust),
        Command::Audit(a) => Some(&a.trust),
        Command::Pull(a) => Some(&a.trust),
        Command::Import(a) => Some(&a.trust),
        Command::Attestations(a) => Some(&a.trust),
        _ => None,
    };
    out.extend(trust.into_iter().flat_map(trusted));
    out
}

/// The registry references `command` names.
fn registry_references(command: &Command) -> Vec<&str> {
    match command {
        Command::Push(a) => vec![a.remote.as_str()],
        Command::Pull(a) => vec![a.reference.as_str()],
        Command::Audit(a) => a.registry.as_deref().into_iter().collect(),
        _ => Vec::new(),
    }
}

/// Why a URL given for a local input is refused, and what to do instead;
/// `None` when `path` names a local path (it exists, or git reads it as
/// one).
fn refusal(flag: &str, path: &Path, what: Local) -> Option<String> {
    let text = path.to_string_lossy();
    if !is_remote(&text) || std::fs::symlink_metadata(path).is_ok() {
        return None;
    }
    let url = redact_url(&text);
    let instead = if is_file_url(&text) {
        "give the path it names instead".to_string()
    } else {
        match what {
            Local::Repository => {
                "cestore reads only local repositories: clone it (git clone URL DIR) \
                 and give the clone's path"
            }
            Local::Directory => "cestore reads only local directories: give a local copy's path",
            Local::File => "cestore reads only local files: download it and give its path",
        }
        .to_string()
    };
    Some(format!(
        "{flag} '{url}' is a URL (as git reads it), not a local path; {instead}"
    ))
}

/// Refuses, as a usage error, a URL given where `command` reads a local
/// repository, directory or file, and a registry reference holding a user
/// part, a query or a fragment; each message shows the URL redacted.
pub fn check(command: &Command) -> Result<()> {
    for (flag, path, what) in local_inputs(command) {
        if let Some(message) = refusal(flag, path, what) {
            // A catch-all by design: the command line's last word, exit 2;
            // no caller acts on it but to show it.
            return Err(Error::Usage(message));
        }
    }
    for reference in registry_references(command) {
        let redacted = redact_address(reference);
        if redacted != reference {
            return Err(crate::error::Request::CredentialsInReference { redacted }.into());
        }
    }
    Ok(())
}

/// The values of `argv` (a `--flag=VALUE` counts as its value) that git
/// reads as URLs holding a user part, a query or a fragment, each with the
/// forms a message may show it in (as given, and as a path, relative and
/// made absolute) and what replaces each.
fn replacements(argv: &[OsString]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for arg in argv.iter().skip(1) {
        let arg = arg.to_string_lossy();
        let value = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => value,
            _ => &arg,
        };
        let redacted = redact_url(value);
        if !is_remote(value) || redacted == value {
            continue;
        }
        let mut forms = vec![(value.to_string(), redacted.clone())];
        let (path, path_redacted) = (Path::new(value), Path::new(&redacted));
        forms.push((
            path.components().collect::<PathBuf>().display().to_string(),
            path_redacted
                .components()
                .collect::<PathBuf>()
                .display()
                .to_string(),
        ));
        if let (Ok(a), Ok(b)) = (
            std::path::absolute(path),
            std::path::absolute(path_redacted),
        ) {
            forms.push((a.display().to_string(), b.display().to_string()));
        }
        out.extend(forms);
    }
    // The longest first: an absolute path holds the relative one.
    out.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    out.retain(|(from, to)| !from.is_empty() && from != to);
    out
}

/// `text` with every URL of the command line `argv` that holds a user
/// part, a query or a fragment redacted, in every form a message shows it.
pub fn scrub(text: &str, argv: &[OsString]) -> String {
    let mut text = text.to_string();
    for (from, to) in replacements(argv) {
        text = text.replace(&from, &to);
    }
    text
}

/// [`scrub`] applied to every string of a JSON value.
pub fn scrub_json(value: &mut serde_json::Value, argv: &[OsString]) {
    match value {
        serde_json::Value::String(s) => *s = scrub(s, argv),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| scrub_json(v, argv)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| scrub_json(v, argv)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_shows_a_url_of_the_command_line_redacted_in_every_form() {
        let url = "https:///u:S3CRET@example.com/o/r.git";
        let argv: Vec<OsString> = ["cestore", "audit", url, "--git=ssh://tok@h/x"]
            .iter()
            .map(OsString::from)
            .collect();
        let absolute = std::path::absolute(url).unwrap().display().to_string();
        let text = format!(
            "'{url}' and '{absolute}' and 'https:/u:S3CRET@example.com/o/r.git' and \
             ssh://tok@h/x"
        );
        let scrubbed = scrub(&text, &argv);
        assert!(!scrubbed.contains("S3CRET"), "{scrubbed}");
        assert!(!scrubbed.contains("tok"), "{scrubbed}");
        assert!(
            scrubbed.contains("https:///example.com/o/r.git"),
            "{scrubbed}"
        );
        let mut json = serde_json::json!({"error": {"message": text, "path": absolute}});
        scrub_json(&mut json, &argv);
        assert!(!json.to_string().contains("S3CRET"), "{json}");
        // A local path, and a URL with nothing to hide, are left alone.
        let plain: Vec<OsString> = ["cestore", "/srv/u:p@x", "https://host/r"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            scrub("/srv/u:p@x https://host/r", &plain),
            "/srv/u:p@x https://host/r"
        );
    }

    #[test]
    fn a_url_for_a_local_input_is_refused_only_when_no_such_path_exists() {
        let dir = tempfile::tempdir().unwrap();
        let message = refusal("--git", Path::new("u:tok@host:o/r"), Local::Repository).unwrap();
        assert!(!message.contains("tok"), "{message}");
        assert!(
            message.contains("'host:o/r'") && message.contains("clone"),
            "{message}"
        );
        let file = refusal("--git", Path::new("FILE:///srv/r"), Local::Repository).unwrap();
        assert!(file.contains("the path it names"), "{file}");
        assert_eq!(refusal("--git", dir.path(), Local::Repository), None);
        assert_eq!(
            refusal("DIR", Path::new("no/such/dir"), Local::Directory),
            None
        );
    }
}
