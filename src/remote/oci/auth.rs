//! Registry credentials and `WWW-Authenticate` challenges.
//!
//! Credentials come from the environment or from the Docker/OCI client
//! configuration, never from the command line:
//!
//! 1. `CESTORE_REGISTRY_TOKEN`: a bearer token sent as is;
//! 2. `CESTORE_REGISTRY_USER` and `CESTORE_REGISTRY_PASSWORD`;
//! 3. the Docker client configuration, `$DOCKER_CONFIG/config.json`, else
//!    `~/.docker/config.json`, as Docker reads it:
//!    - `credHelpers.<registry>`: the credential helper for this registry;
//!    - `auths.<registry>.auth` (base64 of `user:password`, or `username` and
//!      `password`);
//!    - `credsStore`: the credential helper for every other registry.
//!
//! A credential helper `NAME` is the program `docker-credential-NAME` on
//! `PATH`, run as `docker-credential-NAME get` with the registry's host on
//! stdin (`https://index.docker.io/v1/` for Docker Hub), which prints
//! `{"ServerURL":…,"Username":…,"Secret":…}`. It runs only when a registry
//! first asks for credentials, at most once per command, in a process group
//! of its own, and the whole exchange (start, request, answer, exit) takes
//! at most [`HELPER_TIMEOUT`] or the command's idle timeout, whichever is
//! shorter; when the helper exits, or at that limit, its whole group is
//! killed. At most [`HELPER_OUTPUT`] bytes of its output are kept. A helper
//! that has nothing for the registry (it exits non-zero saying the
//! credentials are not found) leaves the client anonymous; any other failure
//! is an error that names the helper and how it ended (exit status, signal,
//! limit), never what it printed, which may hold the secret. A `Username` of `<token>` means
//! the `Secret` is an identity token, to be exchanged for an access token
//! with an OAuth2 refresh-token grant: cestore refuses it with an error that
//! says so (log in with a user and password, or pass a token in
//! `CESTORE_REGISTRY_TOKEN`).
//!
//! Nothing is sent until the registry asks: a `401` with `Basic` gets the user
//! and password; one with `Bearer realm=…,service=…,scope=…` gets a token from
//! the realm (with the user and password when there are some, anonymously
//! otherwise).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rustix::process::{self, Pid, Signal, WaitId, WaitIdOptions};

/// The longest a credential helper's exchange may take (shortened to the
/// command's idle timeout when that is shorter).
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of a credential helper's output kept (of stdout and of
/// stderr each); a helper that prints more is refused.
pub const HELPER_OUTPUT: u64 = 64 * 1024;
/// How long the pipes of a helper that exited are read for what is left in
/// them, when something outside its process group still holds them open.
const HELPER_GRACE: Duration = Duration::from_millis(250);

/// Credentials for one registry.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Credentials {
    /// None: anonymous access only.
    #[default]
    None,
    /// A user name and password (or identity token used as a password).
    Basic {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
    /// A bearer token, sent as is.
    Token(String),
    /// A credential helper (`docker-credential-NAME`), asked when first needed.
    Helper {
        /// Its name, the part after `docker-credential-`.
        name: String,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::Basic { user, .. } => write!(f, "Basic({user}, <redacted>)"),
            Credentials::Token(_) => f.write_str("Token(<redacted>)"),
            Credentials::Helper { name } => write!(f, "Helper({name})"),
        }
    }
}

impl Credentials {
    /// The `Authorization` value for Basic authentication, when there is a user.
    pub fn basic_header(&self) -> Option<String> {
        match self {
            Credentials::Basic { user, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )),
            _ => None,
        }
    }

    /// Where the credentials came from, for error messages.
    pub fn describe(&self) -> String {
        match self {
            Credentials::None => "no credentials".into(),
            Credentials::Basic { .. } => "a user and password".into(),
            Credentials::Token(_) => "a bearer token".into(),
            Credentials::Helper { name } => {
                format!("the credential helper docker-credential-{name}")
            }
        }
    }

    /// Asks a credential helper for `registry`'s credentials, within
    /// `limit`; other credentials are returned as they are. The error names
    /// the helper and never quotes what it printed.
    pub fn resolve(&self, registry: &str, limit: Duration) -> Result<Credentials, String> {
        match self {
            Credentials::Helper { name } => run_helper(name, registry, limit),
            other => Ok(other.clone()),
        }
    }
}

