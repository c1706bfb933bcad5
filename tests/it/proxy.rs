//! A small HTTP/1.1 proxy in front of the real registry, standing in for a
//! distant or demanding one: it delays every request, counts requests by
//! method, and can answer the first requests with `429`, ask for a bearer
//! token it hands out itself, or take a blob in one `POST ?digest=` (which
//! the CNCF registry does not) by turning it into a `POST` then a `PUT`
//! upstream, or serve the OCI 1.1 referrers API (which it lacks either) from
//! the manifests with a `subject` put through it. cestore is pointed at the
//! proxy's address as the registry.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does besides forwarding.
#[derive(Clone, Debug, Default)]
pub struct Behaviour {
    /// Waited before every request is answered.
    pub delay: Duration,
    /// How many of the first registry requests get `429` with `Retry-After: 0`.
    pub throttle_first: u64,
    /// Demand a bearer token from the proxy's own `/token` endpoint.
    pub bearer: bool,
    /// Take `POST /v2/<repo>/blobs/uploads/?digest=` with the blob as one
    /// upload, answering `201`.
    pub monolithic: bool,
    /// Serve the referrers API: answer the `PUT` of a manifest with a
    /// `subject` with `OCI-Subject`, and `GET /v2/<repo>/referrers/<digest>`
    /// with an index of the manifests put through the proxy with that subject.
    pub referrers_api: bool,
}

#[derive(Default)]
struct State {
    counts: Mutex<BTreeMap<String, u64>>,
    throttled: AtomicU64,
    tokens: Mutex<Vec<String>>,
    token_scopes: Mutex<Vec<String>>,
    /// Referrers put through the proxy, by their subject's digest.
    referrers: Mutex<BTreeMap<String, Vec<serde_json::Value>>>,
    stop: AtomicBool,
}

/// A running proxy; stops accepting when dropped.
pub struct Proxy {
    /// `127.0.0.1:PORT`.
    pub address: String,
    state: Arc<State>,
}

/// One HTTP message's head and body.
struct Message {
    start: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Message {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A message's start line and headers.
type Head = (String, Vec<(String, String)>);

/// Reads a message head; `None` at a clean end of stream.
fn read_head(r: &mut impl BufRead) -> std::io::Result<Option<Head>> {
    let mut start = String::new();
    if r.read_line(&mut start)? == 0 {
        return Ok(None);
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(Some((start.trim_end().to_string(), headers)))
}

/// Reads a body framed by `Content-Length` or chunked; `to_eof` when neither.
fn read_body(
    r: &mut impl BufRead,
    headers: &[(String, String)],
    to_eof: bool,
) -> std::io::Result<Vec<u8>> {
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.as_str())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut line = String::new();
            r.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
                .map_err(std::io::Error::other)?;
            if size == 0 {
                // Trailers, up to the empty line.
                loop {
                    let mut t = String::new();
                    r.read_line(&mut t)?;
                    if t.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let mut chunk = vec![0; size];
            r.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk);
            let mut crlf = [0; 2];
            r.read_exact(&mut crlf)?;
        }
    } else if let Some(n) = get("content-length") {
        let n: usize = n.parse().map_err(std::io::Error::other)?;
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else if to_eof {
        r.read_to_end(&mut body)?;
    }
    Ok(body)
}

fn write_message(w: &mut impl Write, m: &Message, head_only: bool) -> std::io::Result<()> {
    let mut out = format!("{}\r\n", m.start);
    let mut length = None;
    for (k, v) in &m.headers {
        let lower = k.to_ascii_lowercase();
        if lower == "content-length" {
            length = Some(v.clone());
            continue;
        }
        if lower == "transfer-encoding" || lower == "connection" || lower == "keep-alive" {
            continue;
        }
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    // A HEAD answer keeps the length upstream gave; anything else is framed
    // by the body it carries.
    let length = if head_only {
        length.unwrap_or_else(|| "0".into())
    } else {
        m.body.len().to_string()
    };
    out.push_str(&format!("Content-Length: {length}\r\n\r\n"));
    w.write_all(out.as_bytes())?;
    if !head_only {
        w.write_all(&m.body)?;
    }
    w.flush()
}

fn reply(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Message {
    Message {
        start: format!("HTTP/1.1 {status}"),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: body.to_vec(),
    }
}

/// One kept-alive connection to the registry, opened again when it closes.
struct Upstream {
    address: String,
    conn: Option<BufReader<TcpStream>>,
}

impl Upstream {
    fn forward(&mut self, req: &Message) -> std::io::Result<Message> {
        for attempt in 0..2 {
            if self.conn.is_none() {
                self.conn = Some(BufReader::new(TcpStream::connect(&self.address)?));
            }
            match self.try_forward(req) {
                Ok(m) => return Ok(m),
                Err(e) if attempt == 0 => {
                    let _ = e;
                    self.conn = None;
                }
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("unreachable"))
    }

    fn try_forward(&mut self, req: &Message) -> std::io::Result<Message> {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no connection"))?;
        let head_only = req.start.starts_with("HEAD ");
        let mut out = Message {
            start: req.start.clone(),
            headers: req
                .headers
                .iter()
                .filter(|(k, _)| !k.eq_ignore_ascii_case("authorization"))
                .cloned()
                .collect(),
            body: req.body.clone(),
        };
        if !req.body.is_empty() || req.start.starts_with("POST ") || req.start.starts_with("PUT ") {
            out.headers
                .push(("Content-Length".into(), req.body.len().to_string()));
        }
        write_message(conn.get_mut(), &out, false)?;
        let (start, headers) = read_head(conn)?
            .ok_or_else(|| std::io::Error::other("the registry closed the connection"))?;
        let status: u16 = start
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let no_body = head_only || status == 204 || status == 304 || status < 200;
        let closes = headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("connection") && v.eq_ignore_ascii_case("close"));
        let body = if no_body {
            Vec::new()
        } else {
            read_body(conn, &headers, true)?
        };
        if closes {
            self.conn = None;
        }
        Ok(Message {
            start,
            headers,
            body,
        })
    }
}

impl Proxy {
    /// Starts a proxy in front of `upstream` (`HOST:PORT`).
    pub fn start(upstream: &str, behaviour: Behaviour) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address").to_string();
        let state = Arc::new(State::default());
        let upstream = upstream.to_string();
        let accept_state = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accept_state.stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let state = Arc::clone(&accept_state);
                let upstream = upstream.clone();
                let behaviour = behaviour.clone();
                std::thread::spawn(move || serve(stream, &upstream, &behaviour, &state));
            }
        });
        Proxy { address, state }
    }

