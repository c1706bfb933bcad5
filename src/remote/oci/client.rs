//! A small blocking client for the OCI distribution API: blobs (HEAD, GET,
//! a monolithic POST or POST then PUT, cross-repository mounts) and manifests
//! (GET, PUT), with Basic and Bearer authentication answered on demand, one
//! token per scope shared by every thread, and bounded retries of `429`,
//! `5xx` and reset connections.

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use ureq::http::{self, Method, Response};
use ureq::{Agent, Body};

use super::auth::{self, Credentials};
pub use super::retry::Timeouts;
use super::retry::{
    backoff, io_is_timeout, is_reset, is_slow_upload, is_timeout, retry_after, retry_fits,
    retryable, Floor, MAX_ATTEMPTS,
};
use crate::digest::ObjectId;
use crate::remote::{AnswerError, RemoteError};

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
    /// The credentials a credential helper gave, asked for on the first challenge.
    resolved: OnceLock<Result<Credentials, String>>,
    push: bool,
    auth: Mutex<AuthState>,
    /// Held while a challenge is answered, so that threads share one token.
    answering: Mutex<()>,
    /// Whether the registry takes a blob in one `POST ?digest=`; `None` until asked.
    monolithic: Mutex<Option<bool>>,
    /// Blobs known to be in another repository of the same registry.
    mount_sources: Mutex<HashMap<ObjectId, String>>,
    /// Blobs this client found in, or put into, its repository.
    present: Mutex<Vec<ObjectId>>,
    counters: Counters,
    timeouts: Timeouts,
}

/// What the client sends with every request once a challenge asked for it.
#[derive(Default)]
struct AuthState {
    /// The registry asked for Basic authentication: send it with every request.
    basic: Option<String>,
    /// Bearer tokens by scope (`repository:NAME:ACTIONS`, space-separated).
    tokens: HashMap<String, String>,
}

/// Counts of what went over the wire.
#[derive(Default)]
struct Counters {
    head: AtomicU64,
    get: AtomicU64,
    post: AtomicU64,
    put: AtomicU64,
    other: AtomicU64,
    token: AtomicU64,
    retried: AtomicU64,
    mounted: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
}

/// What a client sent to and received from its registry: every HTTP request,
/// retries and token requests included, and the bytes of the bodies.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Traffic {
    /// Every request sent.
    pub total: u64,
    /// `HEAD` requests (does the repository hold a blob?).
    pub head: u64,
    /// `GET` requests (blobs and manifests), token requests not included.
    pub get: u64,
    /// `POST` requests (uploads opened, monolithic uploads, mounts).
    pub post: u64,
    /// `PUT` requests (uploads closed, manifests).
    pub put: u64,
    /// Requests to a token service.
    pub token: u64,
    /// Requests sent again after a `429`, a `5xx` or a reset connection.
    pub retried: u64,
    /// Blobs mounted from another repository of the same registry instead of uploaded.
    pub mounted: u64,
    /// Body bytes sent.
    pub bytes_sent: u64,
    /// Body bytes received (blobs, manifests and tokens; not error bodies).
    pub bytes_received: u64,
}

/// One request as it is sent, again on a retry.
#[derive(Clone, Copy)]
struct Request<'a> {
    method: &'a Method,
    url: &'a str,
    headers: &'a [(&'a str, &'a str)],
    body: Option<Payload<'a>>,
    /// The `Authorization` header's value, if any.
    authorization: Option<&'a str>,
    kind: Kind,
}

/// A request's body: bytes in memory, or a file of the store streamed as
/// it is sent (opened again for every attempt), so that an upload holds a
/// buffer, not the blob.
#[derive(Clone, Copy, Debug)]
pub enum Payload<'a> {
    /// Bytes in memory.
    Bytes(&'a [u8]),
    /// A file's first `len` bytes, which must hash to `id`: a file that
    /// does not (it changed) fails the request before its last byte is sent.
    File {
        /// The file.
        path: &'a std::path::Path,
        /// Its size.
        len: u64,
        /// The SHA-256 its bytes must hash to.
        id: &'a ObjectId,
    },
}

impl Payload<'_> {
    /// The body's size in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Payload::Bytes(b) => b.len() as u64,
            Payload::File { len, .. } => *len,
        }
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read for an upload, hashed on the way: the read that would hand
/// over its last byte fails instead when the bytes do not hash to the
/// expected SHA-256, or when the file is longer or shorter than its size.
struct Checked {
    file: std::fs::File,
    left: u64,
    hasher: crate::digest::ObjectHasher,
    id: ObjectId,
}