/// The key a credential helper knows a registry by.
fn helper_key(registry: &str) -> &str {
    if DOCKER_HUB.contains(&registry) {
        "https://index.docker.io/v1/"
    } else {
        registry
    }
}

/// Runs `docker-credential-NAME get` for `registry` in a process group of
/// its own, within `limit` for the whole exchange (start, request, answer,
/// exit), reading at most [`HELPER_OUTPUT`] bytes of each of its streams.
///
/// Once the helper exits, or at the limit, its whole process group is
/// killed, so nothing it started outlives the exchange, and a child that
/// keeps its stdout open does not hold the command. Its output is never
/// quoted in an error: it may hold the secret.
fn run_helper(name: &str, registry: &str, limit: Duration) -> Result<Credentials, String> {
    let program = format!("docker-credential-{name}");
    let fail = |why: String| format!("the credential helper {program} {why}");
    let deadline = Instant::now() + limit;
    let mut child = Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| fail(format!("could not be run ({e}); is it on PATH?")))?;
    let group = Pid::from_child(&child);
    let kill_group = || {
        // The group outlives its leader while any member runs; one that is
        // already empty has nothing left to kill.
        let _ = process::kill_process_group(group, Signal::KILL);
    };
    let (mut stdin, mut stdout, mut stderr) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let set = [
        stdin.as_ref().map(|p| nonblocking(p.as_fd())),
        stdout.as_ref().map(|p| nonblocking(p.as_fd())),
        stderr.as_ref().map(|p| nonblocking(p.as_fd())),
    ];
    if let Some(Err(e)) = set.into_iter().flatten().find(Result::is_err) {
        kill_group();
        let _ = child.wait();
        return Err(fail(format!("could not be run ({e})")));
    }
    let mut request = helper_key(registry).as_bytes();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut exited: Option<(std::process::ExitStatus, Instant)> = None;
    loop {
        feed(&mut stdin, &mut request);
        drain(&mut stdout, &mut out);
        drain(&mut stderr, &mut err);
        if exited.is_none() {
            let done = process::waitid(
                WaitId::Pid(group),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
            );
            if let Ok(Some(_)) = done {
                // The helper has answered and exited (it is a zombie until
                // waited for, so its group id is still its own): whatever it
                // left running is killed before it is reaped.
                kill_group();
                let status = child
                    .wait()
                    .map_err(|e| fail(format!("could not be waited for ({e})")))?;
                exited = Some((status, Instant::now()));
            }
        }
        let now = Instant::now();
        match exited {
            Some(_) if stdout.is_none() && stderr.is_none() => break,
            // What a helper wrote before it exited is in its pipes; a
            // descendant outside its group that holds them open is not waited
            // for past a short grace.
            Some((_, at)) if now >= deadline.min(at + HELPER_GRACE) => break,
            None if now >= deadline => {
                kill_group();
                let _ = child.wait();
                return Err(fail(format!(
                    "did not finish within {} s; it and every process in its group were killed",
                    limit.as_secs_f64()
                )));
            }
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let Some((status, _)) = exited else {
        return Err(fail("could not be waited for".into()));
    };
    helper_answer(status, &out, &err).map_err(fail)
}

/// Writes what of `request` a non-blocking pipe takes now; closes the pipe
/// once all is written, or when the helper will not read it (a helper that
/// exits without reading its input is judged by its exit).
fn feed<W: Write>(pipe: &mut Option<W>, request: &mut &[u8]) {
    let Some(w) = pipe.as_mut() else { return };
    match w.write(request) {
        Ok(n) => *request = &request[n..],
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(_) => *request = &[],
    }
    if request.is_empty() {
        *pipe = None;
    }
}

/// Sets a pipe's descriptor non-blocking.
fn nonblocking(fd: std::os::fd::BorrowedFd<'_>) -> rustix::io::Result<()> {
    rustix::fs::fcntl_getfl(fd)
        .and_then(|flags| rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK))
}

