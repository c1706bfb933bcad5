//! Substituters: registries a snapshot the store lacks is fetched from when
//! a command needs it by its full digest.
//!
//! The configuration is the file `STORE/substituters.json` and the
//! environment (`CESTORE_SUBSTITUTERS`, `CESTORE_SUBSTITUTER_TRUSTED_KEYS`);
//! [`parse_config`] reads the file's text as a pure function. Without a
//! substituter, nothing here changes what a command does.
//!
//! [`ensure_present`] is the one hook the commands call before they resolve
//! a snapshot: a full digest the store lacks is pulled from each substituter
//! in turn, by its digest tag, through [`transfer::pull`] (so every check,
//! the closure of an environment or task, and trust apply as they do for
//! `cestore pull`). One process per digest pulls at a time, under the lock
//! file `STORE/locks/substitute-<hex>`; the others wait, then find it
//! present, or find the failure the one pulling recorded there (with the
//! same configuration) and report it without asking the registries again.

use std::ffi::OsStr;
use std::io::{Read, Seek, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::FlockOperation;

use super::{oci, transfer, SnapshotRef};
use crate::digest::{DigestPrefix, ManifestDigest};
use crate::error::{Classified, Classify, Error, ErrorKind, Result};
use crate::fsutil::NotOpened;
use crate::store::{Need, Opener};

/// The configuration file, in the store's directory.
pub const CONFIG_FILE: &str = "substituters.json";
/// The environment variable whose whitespace-separated
/// `REGISTRY/REPOSITORY` list replaces the file's substituters when set.
pub const ENV_SUBSTITUTERS: &str = "CESTORE_SUBSTITUTERS";
/// The environment variable whose whitespace-separated public key files
/// replace the file's `trusted_keys` when set.
pub const ENV_TRUSTED_KEYS: &str = "CESTORE_SUBSTITUTER_TRUSTED_KEYS";
/// The directory of lock files, in the store's directory.
pub const LOCKS_DIR: &str = "locks";
/// The seconds a registry may go without answering, by default.
pub const DEFAULT_TIMEOUT: u64 = 30;
/// The seconds a process waits, by default, for another's substitution of
/// the same digest.
pub const DEFAULT_WAIT: u64 = 600;
/// The most bytes of the configuration file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The most bytes of a lock file's failure record read.
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// One registry repository to fetch snapshots from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Substituter {
    /// `REGISTRY/REPOSITORY`.
    pub registry: String,
    /// Whether to speak plain HTTP to it.
    pub plain_http: bool,
}

/// Where part of the configuration came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigSource {
    /// The store's `substituters.json`.
    File,
    /// An environment variable.
    Environment,
    /// Nowhere: the default.
    Default,
}

/// The effective configuration.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Config {
    /// The configuration file, whether or not it exists.
    #[serde(serialize_with = "lossy_path")]
    pub file: PathBuf,
    /// Whether the file exists.
    pub file_exists: bool,
    /// The substituters, in the order they are asked.
    pub substituters: Vec<Substituter>,
    /// Where the list came from.
    pub substituters_from: ConfigSource,
    /// The public key files one of which must vouch for a snapshot
    /// substituted; none trusts any.
    #[serde(serialize_with = "lossy_paths")]
    pub trusted_keys: Vec<PathBuf>,
    /// Where the keys came from.
    pub trusted_keys_from: ConfigSource,
    /// Seconds a registry may go without answering (as `pull --timeout`).
    pub timeout: u64,
    /// Seconds a process waits for another's substitution of one digest.
    pub wait: u64,
}

/// A path as a JSON string, as the human report shows it: a byte that is
/// not UTF-8 becomes U+FFFD (a key path may hold one).
fn lossy_path<S: serde::Serializer>(path: &Path, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// [`lossy_path`] for each path of a list.
fn lossy_paths<S: serde::Serializer>(
    paths: &[PathBuf],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.to_string_lossy()))
}

/// The configuration could not be read or broke a rule.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("could not read the substituters configuration '{}'", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The path is something else than a regular file (followed through a
    /// symlink), refused before any open that could block.
    #[error("could not read the substituters configuration '{}': it is {what}; it must be a regular file", .path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// The file or a variable breaks a rule.
    #[error("could not accept the substituters configuration '{origin}': {detail}")]
    Invalid {
        /// The file's path, or the environment variable's name.
        origin: String,
        /// The file, when the file broke the rule.
        file: Option<PathBuf>,
        /// The rule broken.
        rule: &'static str,
        /// What breaks it.
        detail: String,
    },
}