    /// Requests seen, by method (`HEAD`, `GET`, `POST`, `PUT`, …), and
    /// `TOKEN` for the proxy's token endpoint; answered ones included.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.state.counts.lock().expect("counts").clone()
    }

    /// Every request seen.
    pub fn total(&self) -> u64 {
        self.counts().values().sum()
    }

    /// Requests answered `429`.
    pub fn throttled(&self) -> u64 {
        self.state.throttled.load(Ordering::Relaxed)
    }

    /// The scopes each token request asked for, in order.
    pub fn token_scopes(&self) -> Vec<String> {
        self.state.token_scopes.lock().expect("scopes").clone()
    }

    /// Forgets the counts so far.
    pub fn reset(&self) {
        self.state.counts.lock().expect("counts").clear();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(&self.address);
    }
}

fn serve(stream: TcpStream, upstream: &str, behaviour: &Behaviour, state: &State) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut up = Upstream {
        address: upstream.to_string(),
        conn: None,
    };
    while let Ok(Some((start, headers))) = read_head(&mut reader) {
        let Ok(body) = read_body(&mut reader, &headers, false) else {
            return;
        };
        let req = Message {
            start,
            headers,
            body,
        };
        let head_only = req.start.starts_with("HEAD ");
        let answer = answer(&req, &mut up, behaviour, state);
        let Ok(answer) = answer else { return };
        if write_message(&mut writer, &answer, head_only).is_err() {
            return;
        }
        if state.stop.load(Ordering::Relaxed) {
            return;
        }
    }
}