/// The credentials a helper that exited with `status` gave on its standard
/// output `out` (`err` its standard error), or why it gave none.
fn helper_answer(
    status: std::process::ExitStatus,
    out: &[u8],
    err: &[u8],
) -> Result<Credentials, String> {
    if out.len() as u64 > HELPER_OUTPUT || err.len() as u64 > HELPER_OUTPUT {
        return Err(format!(
            "printed more than {HELPER_OUTPUT} bytes (its output is not shown: it may hold a secret)"
        ));
    }
    if !status.success() {
        let said = |b: &[u8]| {
            String::from_utf8_lossy(b)
                .to_ascii_lowercase()
                .contains("credentials not found")
        };
        if status.code().is_some() && (said(out) || said(err)) {
            return Ok(Credentials::None);
        }
        return Err(match (status.code(), status.signal()) {
            (Some(code), _) => format!(
                "failed with exit status {code} (its output is not shown: it may hold a secret)"
            ),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => format!("failed ({status})"),
        });
    }
    parse_helper_output(out)
}

/// Moves what a non-blocking pipe holds into `into`, keeping at most one
/// byte more than [`HELPER_OUTPUT`] (the rest is read and dropped, so that
/// the writer is never stuck); closes the pipe at its end.
fn drain<R: Read>(pipe: &mut Option<R>, into: &mut Vec<u8>) {
    let Some(p) = pipe.as_mut() else {
        return;
    };
    let mut buf = [0u8; 8192];
    loop {
        match p.read(&mut buf) {
            Ok(0) => {
                *pipe = None;
                return;
            }
            Ok(n) => {
                let room = (HELPER_OUTPUT as usize + 1).saturating_sub(into.len());
                into.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(_) => {
                *pipe = None;
                return;
            }
        }
    }
}

/// Reads a credential helper's answer, `{"Username":…,"Secret":…}`. No
/// error quotes the answer: where it is not JSON, only the position is told.
fn parse_helper_output(out: &[u8]) -> Result<Credentials, String> {
    let v: serde_json::Value = serde_json::from_slice(out).map_err(|e| {
        format!(
            "printed an answer that is not JSON (at line {}, column {}; its output is not shown: it may hold a secret)",
            e.line(),
            e.column()
        )
    })?;
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("");
    let (user, secret) = (field("Username"), field("Secret"));
    if secret.is_empty() {
        return Err("printed no Secret".into());
    }
    if user == "<token>" {
        return Err(
            "gave an identity token (Username <token>), which cestore does not exchange for an access token; log in with a user and password, or set CESTORE_REGISTRY_TOKEN".into(),
        );
    }
    Ok(Credentials::Basic {
        user: user.to_string(),
        password: secret.to_string(),
    })
}

/// The names Docker Hub goes by.
const DOCKER_HUB: [&str; 3] = ["docker.io", "registry-1.docker.io", "index.docker.io"];

/// Finds the credentials for `registry` (a host, with its port when it has one).
pub fn lookup(registry: &str) -> Credentials {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(token) = var("CESTORE_REGISTRY_TOKEN") {
        return Credentials::Token(token);
    }
    if let (Some(user), Some(password)) = (
        var("CESTORE_REGISTRY_USER"),
        var("CESTORE_REGISTRY_PASSWORD"),
    ) {
        return Credentials::Basic { user, password };
    }
    let path = var("DOCKER_CONFIG")
        .map(|d| PathBuf::from(d).join("config.json"))
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".docker/config.json")));
    path.and_then(|p| read_docker_config(&p))
        .and_then(|bytes| from_docker_config(&bytes, registry))
        .unwrap_or_default()
}

/// The most bytes of the Docker client configuration read.
const DOCKER_CONFIG_BYTES: u64 = 4 << 20;