impl Classify for ConfigError {
    /// `io` for a file that cannot be read, else `usage`.
    fn kind(&self) -> ErrorKind {
        match self {
            ConfigError::Unreadable { .. } | ConfigError::NotRegular { .. } => ErrorKind::Io,
            ConfigError::Invalid { .. } => ErrorKind::Usage,
        }
    }

    fn rule(&self) -> Option<&'static str> {
        match self {
            ConfigError::Unreadable { .. } | ConfigError::NotRegular { .. } => None,
            ConfigError::Invalid { rule, .. } => Some(rule),
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            ConfigError::Unreadable { path, .. } | ConfigError::NotRegular { path, .. } => {
                Some(path)
            }
            ConfigError::Invalid { file, .. } => file.as_deref(),
        }
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl std::convert::From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Remote(Classified::new(e))
    }
}

/// A substitution did not bring the snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SubstituteError {
    /// A prefix names no stored snapshot; substituters are not asked.
    #[error("no snapshot in the store matches '{name}'")]
    Prefix {
        /// The prefix as given.
        name: String,
    },
    /// No substituter has the snapshot.
    #[error(
        "no snapshot in the store matches '{digest}', and no substituter has it ({registries})"
    )]
    NotOnAny {
        /// The snapshot.
        digest: ManifestDigest,
        /// The substituters asked, comma-separated.
        registries: String,
    },
    /// Every substituter failed; `tried` says how each did.
    #[error("could not substitute {digest}: {tried}")]
    Failed {
        /// The snapshot.
        digest: ManifestDigest,
        /// Each substituter and its failure, `REGISTRY: why`, `; `-separated.
        tried: String,
        /// The kind of the gravest failure.
        kind: ErrorKind,
    },
    /// Another process held the digest's lock longer than the wait allows.
    #[error("could not substitute {digest}: another process has been fetching it from {registries} for more than {secs} s (lock '{}')", .lock.display())]
    Waited {
        /// The snapshot.
        digest: ManifestDigest,
        /// The substituters, comma-separated.
        registries: String,
        /// The seconds waited.
        secs: u64,
        /// The lock file.
        lock: PathBuf,
    },
}

impl Classify for SubstituteError {
    /// `unknown-digest` when the snapshot is nowhere, the gravest
    /// failure's kind when substituters failed, `remote` after a wait.
    fn kind(&self) -> ErrorKind {
        match self {
            SubstituteError::Prefix { .. } | SubstituteError::NotOnAny { .. } => {
                ErrorKind::UnknownDigest
            }
            SubstituteError::Failed { kind, .. } => *kind,
            SubstituteError::Waited { .. } => ErrorKind::Remote,
        }
    }