impl Read for Checked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the object is shorter than its size",
            ));
        }
        self.hasher.update(&buf[..n]);
        self.left -= n as u64;
        if self.left == 0 {
            let hasher = std::mem::take(&mut self.hasher);
            let mut one = [0u8; 1];
            if hasher.finish() != self.id || self.file.read(&mut one)? != 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the object no longer hashes to its id",
                ));
            }
        }
        Ok(n)
    }
}

/// What a request is counted as.
#[derive(Clone, Copy)]
enum Kind {
    Registry,
    Token,
}

/// How a `POST` to the uploads endpoint ended.
enum Opened {
    /// The blob is there (uploaded in one request, or mounted).
    Done,
    /// An upload session was opened at this URL: `PUT` the blob there.
    Session(String),
    /// The registry does not do this kind of `POST`.
    Refused,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
fn transport(
    method: &Method,
    url: &str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> RemoteError {
    // A TLS handshake answered in plain HTTP reads as a corrupt TLS record.
    let text = e.to_string();
    let plain_http = url.starts_with("https://")
        && (text.contains("InvalidContentType") || text.contains("corrupt message"));
    RemoteError::Transport {
        method: method.to_string(),
        url: url.to_string(),
        plain_http,
        source: Box::new(e),
    }
}

/// Whether `url` is on the registry whose base URL is `base`
/// (`SCHEME://HOST[:PORT]`, its scheme and host in any case): the base
/// itself, or a path under it.
fn same_origin(url: &str, base: &str) -> bool {
    match (url.get(..base.len()), url.get(base.len()..)) {
        (Some(head), Some(rest)) => {
            head.eq_ignore_ascii_case(base) && (rest.is_empty() || rest.starts_with(['/', '?']))
        }
        _ => false,
    }
}

/// The registry's own words from an error body: `CODE: message; …`, or the text.
fn error_detail(bytes: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) {
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
                return crate::error::printable(&parts.join("; "))
                    .chars()
                    .take(1000)
                    .collect();
            }
        }
    }
    let text = String::from_utf8_lossy(bytes);
    crate::error::printable(text.trim())
        .chars()
        .take(200)
        .collect()
}