/// The Docker client configuration's bytes, when it is a regular file that
/// can be read (a FIFO is never opened to wait on) and not over
/// [`DOCKER_CONFIG_BYTES`].
fn read_docker_config(path: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = crate::fsutil::open_regular(path).ok()?;
    let mut bytes = Vec::new();
    file.take(DOCKER_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= DOCKER_CONFIG_BYTES).then_some(bytes)
}

/// The host a Docker config `auths` key names: without scheme and path.
fn auths_key_host(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

/// Reads the credentials for `registry` from a Docker config file's bytes:
/// its credential helper (`credHelpers`), else its `auths` entry, else the
/// default credential helper (`credsStore`).
pub fn from_docker_config(bytes: &[u8], registry: &str) -> Option<Credentials> {
    let config: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let matches = |host: &str| {
        host == registry || (DOCKER_HUB.contains(&host) && DOCKER_HUB.contains(&registry))
    };
    let helper = |name: Option<&serde_json::Value>| {
        name.and_then(|n| n.as_str())
            .filter(|n| !n.is_empty())
            .map(|n| Credentials::Helper {
                name: n.to_string(),
            })
    };
    if let Some(helpers) = config.get("credHelpers").and_then(|h| h.as_object()) {
        let named = helpers
            .iter()
            .find(|(k, _)| matches(auths_key_host(k)))
            .map(|(_, v)| v);
        if let Some(c) = helper(named) {
            return Some(c);
        }
    }
    let inline = config
        .get("auths")
        .and_then(|a| a.as_object())
        .and_then(|auths| {
            auths
                .iter()
                .find(|(k, _)| matches(auths_key_host(k)))
                .map(|(_, v)| v)
        })
        .and_then(auths_entry);
    inline.or_else(|| helper(config.get("credsStore")))
}

/// The credentials an `auths` entry holds inline, when it holds some.
fn auths_entry(entry: &serde_json::Value) -> Option<Credentials> {
    if let Some(token) = entry.get("registrytoken").and_then(|v| v.as_str()) {
        return Some(Credentials::Token(token.to_string()));
    }
    let (user, password) = match entry.get("auth").and_then(|v| v.as_str()) {
        Some(auth) if !auth.is_empty() => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (u, p) = text.split_once(':')?;
            (u.to_string(), p.to_string())
        }
        _ => (
            entry.get("username")?.as_str()?.to_string(),
            entry.get("password")?.as_str()?.to_string(),
        ),
    };
    Some(Credentials::Basic { user, password })
}

/// One `WWW-Authenticate` challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// The scheme, lowercased: `basic` or `bearer`.
    pub scheme: String,
    /// Its parameters, keys lowercased.
    pub params: BTreeMap<String, String>,
}

/// Parses a `WWW-Authenticate` value such as
/// `Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull"`.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = match header.split_once(char::is_whitespace) {
        Some((s, r)) => (s, r),
        None => (header, ""),
    };
    if scheme.is_empty() {
        return None;
    }
    let mut params = BTreeMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if key.trim().is_empty() {
            break;
        }
        if chars.next() != Some('=') {
            // A token68 form (e.g. `Basic abc==`) carries no parameters we use.
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        if let Some(n) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => break,
                    _ => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
            value = value.trim().to_string();
        }
        params.insert(key.trim().to_ascii_lowercase(), value);
    }
    Some(Challenge {
        scheme: scheme.to_ascii_lowercase(),
        params,
    })
}