fn answer(
    req: &Message,
    up: &mut Upstream,
    behaviour: &Behaviour,
    state: &State,
) -> std::io::Result<Message> {
    let mut parts = req.start.split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    std::thread::sleep(behaviour.delay);
    let is_token = path.starts_with("/token");
    *state
        .counts
        .lock()
        .expect("counts")
        .entry(if is_token {
            "TOKEN".into()
        } else {
            method.clone()
        })
        .or_default() += 1;
    if is_token {
        let scopes: Vec<String> = path
            .split_once('?')
            .map(|(_, q)| q)
            .unwrap_or("")
            .split('&')
            .filter_map(|kv| kv.strip_prefix("scope="))
            .map(|s| {
                s.replace("%3A", ":")
                    .replace("%2F", "/")
                    .replace("%2C", ",")
            })
            .collect();
        state
            .token_scopes
            .lock()
            .expect("scopes")
            .push(scopes.join(" "));
        let mut tokens = state.tokens.lock().expect("tokens");
        let token = format!("tok-{}", tokens.len());
        tokens.push(token.clone());
        return Ok(reply(
            "200 OK",
            &[("Content-Type", "application/json")],
            format!(r#"{{"token":"{token}"}}"#).as_bytes(),
        ));
    }
    if state.throttled.load(Ordering::Relaxed) < behaviour.throttle_first
        && state.throttled.fetch_add(1, Ordering::Relaxed) < behaviour.throttle_first
    {
        return Ok(reply(
            "429 Too Many Requests",
            &[("Retry-After", "0"), ("Content-Type", "application/json")],
            br#"{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}"#,
        ));
    }
    if behaviour.bearer && path.starts_with("/v2/") {
        let sent = req.header("authorization").unwrap_or("");
        let ok = sent
            .strip_prefix("Bearer ")
            .is_some_and(|t| state.tokens.lock().expect("tokens").iter().any(|x| x == t));
        if !ok {
            let host = req.header("host").unwrap_or("");
            let challenge = format!(
                r#"Bearer realm="http://{host}/token",service="proxy",scope="repository:any:pull""#
            );
            return Ok(reply(
                "401 Unauthorized",
                &[
                    ("WWW-Authenticate", &challenge),
                    ("Content-Type", "application/json"),
                ],
                br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
            ));
        }
    }
    if behaviour.monolithic && method == "POST" && path.contains("/blobs/uploads/?digest=") {
        let digest = path.split("digest=").nth(1).unwrap_or("").to_string();
        let (base, _) = path.split_once('?').unwrap_or((&path, ""));
        let open = Message {
            start: format!("POST {base} HTTP/1.1"),
            headers: req.headers.clone(),
            body: Vec::new(),
        };
        let opened = up.forward(&open)?;
        let location = opened.header("location").unwrap_or("").to_string();
        let location = match location.split_once("://") {
            Some((_, rest)) => rest
                .find('/')
                .map(|i| rest[i..].to_string())
                .unwrap_or_default(),
            None => location,
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = Message {
            start: format!("PUT {location}{sep}digest={digest} HTTP/1.1"),
            headers: req.headers.clone(),
            body: req.body.clone(),
        };
        return up.forward(&put);
    }
    if behaviour.referrers_api {
        if let Some(answer) = referrers_api(req, &method, &path, up, state)? {
            return Ok(answer);
        }
    }
    up.forward(req)
}

/// The referrers API, kept by the proxy: `None` for a request it does not
/// concern.
fn referrers_api(
    req: &Message,
    method: &str,
    path: &str,
    up: &mut Upstream,
    state: &State,
) -> std::io::Result<Option<Message>> {
    if method == "GET" && path.contains("/referrers/") {
        let digest = path
            .rsplit('/')
            .next()
            .unwrap_or("")
            .split('?')
            .next()
            .unwrap_or("");
        let listed = state
            .referrers
            .lock()
            .expect("referrers")
            .get(digest)
            .cloned()
            .unwrap_or_default();
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": listed,
        });
        return Ok(Some(reply(
            "200 OK",
            &[("Content-Type", "application/vnd.oci.image.index.v1+json")],
            &serde_json::to_vec(&index).expect("serialise"),
        )));
    }
    if method != "PUT" || !path.contains("/manifests/") {
        return Ok(None);
    }
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&req.body) else {
        return Ok(None);
    };
    let Some(subject) = doc["subject"]["digest"].as_str() else {
        return Ok(None);
    };
    let mut answer = up.forward(req)?;
    if answer.start.split(' ').nth(1) == Some("201") {
        let mut descriptor = serde_json::json!({
            "mediaType": doc["mediaType"],
            "digest": format!("sha256:{}", crate::util::sha_hex(&req.body)),
            "size": req.body.len(),
        });
        for key in ["artifactType", "annotations"] {
            if !doc[key].is_null() {
                descriptor[key] = doc[key].clone();
            }
        }
        let mut referrers = state.referrers.lock().expect("referrers");
        let listed = referrers.entry(subject.to_string()).or_default();
        if !listed.contains(&descriptor) {
            listed.push(descriptor);
        }
        answer
            .headers
            .push(("OCI-Subject".to_string(), subject.to_string()));
    }
    Ok(Some(answer))
}