/// The SHA-256 of no bytes: the blob a registry's support for a monolithic
/// `POST` is probed with.
fn empty_blob() -> ObjectId {
    ObjectId::of(&[])
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
            .timeout_recv_response(Some(timeouts.idle))
            .timeout_global(Some(REQUEST_TIMEOUT))
            .max_idle_connections_per_host(64)
            .user_agent(concat!("cestore/", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent: config.into(),
            base: format!("{}://{registry}", if plain_http { "http" } else { "https" }),
            registry: registry.to_string(),
            repository: repository.to_string(),
            creds,
            resolved: OnceLock::new(),
            push,
            auth: Mutex::new(AuthState::default()),
            answering: Mutex::new(()),
            monolithic: Mutex::new(None),
            mount_sources: Mutex::new(HashMap::new()),
            present: Mutex::new(Vec::new()),
            counters: Counters::default(),
            timeouts,
        }
    }

    /// What this client has sent and received so far.
    pub fn traffic(&self) -> Traffic {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (head, gets, post, put, token) = (
            get(&c.head),
            get(&c.get),
            get(&c.post),
            get(&c.put),
            get(&c.token),
        );
        Traffic {
            total: head + gets + post + put + get(&c.other) + token,
            head,
            get: gets,
            post,
            put,
            token,
            retried: get(&c.retried),
            mounted: get(&c.mounted),
            bytes_sent: get(&c.bytes_sent),
            bytes_received: get(&c.bytes_received),
        }
    }

    /// Names, for blobs this repository may lack, another repository of the
    /// same registry that holds them: an upload of one of them tries a
    /// cross-repository mount first.
    pub fn set_mount_sources(&self, sources: HashMap<ObjectId, String>) {
        let mut s = lock(&self.mount_sources);
        *s = sources;
        s.retain(|_, repo| *repo != self.repository);
    }

    /// The blobs this client found in its repository or put there (uploaded
    /// or mounted), each once.
    pub fn present_blobs(&self) -> Vec<ObjectId> {
        let mut v = lock(&self.present).clone();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn note_present(&self, id: &ObjectId) {
        lock(&self.present).push(*id);
    }

    fn received(&self, n: usize) {
        self.counters
            .bytes_received
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The error for a request that failed: a timeout names the registry
    /// and the limit it broke.
    fn failed(
        &self,
        method: &Method,
        url: &str,
        sent: Option<Payload<'_>>,
        e: ureq::Error,
    ) -> RemoteError {
        let budget = sent
            .filter(|b| !b.is_empty())
            .and_then(|b| Some((b.len(), self.timeouts.upload_budget(b.len() as usize)?)));
        if let (Some((len, budget)), true) = (budget, is_slow_upload(&e)) {
            return self.too_slow(
                method,
                url,
                format!(
                    "{len} bytes not sent and answered within {} s, at {} bytes a second plus {} s",
                    budget.as_secs(),
                    self.timeouts.min_speed,
                    self.timeouts.idle.as_secs()
                ),
            );
        }
        if is_timeout(&e) {
            return self.timed_out(method, url, e);
        }
        transport(method, url, e)
    }

    /// The error for a failed read of an answer's body: the error a
    /// [`BodyReader`] carries, or what the client said.
    fn read_failed(&self, method: &Method, url: &str, e: std::io::Error) -> RemoteError {
        if e.get_ref().is_some_and(|inner| inner.is::<RemoteError>()) {
            if let Some(Ok(remote)) = e.into_inner().map(|i| i.downcast::<RemoteError>()) {
                return *remote;
            }
            return AnswerError::Unreadable {
                method: method.to_string(),
                url: url.to_string(),
            }
            .into();
        }
        if io_is_timeout(&e) {
            return self.timed_out(method, url, e);
        }
        transport(method, url, e)
    }

    /// The error for a transfer below the rate floor.
    fn too_slow(&self, method: &Method, url: &str, detail: String) -> RemoteError {
        RemoteError::TooSlow {
            registry: self.registry.clone(),
            request: format!("{method} {url}"),
            detail,
        }
    }

    /// An answer's body, read under the transfer-rate floor and counted as
    /// received when `counted`.
    fn body(
        &self,
        method: &Method,
        url: &str,
        resp: Response<Body>,
        counted: bool,
    ) -> BodyReader<'_> {
        BodyReader {
            client: self,
            method: method.clone(),
            url: url.to_string(),
            body: resp.into_body().into_reader(),
            floor: Floor::new(&self.timeouts),
            counted,
        }
    }

    /// The registry's own words from an error answer's body (at most
    /// [`ERROR_BODY_BYTES`] of it, read under the floor).
    fn error_body(&self, method: &Method, url: &str, resp: Response<Body>) -> String {
        let bytes = self
            .read_body(method, url, resp, ERROR_BODY_BYTES, false)
            .unwrap_or_default();
        error_detail(&bytes)
    }

    /// Reads at most `max` bytes of an answer's body, under the floor.
    fn read_body(
        &self,
        method: &Method,
        url: &str,
        resp: Response<Body>,
        max: u64,
        counted: bool,
    ) -> Result<Vec<u8>, RemoteError> {
        let mut data = Vec::new();
        self.body(method, url, resp, counted)
            .take(max)
            .read_to_end(&mut data)
            .map_err(|e| self.read_failed(method, url, e))?;
        Ok(data)
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

    /// The credentials to answer a challenge with: those found at start, or
    /// what the credential helper gives (run once, when first needed).
    fn credentials(&self) -> Result<&Credentials, RemoteError> {
        let Credentials::Helper { .. } = &self.creds else {
            return Ok(&self.creds);
        };
        self.resolved
            .get_or_init(|| {
                self.creds
                    .resolve(&self.registry, auth::HELPER_TIMEOUT.min(self.timeouts.idle))
            })
            .as_ref()
            .map_err(|reason| RemoteError::Auth {
                registry: self.registry.clone(),
                reason: reason.clone(),
            })
    }

    fn describe_credentials(&self) -> String {
        match self.resolved.get() {
            Some(Ok(c)) => format!("{} from {}", c.describe(), self.creds.describe()),
            _ => self.creds.describe().to_string(),
        }
    }

    /// The token scope a request needs: push (or pull) on this repository,
    /// and pull on `from` for a mount.
    fn scope(&self, from: Option<&str>) -> String {
        let ours = format!(
            "repository:{}:{}",
            self.repository,
            if self.push { "pull,push" } else { "pull" }
        );
        match from {
            Some(f) => format!("{ours} repository:{f}:pull"),
            None => ours,
        }
    }

    /// The `Authorization` to send for a scope, once a challenge set one.
    fn authorization(&self, scope: &str) -> Option<String> {
        if let Credentials::Token(t) = &self.creds {
            return Some(format!("Bearer {t}"));
        }
        let state = lock(&self.auth);
        state
            .tokens
            .get(scope)
            .cloned()
            .or_else(|| state.basic.clone())
    }

    /// Sends one request as it is; counts it.
    fn run_once(&self, req: &Request<'_>) -> Result<Response<Body>, ureq::Error> {
        let Request {
            method,
            url,
            headers,
            body,
            authorization,
            kind,
        } = *req;
        let c = &self.counters;
        let counter = match kind {
            Kind::Token => &c.token,
            Kind::Registry => match *method {
                Method::HEAD => &c.head,
                Method::GET => &c.get,
                Method::POST => &c.post,
                Method::PUT => &c.put,
                _ => &c.other,
            },
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut builder = http::Request::builder().method(method.clone()).uri(url);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        if let Some(a) = authorization {
            builder = builder.header("Authorization", a);
        }
        match body {
            Some(payload) => {
                let len = payload.len();
                c.bytes_sent.fetch_add(len, Ordering::Relaxed);
                // The upload and the wait for its answer share one budget.
                let budget = self.timeouts.upload_budget(len as usize);
                match payload {
                    Payload::Bytes(data) => self.run_body(builder.body(data)?, budget),
                    Payload::File { path, len, id } => {
                        let mut checked = Checked {
                            file: std::fs::File::open(path)?,
                            left: len,
                            hasher: crate::digest::ObjectHasher::default(),
                            id: *id,
                        };
                        let builder = builder.header("Content-Length", len.to_string());
                        let body = ureq::SendBody::from_reader(&mut checked);
                        self.run_body(builder.body(body)?, budget)
                    }
                }
            }
            None => self.agent.run(builder.body(())?),
        }
    }

    /// Sends a request with a body; the upload and the wait for its answer
    /// share `budget`.
    fn run_body(
        &self,
        req: http::Request<impl ureq::AsSendBody>,
        budget: Option<Duration>,
    ) -> Result<Response<Body>, ureq::Error> {
        let mut request = self.agent.configure_request(req).timeout_send_body(budget);
        if budget.is_some() {
            request = request
                .timeout_recv_response(budget)
                .timeout_per_read(budget);
        }
        self.agent.run(request.build())
    }

    /// Sends one request, again after a `429`, a retryable `5xx` or a reset
    /// connection: at most [`MAX_ATTEMPTS`] times, waiting what `Retry-After`
    /// asks or a doubling backoff. A retry is sent only when the time since
    /// the first attempt, the wait and the last attempt's time once more fit
    /// in the idle timeout, or an upload's own budget ([`retry_fits`]), so a
    /// registry that answers slowly and then fails costs about one timeout,
    /// not one per attempt.
    /// The last answer is returned as it is.
    fn execute(&self, req: &Request<'_>) -> Result<Response<Body>, RemoteError> {
        let started = Instant::now();
        // An upload may take longer than the idle timeout: its own budget
        // ([`Timeouts::upload_budget`]), none without a transfer-rate floor.
        let limit = match req.body {
            None => self.timeouts.idle,
            Some(p) => self
                .timeouts
                .upload_budget(usize::try_from(p.len()).unwrap_or(usize::MAX))
                .map_or(Duration::MAX, |b| b.max(self.timeouts.idle)),
        };
        let mut attempt = 0;
        loop {
            let sent = Instant::now();
            let result = self.run_once(req);
            let took = sent.elapsed();
            let wait = match &result {
                Ok(resp) if retryable(resp.status().as_u16()) => {
                    Some(retry_after(resp.headers()).unwrap_or_else(|| backoff(attempt)))
                }
                Err(e) if is_reset(e) => Some(backoff(attempt)),
                _ => None,
            };
            let wait = wait.filter(|w| {
                attempt + 1 < MAX_ATTEMPTS && retry_fits(started.elapsed(), *w, took, limit)
            });
            match (result, wait) {
                (Ok(resp), None) => return Ok(resp),
                (Err(e), None) => return Err(self.failed(req.method, req.url, req.body, e)),
                (_, Some(w)) => {
                    self.counters.retried.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(w);
                    attempt += 1;
                }
            }
        }
    }

    /// Sends one request for this repository's scope.
    fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Response<Body>, RemoteError> {
        self.send_scoped(method, url, headers, body.map(Payload::Bytes), None)
    }

    /// Sends one request; on a `401`, answers the challenge once and sends
    /// it again. `from` is the other repository a mount reads.
    fn send_scoped(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<Payload<'_>>,
        from: Option<&str>,
    ) -> Result<Response<Body>, RemoteError> {
        let scope = self.scope(from);
        // Credentials go to this registry's own URLs alone: a URL elsewhere
        // that it names (an upload's `Location`, a referrers page's `Link`)
        // is asked without them, and its challenge is not answered.
        let ours = same_origin(url, &self.base);
        let mut answered = false;
        loop {
            let sent = ours.then(|| self.authorization(&scope)).flatten();
            let resp = self.execute(&Request {
                method: &method,
                url,
                headers,
                body,
                authorization: sent.as_deref(),
                kind: Kind::Registry,
            })?;
            if resp.status() != 401 || answered || !ours {
                return Ok(resp);
            }
            answered = true;
            let challenge = resp
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .and_then(auth::parse_challenge);
            drop(resp);
            self.answer(challenge, &scope, sent.as_deref())?;
        }
    }

    /// Answers a `WWW-Authenticate` challenge by setting the `Authorization`
    /// to send for `scope`. Threads answer one at a time, and a thread that
    /// finds the answer changed since it sent its request uses that one: one
    /// token per scope, however many requests are in flight.
    fn answer(
        &self,
        challenge: Option<auth::Challenge>,
        scope: &str,
        sent: Option<&str>,
    ) -> Result<(), RemoteError> {
        let _answering = lock(&self.answering);
        if let Some(now) = self.authorization(scope) {
            if Some(now.as_str()) != sent {
                return Ok(());
            }
        }
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
                let header = self.credentials()?.basic_header().ok_or_else(|| {
                    fail(format!(
                        "the registry asks for a user and password and there is {}; set CESTORE_REGISTRY_USER and CESTORE_REGISTRY_PASSWORD or log in with a Docker-compatible client",
                        self.describe_credentials()
                    ))
                })?;
                lock(&self.auth).basic = Some(header);
                Ok(())
            }
            "bearer" => {
                let token = self.fetch_token(&challenge, scope)?;
                lock(&self.auth)
                    .tokens
                    .insert(scope.to_string(), format!("Bearer {token}"));
                Ok(())
            }
            other => Err(fail(format!(
                "the registry asks for the unsupported '{other}' authentication scheme"
            ))),
        }
    }

    /// Fetches a bearer token for `scope` (and the challenge's own scope)
    /// from the challenge's realm.
    fn fetch_token(&self, challenge: &auth::Challenge, scope: &str) -> Result<String, RemoteError> {
        let fail = |reason: String| RemoteError::Auth {
            registry: self.registry.clone(),
            reason,
        };
        if let Credentials::Token(_) = self.creds {
            return Err(fail(
                "the registry refused the bearer token in CESTORE_REGISTRY_TOKEN".into(),
            ));
        }
        let creds = self.credentials()?;
        let realm = challenge
            .params
            .get("realm")
            .ok_or_else(|| fail("the Bearer challenge names no realm".into()))?;
        let mut query = Vec::new();
        if let Some(service) = challenge.params.get("service") {
            query.push(format!("service={}", auth::query_escape(service)));
        }
        let mut scopes: Vec<String> = scope.split(' ').map(str::to_string).collect();
        if let Some(theirs) = challenge.params.get("scope") {
            for s in theirs.split(' ') {
                if !scopes.iter().any(|x| x == s) {
                    scopes.push(s.to_string());
                }
            }
        }
        for s in &scopes {
            query.push(format!("scope={}", auth::query_escape(s)));
        }
        let sep = if realm.contains('?') { '&' } else { '?' };
        let url = format!("{realm}{sep}{}", query.join("&"));
        let method = Method::GET;
        let basic = creds.basic_header();
        let resp = self.execute(&Request {
            method: &method,
            url: &url,
            headers: &[],
            body: None,
            authorization: basic.as_deref(),
            kind: Kind::Token,
        })?;
        if resp.status() != 200 {
            let status = resp.status().as_u16();
            let detail = self.error_body(&method, &url, resp);
            return Err(fail(format!(
                "the token service {realm} answered {status} with {}{}",
                self.describe_credentials(),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {detail}")
                }
            )));
        }
        let bytes = self.read_body(&method, &url, resp, 1 << 20, true)?;
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
    fn unexpected(&self, method: &Method, url: &str, resp: Response<Body>) -> RemoteError {
        let status = resp.status().as_u16();
        let detail = self.error_body(method, url, resp);
        if status == 401 || status == 403 {
            return RemoteError::Auth {
                registry: self.registry.clone(),
                reason: format!(
                    "{method} {url} answered {status} with {}{}",
                    self.describe_credentials(),
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
            200 => {
                self.note_present(id);
                Ok(true)
            }
            404 => Ok(false),
            _ => Err(self.unexpected(&Method::HEAD, &url, resp)),
        }
    }

    /// Uploads a blob. A blob known to be in another repository of the
    /// registry is mounted from there when the registry allows it. Otherwise
    /// it goes in one `POST ?digest=` where the registry takes that (asked
    /// once per client, with the empty blob), else in a `POST` then a `PUT`.
    pub fn put_blob(&self, id: &ObjectId, data: &[u8]) -> Result<(), RemoteError> {
        self.put_payload(id, Payload::Bytes(data))
    }

    /// Uploads a blob as [`Client::put_blob`] does, its bytes from memory
    /// or streamed from a file.
    pub fn put_payload(&self, id: &ObjectId, data: Payload<'_>) -> Result<(), RemoteError> {
        let from = lock(&self.mount_sources).get(id).cloned();
        if let Some(from) = from {
            match self.mount(id, &from)? {
                Opened::Done => {
                    self.counters.mounted.fetch_add(1, Ordering::Relaxed);
                    self.note_present(id);
                    return Ok(());
                }
                Opened::Session(location) => {
                    self.put_to(&location, id, data)?;
                    self.note_present(id);
                    return Ok(());
                }
                Opened::Refused => {}
            }
        }
        self.upload(id, data)?;
        self.note_present(id);
        Ok(())
    }

    /// Uploads a blob in one request or two, as the registry allows.
    fn upload(&self, id: &ObjectId, data: Payload<'_>) -> Result<(), RemoteError> {
        let known = *lock(&self.monolithic);
        match known {
            Some(true) => match self.post_monolithic(id, data)? {
                Opened::Done => Ok(()),
                Opened::Session(location) => self.put_to(&location, id, data),
                Opened::Refused => {
                    *lock(&self.monolithic) = Some(false);
                    self.post_then_put(id, data)
                }
            },
            Some(false) => self.post_then_put(id, data),
            None => {
                // One thread asks, with the empty blob; the others wait for
                // its answer. A registry that does not take it opens an
                // upload session instead, which this blob then fills.
                let mut state = lock(&self.monolithic);
                if state.is_none() {
                    let empty = empty_blob();
                    match self.post_monolithic(&empty, Payload::Bytes(&[]))? {
                        Opened::Done => {
                            *state = Some(true);
                            if *id == empty {
                                return Ok(());
                            }
                        }
                        Opened::Session(location) => {
                            *state = Some(false);
                            drop(state);
                            return self.put_to(&location, id, data);
                        }
                        Opened::Refused => *state = Some(false),
                    }
                }
                drop(state);
                self.upload(id, data)
            }
        }
    }

    /// `POST ?digest=` with the whole blob: `201` is done, `202` opened a
    /// session instead (the registry ignored the body, as the distribution
    /// spec allows), and a `400`, `404`, `405`, `415` or `501` refuses it.
    fn post_monolithic(&self, id: &ObjectId, data: Payload<'_>) -> Result<Opened, RemoteError> {
        let url = self.url(&format!("blobs/uploads/?digest=sha256%3A{id}"));
        let resp = self.send_scoped(
            Method::POST,
            &url,
            &[("Content-Type", "application/octet-stream")],
            Some(data),
            None,
        )?;
        match resp.status().as_u16() {
            201 => Ok(Opened::Done),
            202 => Ok(Opened::Session(self.location(&url, &resp)?)),
            400 | 404 | 405 | 415 | 501 => Ok(Opened::Refused),
            _ => Err(self.unexpected(&Method::POST, &url, resp)),
        }
    }

    /// `POST ?mount=&from=`: `201` mounted the blob, `202` opened an upload
    /// session instead; a registry that refuses mounts outright is refused.
    fn mount(&self, id: &ObjectId, from: &str) -> Result<Opened, RemoteError> {
        let url = self.url(&format!(
            "blobs/uploads/?mount=sha256%3A{id}&from={}",
            auth::query_escape(from)
        ));
        let resp = self.send_scoped(
            Method::POST,
            &url,
            &[],
            Some(Payload::Bytes(&[])),
            Some(from),
        )?;
        match resp.status().as_u16() {
            201 => Ok(Opened::Done),
            202 => Ok(Opened::Session(self.location(&url, &resp)?)),
            400 | 404 | 405 | 501 => Ok(Opened::Refused),
            _ => Err(self.unexpected(&Method::POST, &url, resp)),
        }
    }

    /// Opens an upload session (`POST`) and fills it (`PUT`).
    fn post_then_put(&self, id: &ObjectId, data: Payload<'_>) -> Result<(), RemoteError> {
        let url = self.url("blobs/uploads/");
        let resp = self.send(Method::POST, &url, &[], Some(&[]))?;
        if resp.status() != 202 {
            return Err(self.unexpected(&Method::POST, &url, resp));
        }
        let location = self.location(&url, &resp)?;
        self.put_to(&location, id, data)
    }

    /// The absolute upload URL an answer's `Location` names.
    fn location(&self, url: &str, resp: &Response<Body>) -> Result<String, RemoteError> {
        let location = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| AnswerError::NoLocation {
                url: url.to_string(),
            })?;
        Ok(
            if location.starts_with("http://") || location.starts_with("https://") {
                location.to_string()
            } else if location.starts_with('/') {
                format!("{}{location}", self.base)
            } else {
                format!("{}{location}", self.url("blobs/uploads/"))
            },
        )
    }

    /// Closes an upload session with the whole blob: `PUT ?digest=`.
    fn put_to(&self, location: &str, id: &ObjectId, data: Payload<'_>) -> Result<(), RemoteError> {
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{sep}digest=sha256%3A{id}");
        let resp = self.send_scoped(
            Method::PUT,
            &put,
            &[("Content-Type", "application/octet-stream")],
            Some(data),
            None,
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
        let resp = self.send(Method::GET, &url, &[], None)?;
        if resp.status() != 200 {
            return Err(self.unexpected(&Method::GET, &url, resp));
        }
        self.read_body(&Method::GET, &url, resp, size.saturating_add(1), true)
    }

    /// Opens a blob for streaming. A failed read is an [`std::io::Error`]
    /// whose inner error is the [`RemoteError`] it stands for. Only the
    /// request is retried; a body that breaks off is an error.
    pub fn open_blob(&self, id: &ObjectId) -> Result<BlobReader<'_>, RemoteError> {
        let url = self.url(&format!("blobs/sha256:{id}"));
        let resp = self.send(Method::GET, &url, &[], None)?;
        if resp.status() != 200 {
            return Err(self.unexpected(&Method::GET, &url, resp));
        }
        Ok(BlobReader(self.body(&Method::GET, &url, resp, true)))
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
        let resp = self.send(Method::GET, &url, &[("Accept", &accept)], None)?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Ok(None),
            _ => return Err(self.unexpected(&Method::GET, &url, resp)),
        }
        let data = self.read_body(&Method::GET, &url, resp, max as u64 + 1, true)?;
        if data.len() > max {
            return Err(AnswerError::ManifestTooLarge { url, max }.into());
        }
        Ok(Some(data))
    }

    /// Whether the repository holds a manifest or index under a tag or digest.
    pub fn has_manifest(&self, reference: &str) -> Result<bool, RemoteError> {
        let url = self.url(&format!("manifests/{reference}"));
        let accept = format!(
            "{}, {}",
            super::mapping::MANIFEST_MEDIA_TYPE,
            super::mapping::INDEX_MEDIA_TYPE
        );
        let resp = self.send(Method::HEAD, &url, &[("Accept", &accept)], None)?;
        match resp.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(self.unexpected(&Method::HEAD, &url, resp)),
        }
    }

    /// Lists the referrers of the manifest `digest` through the referrers
    /// API: the index of every page (at most `max` bytes each, at most
    /// [`MAX_REFERRER_PAGES`] pages, following `Link: <…>; rel="next"`), or
    /// `None` when the registry has no referrers API (it answers `404`, as
    /// a registry with the API never does, or `400`, `405` or `501`).
    pub fn get_referrers(
        &self,
        digest: &ObjectId,
        max: usize,
    ) -> Result<Option<Vec<Vec<u8>>>, RemoteError> {
        let mut url = self.url(&format!("referrers/sha256:{digest}"));
        let accept = super::mapping::INDEX_MEDIA_TYPE;
        let mut pages = Vec::new();
        loop {
            let resp = self.send(Method::GET, &url, &[("Accept", accept)], None)?;
            match resp.status().as_u16() {
                200 => {}
                400 | 404 | 405 | 501 if pages.is_empty() => return Ok(None),
                _ => return Err(self.unexpected(&Method::GET, &url, resp)),
            }
            let next = resp
                .headers()
                .get("link")
                .and_then(|v| v.to_str().ok())
                .and_then(next_link)
                .map(|link| self.absolute(&link));
            let data = self.read_body(&Method::GET, &url, resp, max as u64 + 1, true)?;
            if data.len() > max {
                return Err(AnswerError::ReferrersTooLarge { url, max }.into());
            }
            pages.push(data);
            match next {
                Some(n) if pages.len() < MAX_REFERRER_PAGES => url = n,
                Some(_) => {
                    return Err(AnswerError::TooManyReferrerPages {
                        subject: *digest,
                        max: MAX_REFERRER_PAGES,
                    }
                    .into())
                }
                None => return Ok(Some(pages)),
            }
        }
    }

    /// An absolute URL for a path the registry names (`/v2/…`) or a full URL.
    fn absolute(&self, link: &str) -> String {
        if link.starts_with("http://") || link.starts_with("https://") {
            link.to_string()
        } else {
            format!("{}{link}", self.base)
        }
    }

    /// Uploads a manifest or index under a tag or its digest.
    pub fn put_manifest(
        &self,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<(), RemoteError> {
        self.put_manifest_answer(reference, media_type, bytes)
            .map(|_| ())
    }

    /// Uploads a manifest or index under a tag or its digest, and returns
    /// the `OCI-Subject` header the registry answered with, if any: a
    /// registry with the referrers API names the subject of a manifest that
    /// has one, and so says it registered the referrer itself.
    pub fn put_manifest_answer(
        &self,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<Option<String>, RemoteError> {
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
                return Err(AnswerError::StoredUnder {
                    stored: d.to_string(),
                    ours,
                }
                .into());
            }
        }
        Ok(resp
            .headers()
            .get("oci-subject")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string))
    }
}