    /// The lock file waited on, after a wait.
    fn path(&self) -> Option<&Path> {
        match self {
            SubstituteError::Waited { lock, .. } => Some(lock),
            _ => None,
        }
    }

    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

impl std::convert::From<SubstituteError> for Error {
    fn from(e: SubstituteError) -> Self {
        Error::Remote(Classified::new(e))
    }
}

/// The file's shape.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    substituters: Vec<RawSubstituter>,
    #[serde(default)]
    trusted_keys: Vec<PathBuf>,
    #[serde(default, deserialize_with = "given")]
    timeout: Option<u64>,
    #[serde(default, deserialize_with = "given")]
    wait: Option<u64>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubstituter {
    registry: String,
    #[serde(default, deserialize_with = "given")]
    plain_http: Option<bool>,
}

/// An optional field that, when present, holds a value: `null` is refused
/// as any other value of the wrong type is, never taken for the default.
fn given<'de, D, T>(d: D) -> std::result::Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Whether a registry host (`HOST[:PORT]`, as [`oci::Address`] holds it) is
/// the loopback interface, where plain HTTP is spoken unless configured
/// otherwise: `localhost`, or an IP address of the loopback network (a name
/// is never taken for one by its look).
fn loopback(registry_host: &str) -> bool {
    let host = match registry_host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry_host.split(':').next().unwrap_or(registry_host),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Reads `registry` as a repository (`REGISTRY/REPOSITORY`, an `oci://`
/// prefix allowed, no tag or digest: the substitution adds the digest tag
/// itself). The message shows the address without any credential it
/// carries.
fn check_registry(registry: &str) -> std::result::Result<oci::Address, String> {
    let rest = registry.strip_prefix("oci://").unwrap_or(registry);
    match oci::Address::parse(rest) {
        Ok((address, None)) => Ok(address),
        Ok((_, Some(_))) => Err(format!(
            "'{}' names a tag or digest; give REGISTRY/REPOSITORY",
            crate::source::url::redact_address(registry)
        )),
        Err(e) => Err(e.to_string()),
    }
}

fn substituter(
    registry: &str,
    plain_http: Option<bool>,
    invalid: &dyn Fn(&'static str, String) -> ConfigError,
) -> std::result::Result<Substituter, ConfigError> {
    let address = check_registry(registry).map_err(|d| invalid("substituter-registry", d))?;
    Ok(Substituter {
        registry: registry.to_string(),
        plain_http: plain_http.unwrap_or_else(|| loopback(&address.registry)),
    })
}

/// Parses the configuration file's text (`path` names it in errors):
/// `{"substituters": [{"registry": "REGISTRY/REPOSITORY", "plain_http":
/// BOOL}], "trusted_keys": ["PUB", …], "timeout": SECS, "wait": SECS}`,
/// every field optional (`null` refused where present), no other field.
/// `plain_http` defaults to true for a loopback registry only; a relative
/// key path is taken from the store's directory (`path`'s parent).
pub fn parse_config(path: &Path, text: &str) -> std::result::Result<Config, ConfigError> {
    let invalid = |rule: &'static str, detail: String| ConfigError::Invalid {
        origin: path.display().to_string(),
        file: Some(path.to_path_buf()),
        rule,
        detail,
    };
    let raw: RawFile = serde_json::from_str(text)
        .map_err(|e| invalid("substituters-json", format!("not the expected JSON: {e}")))?;
    let substituters = raw
        .substituters
        .iter()
        .map(|s| substituter(&s.registry, s.plain_http, &invalid))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let bounded = |name: &str, v: Option<u64>, default: u64| match v {
        None => Ok(default),
        Some(v @ 1..=3600) => Ok(v),
        Some(v) => Err(invalid(
            "substituters-seconds",
            format!("{name} is {v}; it must be 1 to 3600 seconds"),
        )),
    };
    let timeout = bounded("timeout", raw.timeout, DEFAULT_TIMEOUT)?;
    let wait = bounded("wait", raw.wait, DEFAULT_WAIT)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let from = |present: bool| {
        if present {
            ConfigSource::File
        } else {
            ConfigSource::Default
        }
    };
    Ok(Config {
        file: path.to_path_buf(),
        file_exists: true,
        substituters_from: from(!raw.substituters.is_empty()),
        substituters,
        trusted_keys_from: from(!raw.trusted_keys.is_empty()),
        trusted_keys: raw.trusted_keys.iter().map(|k| base.join(k)).collect(),
        timeout,
        wait,
    })
}

/// Applies the environment's values (`None` for a variable not set) to a
/// configuration: a list replaces the file's, empty or not. A variable
/// set is never taken for one unset: a registry list that is not UTF-8 is
/// refused (`substituter-registry`), and key paths are taken as bytes.
pub fn apply_env(
    mut config: Config,
    substituters: Option<&OsStr>,
    trusted_keys: Option<&OsStr>,
) -> std::result::Result<Config, ConfigError> {
    if let Some(list) = substituters {
        let invalid = |rule: &'static str, detail: String| ConfigError::Invalid {
            origin: format!("${ENV_SUBSTITUTERS}"),
            file: None,
            rule,
            detail,
        };
        let list = list.to_str().ok_or_else(|| {
            invalid(
                "substituter-registry",
                "the value is not UTF-8; a registry address is".into(),
            )
        })?;
        config.substituters = list
            .split_whitespace()
            .map(|r| substituter(r, None, &invalid))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        config.substituters_from = ConfigSource::Environment;
    }
    if let Some(keys) = trusted_keys {
        config.trusted_keys = keys
            .as_bytes()
            .split(u8::is_ascii_whitespace)
            .filter(|k| !k.is_empty())
            .map(|k| PathBuf::from(OsStr::from_bytes(k)))
            .collect();
        config.trusted_keys_from = ConfigSource::Environment;
    }
    Ok(config)
}

/// The effective configuration of the store at `root`: its file, if any,
/// then the environment.
pub fn config(root: &Path) -> Result<Config> {
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    let path = root.join(CONFIG_FILE);
    let file = match crate::fsutil::open_regular(&path) {
        Ok(file) => Some(file),
        // No file, or a store directory that cannot be looked into: no
        // configuration (the command then reports the store as it always has).
        Err(NotOpened::Io(_)) if std::fs::metadata(&path).is_err() => None,
        Err(NotOpened::Io(source)) => return Err(ConfigError::Unreadable { path, source }.into()),
        Err(NotOpened::NotRegular(what)) => {
            return Err(ConfigError::NotRegular { path, what }.into())
        }
    };
    let base = match file {
        Some(file) => {
            let mut text = String::new();
            file.take(MAX_CONFIG_BYTES + 1)
                .read_to_string(&mut text)
                .map_err(|source| ConfigError::Unreadable {
                    path: path.clone(),
                    source,
                })?;
            if text.len() as u64 > MAX_CONFIG_BYTES {
                return Err(ConfigError::Invalid {
                    origin: path.display().to_string(),
                    file: Some(path.clone()),
                    rule: "substituters-too-large",
                    detail: format!("more than {MAX_CONFIG_BYTES} bytes"),
                }
                .into());
            }
            parse_config(&path, &text)?
        }
        None => Config {
            file: path.clone(),
            file_exists: false,
            substituters: Vec::new(),
            substituters_from: ConfigSource::Default,
            trusted_keys: Vec::new(),
            trusted_keys_from: ConfigSource::Default,
            timeout: DEFAULT_TIMEOUT,
            wait: DEFAULT_WAIT,
        },
    };
    let var = |k| std::env::var_os(k);
    let mut config = apply_env(
        base,
        var(ENV_SUBSTITUTERS).as_deref(),
        var(ENV_TRUSTED_KEYS).as_deref(),
    )?;
    for k in &mut config.trusted_keys {
        if let Ok(abs) = std::path::absolute(&*k) {
            *k = abs;
        }
    }
    Ok(config)
}

/// Whether the store (opened for `need`) holds the snapshot named `name`:
/// `None` when the name cannot be resolved for another reason than its
/// absence (the command then reports that reason itself).
fn present(open: Opener<'_>, need: Need, name: &str) -> Result<Option<bool>> {
    let store = open(need)?;
    match crate::catalogue::resolve(store.catalogue(), name) {
        Ok(_) => Ok(Some(true)),
        Err(Error::UnknownDigest { .. }) => Ok(Some(false)),
        Err(_) => Ok(None),
    }
}

/// Makes sure the store at `root` (opened through `open`) holds the
/// snapshot `name` before a command resolves it: with substituters
/// configured, a full digest it lacks is pulled from the first that has
/// it. A prefix it lacks is refused with a hint (never substituted: it may
/// name several snapshots); `@VERSION`, a malformed name and any name
/// without substituters are left to the command. A configuration that
/// cannot be read or breaks a rule fails the command only when a
/// substituter would be asked: a snapshot the store holds needs none.
pub fn ensure_present(root: &Path, open: Opener<'_>, name: &str) -> Result<()> {
    let Ok(prefix) = name.parse::<DigestPrefix>() else {
        return Ok(());
    };
    let config = match config(root) {
        Ok(config) => config,
        Err(e) => {
            return match present(open, Need::Existing, name) {
                Ok(Some(true)) => Ok(()),
                _ => Err(e),
            }
        }
    };
    if config.substituters.is_empty() {
        return Ok(());
    }
    let Some(digest) = prefix.full() else {
        // A store that is not there, or cannot be opened, is the
        // command's to report, as it always has.
        return match present(open, Need::Existing, name).unwrap_or(None) {
            Some(false) => Err(SubstituteError::Prefix {
                name: name.to_string(),
            }
            .into()),
            _ => Ok(()),
        };
    };
    // The store is made (or its layout completed) as a pull makes it.
    if present(open, Need::Creating, name)? != Some(false) {
        return Ok(());
    }
    substitute(root, open, &config, &digest)
}

/// Milliseconds since the epoch.
fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// What the process that pulled last wrote in the lock file when it failed.
#[derive(serde::Serialize, serde::Deserialize)]
struct Failure {
    at_ms: u128,
    kind: String,
    message: String,
    /// The [`fingerprint`] of the configuration it pulled with: a waiting
    /// process takes the failure as its own only when it would have asked
    /// the same registries the same way.
    config: String,
}

/// What of a configuration decides how a substitution goes: the
/// registries in order (with `plain_http`), the keys trusted and the
/// timeout.
fn fingerprint(config: &Config) -> String {
    // Debug writes a path that is not UTF-8 with its bytes escaped: every
    // configuration has a fingerprint of its own.
    format!(
        "{:?}",
        (&config.substituters, &config.trusted_keys, config.timeout)
    )
}

fn registries(config: &Config) -> String {
    config
        .substituters
        .iter()
        .map(|s| s.registry.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The failure recorded in a lock file (`record`) that a process which
/// started waiting at `started` (milliseconds since the epoch), configured
/// as `config`, reports as its own instead of asking the registries again:
/// one recorded after it started waiting, by a process that asked the same
/// registries the same way. A record that does not parse (cut short by a
/// full disk, say) is none.
fn reusable(record: &[u8], started: u128, config: &Config) -> Option<Failure> {
    serde_json::from_slice::<Failure>(record)
        .ok()
        .filter(|f| f.at_ms >= started && f.config == fingerprint(config))
}

/// Pulls `digest` under its lock file, unless another process brought it
/// (or failed to) meanwhile.
fn substitute(
    root: &Path,
    open: Opener<'_>,
    config: &Config,
    digest: &ManifestDigest,
) -> Result<()> {
    let started = now_ms();
    let dir = root.join(LOCKS_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create the lock directory", &dir, e))?;
    let path = dir.join(format!("substitute-{digest}"));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io("open the lock file", &path, e))?;
    let deadline = Instant::now() + Duration::from_secs(config.wait);
    loop {
        match rustix::fs::flock(file.as_fd(), FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(SubstituteError::Waited {
                    digest: *digest,
                    registries: registries(config),
                    secs: config.wait,
                    lock: path,
                }
                .into())
            }
            Err(e) => return Err(Error::io("lock", &path, e)),
        }
    }
    // The lock is released when `file` is closed, on every path out.
    if present(open, Need::Creating, &digest.to_string())? != Some(false) {
        return Ok(());
    }
    // A record that cannot be read is no failure to report either.
    let mut record = Vec::new();
    let _ = (&mut file).take(MAX_RECORD_BYTES).read_to_end(&mut record);
    if let Some(f) = reusable(&record, started, config) {
        let kind = ErrorKind::ALL
            .into_iter()
            .find(|k| k.name() == f.kind)
            .unwrap_or(ErrorKind::Remote);
        return Err(SubstituteError::Failed {
            digest: *digest,
            tried: f.message,
            kind,
        }
        .into());
    }
    let result = pull_from_any(open, config, digest);
    let record = match &result {
        Ok(()) => String::new(),
        Err(e) => serde_json::to_string(&Failure {
            at_ms: now_ms(),
            kind: e.error_kind().name().to_string(),
            message: match e {
                Error::Remote(c) => match c.downcast_ref::<SubstituteError>() {
                    Some(SubstituteError::Failed { tried, .. }) => tried.clone(),
                    _ => crate::error::error_chain(e),
                },
                _ => crate::error::error_chain(e),
            },
            config: fingerprint(config),
        })
        .unwrap_or_default(),
    };
    // The record only spares the waiting processes a second attempt: a
    // failure to write it changes nothing else.
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(record.as_bytes()));
    result
}

/// How grave a failure is, to report the gravest of several.
fn gravity(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Untrusted | ErrorKind::BadKey => 4,
        ErrorKind::Integrity => 3,
        ErrorKind::Remote => 2,
        ErrorKind::NotFound | ErrorKind::UnknownDigest => 0,
        _ => 1,
    }
}

/// Pulls `digest` by its digest tag from each substituter in turn until one
/// brings it.
fn pull_from_any(open: Opener<'_>, config: &Config, digest: &ManifestDigest) -> Result<()> {
    let trusted = crate::sign::trusted_keys(&config.trusted_keys, &[])?;
    let tag = SnapshotRef::Tag(super::snapshot_tag(digest));
    let mut tried = Vec::new();
    let mut kind = ErrorKind::NotFound;
    for s in &config.substituters {
        let opts = super::Options {
            plain_http: s.plain_http,
            timeouts: oci::client::Timeouts::new(
                config.timeout,
                oci::client::Timeouts::DEFAULT_MIN_SPEED,
            ),
            ..super::Options::default()
        };
        let pulled = super::open(&s.registry, &opts).and_then(|(remote, _)| {
            transfer::pull(
                open,
                remote.as_ref(),
                &tag,
                transfer::DEFAULT_JOBS,
                false,
                &trusted,
                transfer::Arrived::Substituted,
            )
        });
        match pulled {
            Ok(_) => return Ok(()),
            Err(e) => {
                let k = e.error_kind();
                if gravity(k) > gravity(kind) {
                    kind = k;
                }
                tried.push(format!("{}: {}", s.registry, crate::error::error_chain(&e)));
            }
        }
    }
    if gravity(kind) == 0 {
        return Err(SubstituteError::NotOnAny {
            digest: *digest,
            registries: registries(config),
        }
        .into());
    }
    Err(SubstituteError::Failed {
        digest: *digest,
        tried: tried.join("; "),
        kind,
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> std::result::Result<Config, ConfigError> {
        parse_config(Path::new("/s/substituters.json"), text)
    }

    fn rule(r: std::result::Result<Config, ConfigError>) -> &'static str {
        match r {
            Err(ConfigError::Invalid { rule, .. }) => rule,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_file_is_read_with_its_defaults() {
        let c = parse(
            r#"{"substituters":[{"registry":"127.0.0.1:5000/bench/envs"},
                {"registry":"registry.example/a/b"},
                {"registry":"registry.example/c","plain_http":true}],
                "trusted_keys":["k.pub","/abs/k.pub"],"timeout":5}"#,
        )
        .unwrap();
        let plain: Vec<bool> = c.substituters.iter().map(|s| s.plain_http).collect();
        assert_eq!(plain, [true, false, true]);
        assert_eq!(
            c.trusted_keys,
            [PathBuf::from("/s/k.pub"), PathBuf::from("/abs/k.pub")]
        );
        assert_eq!((c.timeout, c.wait), (5, DEFAULT_WAIT));
        assert_eq!(parse("{}").unwrap().substituters, []);
    }

    #[test]
    fn every_rule_is_named() {
        assert_eq!(rule(parse("[")), "substituters-json");
        for null in [
            r#"{"timeout":null}"#,
            r#"{"wait":null}"#,
            r#"{"substituters":[{"registry":"r.example/a","plain_http":null}]}"#,
            r#"{"substituters":null}"#,
        ] {
            assert_eq!(rule(parse(null)), "substituters-json", "{null}");
        }
        assert_eq!(rule(parse(r#"{"substituter":[]}"#)), "substituters-json");
        assert_eq!(
            rule(parse(
                r#"{"substituters":[{"registry":"r.example/a:tag"}]}"#
            )),
            "substituter-registry"
        );
        assert_eq!(
            rule(parse(r#"{"substituters":[{"registry":"r.example"}]}"#)),
            "substituter-registry"
        );
        assert_eq!(rule(parse(r#"{"timeout":0}"#)), "substituters-seconds");
        assert_eq!(rule(parse(r#"{"wait":3601}"#)), "substituters-seconds");
    }

    #[test]
    fn the_environment_replaces_the_files_lists() {
        let c =
            parse(r#"{"substituters":[{"registry":"r.example/a"}],"trusted_keys":["k"]}"#).unwrap();
        let os = |s: &'static str| Some(OsStr::new(s));
        let e = apply_env(c.clone(), os(" localhost:1/x  [::1]:2/y "), None).unwrap();
        assert_eq!(e.substituters_from, ConfigSource::Environment);
        assert_eq!(
            e.substituters,
            [
                Substituter {
                    registry: "localhost:1/x".into(),
                    plain_http: true
                },
                Substituter {
                    registry: "[::1]:2/y".into(),
                    plain_http: true
                }
            ]
        );
        assert_eq!(e.trusted_keys, c.trusted_keys);
        let none = apply_env(c, os(""), os("a.pub\tb.pub ")).unwrap();
        assert!(none.substituters.is_empty());
        assert_eq!(none.trusted_keys.len(), 2);
        assert_eq!(
            none.trusted_keys,
            [PathBuf::from("a.pub"), PathBuf::from("b.pub")]
        );
        assert!(matches!(
            apply_env(none.clone(), os("r.example/a@sha256:00"), None),
            Err(ConfigError::Invalid {
                rule: "substituter-registry",
                file: None,
                ..
            })
        ));
        // A variable set is never taken for one unset: a list that is not
        // UTF-8 is refused, a key path that is not is kept as it is.
        let bytes = |b: &'static [u8]| Some(OsStr::from_bytes(b));
        assert!(matches!(
            apply_env(none.clone(), bytes(b"127.0.0.1:1/x\xff"), None),
            Err(ConfigError::Invalid {
                rule: "substituter-registry",
                ..
            })
        ));
        let keys = apply_env(none, None, bytes(b"/k\xff.pub")).unwrap();
        assert_eq!(keys.trusted_keys_from, ConfigSource::Environment);
        assert_eq!(
            keys.trusted_keys,
            [PathBuf::from(OsStr::from_bytes(b"/k\xff.pub"))]
        );
    }

    #[test]
    fn plain_http_is_the_default_for_a_loopback_address_only() {
        let plain = |registry: &str| {
            parse(&format!(
                r#"{{"substituters":[{{"registry":"{registry}"}}]}}"#
            ))
            .map(|c| c.substituters[0].plain_http)
            .unwrap_or_else(|e| panic!("{registry}: {e}"))
        };
        for registry in [
            "127.0.0.1:5000/a",
            "127.3.4.5/a",
            "localhost:5000/a",
            "LOCALHOST/a",
            "[::1]:5000/a",
            "oci://127.0.0.1:5000/a",
        ] {
            assert!(plain(registry), "{registry}");
        }
        for registry in [
            "127.attacker.example/a",
            "127.0.0.1.nip.io/a",
            "localhost.example/a",
            "r.example/a",
            "10.0.0.5:5000/a",
            "[::2]:5000/a",
        ] {
            assert!(!plain(registry), "{registry}");
        }
    }

    #[test]
    fn a_refused_registry_is_shown_without_its_credentials() {
        for registry in [
            "user:s3cret@r.example/a",
            "https://user:s3cret@r.example/a",
            "r.example/a?token=s3cret",
            "user:s3cret@r.example/a:tag",
        ] {
            let text = match parse(&format!(
                r#"{{"substituters":[{{"registry":"{registry}"}}]}}"#
            )) {
                Err(e) => e.to_string(),
                Ok(c) => panic!("{registry} was accepted: {c:?}"),
            };
            assert!(!text.contains("s3cret"), "{text}");
            assert!(text.contains("r.example"), "{text}");
        }
    }

    #[test]
    fn a_failure_recorded_is_reused_only_when_recent_and_configured_alike() {
        let config = parse(r#"{"substituters":[{"registry":"r.example/a"}]}"#).unwrap();
        let record = |at_ms: u128, config: &Config| {
            serde_json::to_vec(&Failure {
                at_ms,
                kind: "remote".into(),
                message: "r.example/a: down".into(),
                config: fingerprint(config),
            })
            .unwrap()
        };
        assert!(reusable(&record(10, &config), 5, &config).is_some());
        assert!(
            reusable(&record(4, &config), 5, &config).is_none(),
            "older than the wait"
        );
        let other = apply_env(config.clone(), Some(OsStr::new("s.example/b")), None).unwrap();
        assert!(
            reusable(&record(10, &other), 5, &config).is_none(),
            "other registries"
        );
        let keys = apply_env(config.clone(), None, Some(OsStr::new("/k.pub"))).unwrap();
        assert!(
            reusable(&record(10, &keys), 5, &config).is_none(),
            "other keys"
        );
        let raw =
            |b: &'static [u8]| apply_env(config.clone(), None, Some(OsStr::from_bytes(b))).unwrap();
        let (k1, k2) = (raw(b"/k\xfe.pub"), raw(b"/k\xff.pub"));
        assert!(
            reusable(&record(10, &k1), 5, &k2).is_none(),
            "keys not UTF-8"
        );
        assert!(reusable(&record(10, &k1), 5, &k1).is_some());
        let whole = record(10, &config);
        assert!(
            reusable(&whole[..whole.len() / 2], 5, &config).is_none(),
            "cut short"
        );
        assert!(reusable(b"{\"at_ms\":1,\"message\":\"\xe2\x82", 0, &config).is_none());
    }
}
