//! A small blocking client for the OCI distribution API: blobs (HEAD, GET,
//! POST then PUT) and manifests (GET, PUT), with Basic and Bearer
//! authentication answered on demand.

use std::io::Read;
use std::sync::Mutex;
use std::time::Duration;

use ureq::http::{self, Method, Response};
use ureq::{Agent, Body};

use super::auth::{self, Credentials};
use crate::digest::ObjectId;
use crate::remote::RemoteError;

/// How long one request may take, start to end.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// The most bytes of an error body kept for the message.
const ERROR_BODY_BYTES: u64 = 4096;

/// A client for one repository of one registry.
pub struct Client {
    agent: Agent,
    base: String,
    registry: String,
    repository: String,
    creds: Credentials,
    push: bool,
    authorization: Mutex<Option<String>>,
    timeouts: Timeouts,
}

/// How long the client waits on a registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// For a connection (name lookup, TCP, TLS).
    pub connect: Duration,
    /// For each read or write once connected: the most time without progress.
    pub idle: Duration,
}

impl Timeouts {
    /// The default connect timeout.
    pub const DEFAULT_CONNECT: Duration = Duration::from_secs(10);
    /// The default idle timeout.
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(30);

    /// Timeouts for `--timeout SECS`: an idle timeout of `secs`, and a
    /// connect timeout of the default or `secs`, whichever is shorter.
    pub fn from_secs(secs: u64) -> Timeouts {
        let idle = Duration::from_secs(secs.max(1));
        Timeouts {
            connect: idle.min(Self::DEFAULT_CONNECT),
            idle,
        }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Self::DEFAULT_CONNECT,
            idle: Self::DEFAULT_IDLE,
        }
    }
}

/// Whether a client error is a timeout.
fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => io_is_timeout(io),
        _ => false,
    }
}

/// Whether a read error is a timeout, as the client reports them.
fn io_is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    ) || e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ureq::Error>())
        .is_some_and(is_timeout)
}