/// The most pages of a referrers list a client follows.
pub const MAX_REFERRER_PAGES: usize = 16;

/// The target of a `Link` header's `rel="next"` link, if it has one.
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        params
            .split(';')
            .any(|p| {
                let p = p.trim().replace(' ', "");
                p == "rel=\"next\"" || p == "rel=next"
            })
            .then(|| target.to_string())
    })
}

impl super::OciRemote {
    /// The client this remote speaks through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The registry and repository this remote names.
    pub fn address(&self) -> &super::Address {
        &self.address
    }
}

/// A blob's body as the registry sends it.
pub struct BlobReader<'c>(BodyReader<'c>);

impl Read for BlobReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

/// An answer's body, read under the transfer-rate floor. A failed read is an
/// [`std::io::Error`] whose inner error is the [`RemoteError`] it stands for.
struct BodyReader<'c> {
    client: &'c Client,
    method: Method,
    url: String,
    body: ureq::BodyReader<'static>,
    floor: Floor,
    /// Whether its bytes count as received (error bodies do not).
    counted: bool,
}

impl Read for BodyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.body.read(buf).map_err(|e| {
            std::io::Error::other(self.client.read_failed(&self.method, &self.url, e))
        })?;
        if self.counted {
            self.client.received(n);
        }
        if !self.floor.note(n) {
            return Err(std::io::Error::other(self.client.too_slow(
                &self.method,
                &self.url,
                format!(
                    "fewer than {} bytes a second over {} s",
                    self.client.timeouts.min_speed,
                    self.client.timeouts.idle.as_secs()
                ),
            )));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_to_the_registrys_own_urls_only() {
        let base = "https://r.example:5000";
        assert!(same_origin(
            "https://r.example:5000/v2/a/blobs/uploads/x",
            base
        ));
        assert!(same_origin("https://r.example:5000", base));
        assert!(same_origin("HTTPS://R.Example:5000/v2/a", base));
        assert!(!same_origin("https://r.exa", base));
        for elsewhere in [
            "https://r.example:5001/v2/a",
            "https://r.example:50000/v2/a",
            "https://r.example:5000.evil.example/v2/a",
            "https://r.example:5000@evil.example/v2/a",
            "http://r.example:5000/v2/a",
            "https://evil.example/v2/a?https://r.example:5000/",
        ] {
            assert!(!same_origin(elsewhere, base), "{elsewhere}");
        }
    }

    #[test]
    fn a_registrys_words_are_quoted_on_one_line_without_escapes() {
        let body = b"\x1b]0;TITLE\x07\x1b[2J\x1b[31mcestore: pull ok\n\xff";
        assert_eq!(error_detail(body), "?]0;TITLE??[2J?[31mcestore: pull ok??");
        let json = br#"{"errors":[{"code":"DENIED","message":"line one\nline two \u001b[2J"}]}"#;
        assert_eq!(error_detail(json), "DENIED: line one?line two ?[2J");
    }

    #[test]
    fn the_next_page_of_a_referrers_list_is_its_next_link() {
        assert_eq!(
            next_link(r#"</v2/a/referrers/sha256:x?n=2&last=y>; rel="next""#).as_deref(),
            Some("/v2/a/referrers/sha256:x?n=2&last=y")
        );
        assert_eq!(
            next_link(r#"<https://r/prev>; rel="prev", <https://r/next>; rel=next"#).as_deref(),
            Some("https://r/next")
        );
        assert_eq!(next_link(r#"<https://r/prev>; rel="prev""#), None);
        assert_eq!(next_link("garbage"), None);
    }

    #[test]
    fn a_mount_needs_pull_on_the_other_repository() {
        let c = Client::new(
            "reg.example",
            "a/b",
            false,
            Credentials::None,
            true,
            Timeouts::default(),
        );
        assert_eq!(c.scope(None), "repository:a/b:pull,push");
        assert_eq!(
            c.scope(Some("c/d")),
            "repository:a/b:pull,push repository:c/d:pull"
        );
        let mut sources = HashMap::new();
        sources.insert(ObjectId::of(b"x"), "a/b".to_string());
        sources.insert(ObjectId::of(b"y"), "c/d".to_string());
        c.set_mount_sources(sources);
        let kept = lock(&c.mount_sources).clone();
        assert_eq!(kept.len(), 1, "its own repository is no source");
        assert_eq!(
            kept.get(&ObjectId::of(b"y")).map(String::as_str),
            Some("c/d")
        );
    }
}