/// What a [`Scripted`] registry does with every request.
#[derive(Clone, Debug)]
pub enum Script {
    /// Wants Basic credentials (`401` with a `Basic` challenge without them,
    /// or with others), and answers every request that carries these `404`:
    /// it holds nothing.
    Locked {
        /// The one user.
        user: String,
        /// Its password.
        password: String,
    },
    /// Sends its answer's head one byte at a time, this far apart.
    DripHead(Duration),
    /// Sends its answer's head at once, announcing a 1 MB body, then sends
    /// the body one byte at a time, this far apart.
    DripBody(Duration),
    /// Holds no blob (`HEAD` is `404`), opens an upload session for every
    /// `POST` (`202`), and reads every other request's body (at once up to
    /// 64 KiB, past that 1 KiB at a time, this far apart) before answering
    /// `201`.
    SlowReader(Duration),
}

/// A registry on 127.0.0.1 that answers as its [`Script`] says, standing in
/// for a locked, slow or lying one; stops accepting when dropped.
pub struct Scripted {
    /// `127.0.0.1:PORT`.
    pub address: String,
    authorizations: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Scripted {
    /// Starts the registry.
    pub fn start(script: Script) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scripted registry");
        let address = listener.local_addr().expect("address").to_string();
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopping) = (Arc::clone(&authorizations), Arc::clone(&stop));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (script, seen) = (script.clone(), Arc::clone(&seen));
                std::thread::spawn(move || play(stream, &script, &seen));
            }
        });
        Scripted {
            address,
            authorizations,
            stop,
        }
    }

    /// The `Authorization` header of every request, `""` where there was none.
    pub fn authorizations(&self) -> Vec<String> {
        self.authorizations.lock().expect("authorizations").clone()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(&self.address);
    }
}

/// Answers the requests of one connection as `script` says; returns when
/// the client goes away.
fn play(stream: TcpStream, script: &Script, seen: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Ok(Some((start, headers))) = read_head(&mut reader) {
        if let Script::SlowReader(every) = script {
            let length: u64 = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let answer = if start.starts_with("HEAD ") {
                reply("404 Not Found", &[], b"")
            } else if start.starts_with("POST ") {
                let _ = read_body(&mut reader, &headers, false);
                reply(
                    "202 Accepted",
                    &[("Location", "/v2/cestore/slow/blobs/uploads/session")],
                    b"",
                )
            } else {
                let mut left = length;
                let mut chunk = [0u8; 1024];
                while left > 0 {
                    if length > 64 * 1024 {
                        std::thread::sleep(*every);
                    }
                    let n = left.min(chunk.len() as u64) as usize;
                    if reader.read_exact(&mut chunk[..n]).is_err() {
                        return;
                    }
                    left -= n as u64;
                }
                reply("201 Created", &[], b"")
            };
            if write_message(&mut writer, &answer, start.starts_with("HEAD ")).is_err() {
                return;
            }
            continue;
        }
        if read_body(&mut reader, &headers, false).is_err() {
            return;
        }
        let authorization = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        seen.lock()
            .expect("authorizations")
            .push(authorization.clone());
        let head_only = start.starts_with("HEAD ");
        let drip = |w: &mut TcpStream, bytes: &[u8], every: Duration| {
            for b in bytes {
                std::thread::sleep(every);
                if w.write_all(std::slice::from_ref(b)).is_err() {
                    return false;
                }
            }
            true
        };
        match script {
            Script::Locked { user, password } => {
                use base64::Engine as _;
                let wanted = format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                );
                let answer = if authorization == wanted {
                    reply(
                        "404 Not Found",
                        &[("Content-Type", "application/json")],
                        br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#,
                    )
                } else {
                    reply(
                        "401 Unauthorized",
                        &[
                            ("WWW-Authenticate", r#"Basic realm="scripted""#),
                            ("Content-Type", "application/json"),
                        ],
                        br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
                    )
                };
                if write_message(&mut writer, &answer, head_only).is_err() {
                    return;
                }
            }
            Script::DripHead(every) => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: 2\r\n\r\n{}";
                drip(&mut writer, head.as_bytes(), *every);
                return;
            }
            Script::SlowReader(_) => return,
            Script::DripBody(every) => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: 1000000\r\n\r\n";
                if writer.write_all(head.as_bytes()).is_err() {
                    return;
                }
                drip(&mut writer, &vec![b' '; 1_000_000], *every);
                return;
            }
        }
    }
}