fn transport(
    method: &Method,
    url: &str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> RemoteError {
    // A TLS handshake answered in plain HTTP reads as a corrupt TLS record.
    let text = e.to_string();
    let hint = if url.starts_with("https://")
        && (text.contains("InvalidContentType") || text.contains("corrupt message"))
    {
        " (the registry speaks plain HTTP? pass --plain-http for a loopback or insecure registry)"
    } else {
        ""
    };
    RemoteError::Transport {
        method: method.to_string(),
        url: url.to_string(),
        hint,
        source: Box::new(e),
    }
}

/// The registry's own words from an error body: `CODE: message; …`, or the text.
fn error_detail(resp: &mut Response<Body>) -> String {
    let mut bytes = Vec::new();
    let _ = resp
        .body_mut()
        .as_reader()
        .take(ERROR_BODY_BYTES)
        .read_to_end(&mut bytes);
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) {
        if let Some(errors) = v.get("errors").and_then(|e| e.as_array()) {
            let parts: Vec<String> = errors
                .iter()
                .map(|e| {
                    let code = e.get("code").and_then(|c| c.as_str()).unwrap_or("");
                    let message = e.get("message").and_then(|c| c.as_str()).unwrap_or("");
                    format!("{code}: {message}")
                })
                .collect();
            if !parts.is_empty() {
                return parts.join("; ");
            }
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    text.trim().chars().take(200).collect()
}

impl Client {
    /// A client for `registry/repository`, over HTTPS unless `plain_http`.
    pub fn new(
        registry: &str,
        repository: &str,
        plain_http: bool,
        creds: Credentials,
        push: bool,
        timeouts: Timeouts,
    ) -> Client {
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .timeout_resolve(Some(timeouts.connect))
            .timeout_connect(Some(timeouts.connect))
            .timeout_per_read(Some(timeouts.idle))
            .timeout_per_write(Some(timeouts.idle))
            .timeout_global(Some(REQUEST_TIMEOUT))
            .max_idle_connections_per_host(64)
            .user_agent(concat!("cestore/", env!("CARGO_PKG_VERSION")))
            .build();
        let authorization = match &creds {
            Credentials::Token(t) => Some(format!("Bearer {t}")),
            _ => None,
        };
        Client {
            agent: config.into(),
            base: format!("{}://{registry}", if plain_http { "http" } else { "https" }),
            registry: registry.to_string(),
            repository: repository.to_string(),
            creds,
            push,
            authorization: Mutex::new(authorization),
            timeouts,
        }
    }

    /// The error for a request that failed: a timeout names the registry
    /// and the limit it broke.
    fn failed(&self, method: &Method, url: &str, e: ureq::Error) -> RemoteError {
        if is_timeout(&e) {
            return self.timed_out(method, url, e);
        }
        transport(method, url, e)
    }

    /// The error for a failed read of an answer's body.
    fn read_failed(&self, method: &Method, url: &str, e: std::io::Error) -> RemoteError {
        if io_is_timeout(&e) {
            return self.timed_out(method, url, e);
        }
        transport(method, url, e)
    }

    fn timed_out(
        &self,
        method: &Method,
        url: &str,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> RemoteError {
        RemoteError::Timeout {
            registry: self.registry.clone(),
            request: format!("{method} {url}"),
            connect: self.timeouts.connect.as_secs(),
            idle: self.timeouts.idle.as_secs(),
            source: Box::new(e),
        }
    }

    fn url(&self, rest: &str) -> String {
        format!("{}/v2/{}/{rest}", self.base, self.repository)
    }

    fn current_authorization(&self) -> Option<String> {
        self.authorization
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default()
    }

    fn set_authorization(&self, value: String) {
        if let Ok(mut a) = self.authorization.lock() {
            *a = Some(value);
        }
    }

    /// Sends one request; on a `401`, answers the challenge once and retries.
    fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Response<Body>, RemoteError> {
        let mut answered = false;
        loop {
            let mut builder = http::Request::builder().method(method.clone()).uri(url);
            for (k, v) in headers {
                builder = builder.header(*k, *v);
            }
            if let Some(a) = self.current_authorization() {
                builder = builder.header("Authorization", a);
            }
            let resp = match body {
                Some(data) => builder
                    .body(data)
                    .map_err(|e| transport(&method, url, e))
                    .and_then(|r| self.agent.run(r).map_err(|e| self.failed(&method, url, e))),
                None => builder
                    .body(())
                    .map_err(|e| transport(&method, url, e))
                    .and_then(|r| self.agent.run(r).map_err(|e| self.failed(&method, url, e))),
            }?;
            if resp.status() != 401 || answered {
                return Ok(resp);
            }
            answered = true;
            let challenge = resp
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .and_then(auth::parse_challenge);
            self.answer(challenge)?;
        }
    }

    /// Answers a `WWW-Authenticate` challenge by setting the `Authorization` to send.
    fn answer(&self, challenge: Option<auth::Challenge>) -> Result<(), RemoteError> {
        let fail = |reason: String| RemoteError::Auth {
            registry: self.registry.clone(),
            reason,
        };
        let Some(challenge) = challenge else {
            return Err(fail(
                "the registry answered 401 without a WWW-Authenticate challenge".into(),
            ));
        };
        match challenge.scheme.as_str() {
            "basic" => {
                let header = self.creds.basic_header().ok_or_else(|| {
                    fail(format!(
                        "the registry asks for a user and password and there is {}; set CESTORE_REGISTRY_USER and CESTORE_REGISTRY_PASSWORD or log in with a Docker-compatible client",
                        self.creds.describe()
                    ))
                })?;
                self.set_authorization(header);
                Ok(())
            }
            "bearer" => {
                let token = self.fetch_token(&challenge)?;
                self.set_authorization(format!("Bearer {token}"));
                Ok(())
            }
            other => Err(fail(format!(
                "the registry asks for the unsupported '{other}' authentication scheme"
            ))),
        }
    }

    /// Fetches a bearer token from the challenge's realm.
    fn fetch_token(&self, challenge: &auth::Challenge) -> Result<String, RemoteError> {
        let fail = |reason: String| RemoteError::Auth {
            registry: self.registry.clone(),
            reason,
        };
        if let Credentials::Token(_) = self.creds {
            return Err(fail(
                "the registry refused the bearer token in CESTORE_REGISTRY_TOKEN".into(),
            ));
        }
        let realm = challenge
            .params
            .get("realm")
            .ok_or_else(|| fail("the Bearer challenge names no realm".into()))?;
        let mut query = Vec::new();
        if let Some(service) = challenge.params.get("service") {
            query.push(format!("service={}", auth::query_escape(service)));
        }
        let ours = format!(
            "repository:{}:{}",
            self.repository,
            if self.push { "pull,push" } else { "pull" }
        );
        let mut scopes = vec![ours];
        if let Some(scope) = challenge.params.get("scope") {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
        for s in &scopes {
            query.push(format!("scope={}", auth::query_escape(s)));
        }
        let sep = if realm.contains('?') { '&' } else { '?' };
        let url = format!("{realm}{sep}{}", query.join("&"));
        let method = Method::GET;
        let mut builder = http::Request::builder().method(method.clone()).uri(&url);
        if let Some(basic) = self.creds.basic_header() {
            builder = builder.header("Authorization", basic);
        }
        let request = builder.body(()).map_err(|e| transport(&method, &url, e))?;
        let mut resp = self
            .agent
            .run(request)
            .map_err(|e| self.failed(&method, &url, e))?;
        if resp.status() != 200 {
            let status = resp.status().as_u16();
            let detail = error_detail(&mut resp);
            return Err(fail(format!(
                "the token service {realm} answered {status} with {}{}",
                self.creds.describe(),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {detail}")
                }
            )));
        }
        let mut bytes = Vec::new();
        resp.body_mut()
            .as_reader()
            .take(1 << 20)
            .read_to_end(&mut bytes)
            .map_err(|e| self.read_failed(&method, &url, e))?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| fail(format!("the token service's answer is not JSON: {e}")))?;
        v.get("token")
            .or_else(|| v.get("access_token"))
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .ok_or_else(|| fail("the token service's answer holds no token".into()))
    }

    /// Turns an unexpected status into an error.
    fn unexpected(&self, method: &Method, url: &str, mut resp: Response<Body>) -> RemoteError {
        let status = resp.status().as_u16();
        let detail = error_detail(&mut resp);
        if status == 401 || status == 403 {
            return RemoteError::Auth {
                registry: self.registry.clone(),
                reason: format!(
                    "{method} {url} answered {status} with {}{}",
                    self.creds.describe(),
                    if detail.is_empty() {
                        String::new()
                    } else {
                        format!(": {detail}")
                    }
                ),
            };
        }
        RemoteError::Status {
            method: method.to_string(),
            url: url.to_string(),
            status,
            detail,
        }
    }

    /// Whether the repository holds the blob.
    pub fn has_blob(&self, id: &ObjectId) -> Result<bool, RemoteError> {
        let url = self.url(&format!("blobs/sha256:{id}"));
        let resp = self.send(Method::HEAD, &url, &[], None)?;
        match resp.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(self.unexpected(&Method::HEAD, &url, resp)),
        }
    }

    /// Uploads a blob: POST for an upload session, then one PUT with the digest.
    pub fn put_blob(&self, id: &ObjectId, data: &[u8]) -> Result<(), RemoteError> {
        let url = self.url("blobs/uploads/");
        let resp = self.send(Method::POST, &url, &[], Some(&[]))?;
        if resp.status() != 202 {
            return Err(self.unexpected(&Method::POST, &url, resp));
        }
        let location = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                RemoteError::Protocol(format!("POST {url} answered 202 without a Location header"))
            })?;
        let location = if location.starts_with("http://") || location.starts_with("https://") {
            location.to_string()
        } else if location.starts_with('/') {
            format!("{}{location}", self.base)
        } else {
            format!("{url}{location}")
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{sep}digest=sha256%3A{id}");
        let resp = self.send(
            Method::PUT,
            &put,
            &[("Content-Type", "application/octet-stream")],
            Some(data),
        )?;
        if resp.status() != 201 {
            return Err(self.unexpected(&Method::PUT, &put, resp));
        }
        Ok(())
    }

    /// Downloads a blob of `size` bytes; reads at most one byte more, so that
    /// the caller sees a longer blob for what it is.
    pub fn get_blob(&self, id: &ObjectId, size: u64) -> Result<Vec<u8>, RemoteError> {
        let url = self.url(&format!("blobs/sha256:{id}"));
        let mut resp = self.send(Method::GET, &url, &[], None)?;
        if resp.status() != 200 {
            return Err(self.unexpected(&Method::GET, &url, resp));
        }
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        resp.body_mut()
            .as_reader()
            .take(size.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| self.read_failed(&Method::GET, &url, e))?;
        Ok(data)
    }

    /// Opens a blob for streaming. A failed read is an [`std::io::Error`]
    /// whose inner error is the [`RemoteError`] it stands for.
    pub fn open_blob(&self, id: &ObjectId) -> Result<BlobReader<'_>, RemoteError> {
        let url = self.url(&format!("blobs/sha256:{id}"));
        let resp = self.send(Method::GET, &url, &[], None)?;
        if resp.status() != 200 {
            return Err(self.unexpected(&Method::GET, &url, resp));
        }
        Ok(BlobReader {
            client: self,
            url,
            body: resp.into_body().into_reader(),
        })
    }

    /// Fetches a manifest or index by tag or digest; `None` when the registry
    /// has none. Reads at most `max` bytes.
    pub fn get_manifest(
        &self,
        reference: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, RemoteError> {
        let url = self.url(&format!("manifests/{reference}"));
        let accept = format!(
            "{}, {}",
            super::mapping::MANIFEST_MEDIA_TYPE,
            super::mapping::INDEX_MEDIA_TYPE
        );
        let mut resp = self.send(Method::GET, &url, &[("Accept", &accept)], None)?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Ok(None),
            _ => return Err(self.unexpected(&Method::GET, &url, resp)),
        }
        let mut data = Vec::new();
        resp.body_mut()
            .as_reader()
            .take(max as u64 + 1)
            .read_to_end(&mut data)
            .map_err(|e| self.read_failed(&Method::GET, &url, e))?;
        if data.len() > max {
            return Err(RemoteError::Protocol(format!(
                "the manifest at {url} is larger than {max} bytes"
            )));
        }
        Ok(Some(data))
    }

    /// Uploads a manifest or index under a tag or its digest.
    pub fn put_manifest(
        &self,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<(), RemoteError> {
        let url = self.url(&format!("manifests/{reference}"));
        let resp = self.send(
            Method::PUT,
            &url,
            &[("Content-Type", media_type)],
            Some(bytes),
        )?;
        if resp.status() != 201 {
            return Err(self.unexpected(&Method::PUT, &url, resp));
        }
        if let Some(d) = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
        {
            let ours = format!("sha256:{}", ObjectId::of(bytes));
            if d != ours {
                return Err(RemoteError::Protocol(format!(
                    "the registry stored the manifest under {d}, not {ours}"
                )));
            }
        }
        Ok(())
    }
}

/// A blob's body as the registry sends it.
pub struct BlobReader<'c> {
    client: &'c Client,
    url: String,
    body: ureq::BodyReader<'static>,
}

impl Read for BlobReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.body
            .read(buf)
            .map_err(|e| std::io::Error::other(self.client.read_failed(&Method::GET, &self.url, e)))
    }
}