/// Percent-encodes a query parameter value.
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_and_basic_challenges() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:samalba/my-app:pull,push""#,
        )
        .unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.params["realm"], "https://auth.docker.io/token");
        assert_eq!(c.params["service"], "registry.docker.io");
        assert_eq!(c.params["scope"], "repository:samalba/my-app:pull,push");
        let b = parse_challenge(r#"Basic realm="Registry Realm""#).unwrap();
        assert_eq!(b.scheme, "basic");
        assert_eq!(b.params["realm"], "Registry Realm");
        let bare = parse_challenge("Basic").unwrap();
        assert!(bare.params.is_empty());
        let unquoted = parse_challenge("Bearer realm=https://x/t, service=s").unwrap();
        assert_eq!(unquoted.params["realm"], "https://x/t");
        assert_eq!(unquoted.params["service"], "s");
    }

    #[test]
    fn reads_docker_config_auths() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3:cret");
        let config = format!(
            r#"{{"auths":{{"https://reg.example:5000/v2/":{{"auth":"{auth}"}},"other":{{"username":"bob","password":"pw"}}}}}}"#
        );
        assert_eq!(
            from_docker_config(config.as_bytes(), "reg.example:5000"),
            Some(Credentials::Basic {
                user: "alice".into(),
                password: "s3:cret".into()
            })
        );
        assert_eq!(
            from_docker_config(config.as_bytes(), "other"),
            Some(Credentials::Basic {
                user: "bob".into(),
                password: "pw".into()
            })
        );
        assert_eq!(from_docker_config(config.as_bytes(), "nowhere"), None);
        let hub = format!(r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{auth}"}}}}}}"#);
        assert!(from_docker_config(hub.as_bytes(), "registry-1.docker.io").is_some());
    }

    #[test]
    fn reads_docker_config_credential_helpers() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:pw");
        let config = format!(
            r#"{{"credHelpers":{{"reg.example:5000":"per","https://index.docker.io/v1/":"hub"}},"credsStore":"desktop","auths":{{"inline.example":{{"auth":"{auth}"}},"marked.example":{{}}}}}}"#
        );
        let helper = |n: &str| Some(Credentials::Helper { name: n.into() });
        let c = config.as_bytes();
        assert_eq!(from_docker_config(c, "reg.example:5000"), helper("per"));
        assert_eq!(from_docker_config(c, "registry-1.docker.io"), helper("hub"));
        assert_eq!(
            from_docker_config(c, "inline.example"),
            Some(Credentials::Basic {
                user: "alice".into(),
                password: "pw".into()
            })
        );
        assert_eq!(from_docker_config(c, "marked.example"), helper("desktop"));
        assert_eq!(from_docker_config(c, "other.example"), helper("desktop"));
        let no_store = r#"{"credHelpers":{"a":""},"credsStore":""}"#;
        assert_eq!(from_docker_config(no_store.as_bytes(), "a"), None);
        assert_eq!(helper_key("docker.io"), "https://index.docker.io/v1/");
        assert_eq!(helper_key("reg.example:5000"), "reg.example:5000");
    }

    #[test]
    fn reads_credential_helper_answers() {
        assert_eq!(
            parse_helper_output(br#"{"ServerURL":"r","Username":"u","Secret":"s"}"#),
            Ok(Credentials::Basic {
                user: "u".into(),
                password: "s".into()
            })
        );
        let identity = parse_helper_output(br#"{"Username":"<token>","Secret":"t"}"#);
        assert!(identity.unwrap_err().contains("identity token"));
        assert!(parse_helper_output(br#"{"Username":"u"}"#)
            .unwrap_err()
            .contains("no Secret"));
        assert!(parse_helper_output(b"not json")
            .unwrap_err()
            .contains("not JSON"));
        // No refusal quotes the answer, however it is malformed.
        for bad in [
            &br#"{"Username":"u","Secret":"TOPSECRET123""#[..],
            br#"{"Username":"u","Secret":TOPSECRET123}"#,
            br#"{"Username":"u","Secret":"TOPSECRET123\q"}"#,
            br#"{"Username":"u","Secret":"TOPSECRET123"}TOPSECRET123"#,
            br#"{"Username":"u","Secret":["TOPSECRET123"]}"#,
            br#"{"Username":"<token>","Secret":"TOPSECRET123"}"#,
            br#""TOPSECRET123""#,
            b"TOPSECRET123\xff",
        ] {
            let why = parse_helper_output(bad).unwrap_err();
            assert!(!why.contains("TOPSECRET"), "{why}");
        }
    }

    #[test]
    fn escapes_query_values() {
        assert_eq!(
            query_escape("repository:a/b:pull,push"),
            "repository%3Aa%2Fb%3Apull%2Cpush"
        );
    }
}
