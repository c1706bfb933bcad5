//! Secrets by content: files a release keeps that look like a private key
//! or an access token.
//!
//! The reference leaves entries out by their names only
//! ([`crate::profile::ce::rules::left_out_reason`]): `.env`, `id_rsa` at any depth, a
//! name holding `secret` or `token`… A key or a token under another name
//! (`skills/x/deploy.pem.txt`, a token pasted into a script) is kept, and so
//! it is by cestore, whose digest must be the reference's. But every byte
//! of every file kept passes through cestore to be hashed; [`scan`] looks
//! at those bytes as they pass, only reading them, for the shapes of a
//! [`SecretKind`]. `ingest` and `stage` report what it finds (a warning,
//! and with `--refuse-secrets` a refusal); what they store and digest is
//! unchanged.
//!
//! A scan is one pass of one searcher for every anchor at once (an
//! Aho-Corasick automaton with SIMD prefilters: `PRIVATE KEY`, `AKIA`,
//! `ghp_`, `xoxb-`…) over a file the walk holds in memory anyway (at most
//! the bound on a file's size), and checks a few bytes around each hit; a
//! content that several paths share is scanned once. It reads several times
//! faster than SHA-256 hashes, on the walk's thread, while another hashes.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};

/// What a file's content looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretKind {
    /// A PEM private key (`-----BEGIN … PRIVATE KEY-----`: RSA, EC, DSA,
    /// OpenSSH, PKCS #8, encrypted or not) or a PGP private key block,
    /// with a body of base64 after its header.
    PrivateKey,
    /// A GitHub token: `ghp_`, `gho_`, `ghu_`, `ghs_` or `ghr_` and 36
    /// letters and digits, or a fine-grained `github_pat_` one.
    GithubToken,
    /// A GitLab personal access token: `glpat-` and 20 characters.
    GitlabToken,
    /// A Slack token: `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-` or `xoxe-`.
    SlackToken,
    /// An AWS access key id: `AKIA` or `ASIA` and 16 capitals and digits.
    AwsAccessKeyId,
    /// A Google API key: `AIza` and 35 characters.
    GoogleApiKey,
    /// A Stripe live secret or restricted key: `sk_live_` or `rk_live_`.
    StripeKey,
    /// An npm access token: `npm_` and 36 letters and digits.
    NpmToken,
    /// A PyPI API token: `pypi-AgEIcHlwaS5vcmc…`.
    PypiToken,
    /// An Anthropic API key: `sk-ant-`.
    AnthropicApiKey,
    /// An OpenAI project API key: `sk-proj-`.
    OpenaiApiKey,
}

impl SecretKind {
    /// What it is, in words: "a PEM private key", "a GitHub token"…
    pub fn describe(self) -> &'static str {
        use SecretKind::*;
        match self {
            PrivateKey => "a private key",
            GithubToken => "a GitHub token",
            GitlabToken => "a GitLab token",
            SlackToken => "a Slack token",
            AwsAccessKeyId => "an AWS access key id",
            GoogleApiKey => "a Google API key",
            StripeKey => "a Stripe secret key",
            NpmToken => "an npm token",
            PypiToken => "a PyPI token",
            AnthropicApiKey => "an Anthropic API key",
            OpenaiApiKey => "an OpenAI API key",
        }
    }
}

/// The first secret a content holds: what it looks like, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// What it looks like.
    pub kind: SecretKind,
    /// The line it starts on, from 1.
    pub line: u64,
}

/// What follows an anchor for it to be a secret of its kind.
#[derive(Clone, Copy)]
enum Shape {
    /// `PRIVATE KEY` of a PEM header ([`pem_key`]).
    Pem,
    /// An AWS access key id: 16 capitals and digits, then no more.
    AwsKeyId,
    /// A token: its prefix (the anchor) a word of its own, then at least
    /// this many bytes that `body` accepts.
    Token(usize, fn(u8) -> bool),
}

/// Letters and digits.
fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// Letters, digits, `_` and `-`.
fn urlsafe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Letters, digits and `-`.
fn dashed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// Every anchor, with the kind and shape of what it starts.
const ANCHORS: &[(&str, SecretKind, Shape)] = {
    use SecretKind::*;
    use Shape::*;
    &[
        ("PRIVATE KEY", PrivateKey, Pem),
        ("AKIA", AwsAccessKeyId, AwsKeyId),
        ("ASIA", AwsAccessKeyId, AwsKeyId),
        ("AIza", GoogleApiKey, Token(35, urlsafe)),
        ("ghp_", GithubToken, Token(36, alnum)),
        ("gho_", GithubToken, Token(36, alnum)),
        ("ghu_", GithubToken, Token(36, alnum)),
        ("ghs_", GithubToken, Token(36, alnum)),
        ("ghr_", GithubToken, Token(36, alnum)),
        ("github_pat_", GithubToken, Token(82, wordish)),
        ("glpat-", GitlabToken, Token(20, urlsafe)),
        ("xoxb-", SlackToken, Token(10, dashed)),
        ("xoxp-", SlackToken, Token(10, dashed)),
        ("xoxa-", SlackToken, Token(10, dashed)),
        ("xoxr-", SlackToken, Token(10, dashed)),
        ("xoxs-", SlackToken, Token(10, dashed)),
        ("xoxe-", SlackToken, Token(10, dashed)),
        ("sk_live_", StripeKey, Token(24, alnum)),
        ("rk_live_", StripeKey, Token(24, alnum)),
        ("npm_", NpmToken, Token(36, alnum)),
        ("pypi-AgEIcHlwaS5vcmc", PypiToken, Token(50, urlsafe)),
        ("sk-ant-", AnthropicApiKey, Token(32, urlsafe)),
        ("sk-proj-", OpenaiApiKey, Token(32, urlsafe)),
    ]
};

/// The searcher for every anchor at once, built on first use.
fn anchors() -> Option<&'static AhoCorasick> {
    static SEARCHER: OnceLock<Option<AhoCorasick>> = OnceLock::new();
    SEARCHER
        .get_or_init(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(ANCHORS.iter().map(|(anchor, _, _)| anchor))
                .ok()
        })
        .as_ref()
}

/// The first secret `data` holds, by its position, if any.
pub fn scan(data: &[u8]) -> Option<Found> {
    let (at, kind) = anchors()?.find_iter(data).find_map(|m| {
        let (anchor, kind, shape) = ANCHORS[m.pattern().as_usize()];
        let at = m.start();
        let start = match shape {
            Shape::Pem => pem_key(data, at)?,
            Shape::AwsKeyId => (alone_before(data, at)
                && run_of(data, at + 4, 16, |b| {
                    b.is_ascii_uppercase() || b.is_ascii_digit()
                })
                && data.get(at + 20).is_none_or(|&b| !alnum(b)))
            .then_some(at)?,
            Shape::Token(len, body) => (alone_before(data, at)
                && run_of(data, at + anchor.len(), len, body))
            .then_some(at)?,
        };
        Some((start, kind))
    })?;
    Some(Found {
        kind,
        line: 1 + memchr::memchr_iter(b'\n', &data[..at]).count() as u64,
    })
}

/// Whether a byte may belong to a word of letters, digits and `_`.
fn wordish(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether what starts at `at` is not the tail of a longer word.
fn alone_before(data: &[u8], at: usize) -> bool {
    at == 0 || !(wordish(data[at - 1]) || data[at - 1] == b'-')
}

/// Whether `data` holds at least `n` bytes from `at` on, each accepted by `ok`.
fn run_of(data: &[u8], at: usize, n: usize, ok: impl Fn(u8) -> bool) -> bool {
    data.get(at..at + n)
        .is_some_and(|s| s.iter().all(|&b| ok(b)))
}

/// Where the PEM private key header around `PRIVATE KEY` at `at` starts,
/// when it is one: `-----BEGIN ` and capitals before, `-----` (or
/// ` BLOCK-----`, PGP's) after, and within 512 bytes of its end a run of 40
/// base64 characters, the key's body, so that a header quoted in prose is
/// not taken for a key.
fn pem_key(data: &[u8], at: usize) -> Option<usize> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    let window = &data[at.saturating_sub(BEGIN.len() + 24)..at];
    let begin = memchr::memmem::rfind(window, BEGIN)?;
    let between = &window[begin + BEGIN.len()..];
    if !between
        .iter()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ')
    {
        return None;
    }
    let after = &data[at + b"PRIVATE KEY".len()..];
    let header_end = if after.starts_with(b"-----") {
        5
    } else if after.starts_with(b" BLOCK-----") {
        11
    } else {
        return None;
    };
    let body = &after[header_end..after.len().min(header_end + 512)];
    let base64 = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    let longest = body
        .split(|b| !base64(b))
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0);
    (longest >= 40).then_some(at - window.len() + begin)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PEM body line: 64 base64 characters.
    const BODY: &str = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun";

    /// A PEM boundary line, made here so that no key's header stands
    /// whole in this file for a scanner of sources to take for a key.
    fn line(which: &str, label: &str) -> String {
        format!("-----{which} {label}-----")
    }

    fn kind_of(text: &str) -> Option<(SecretKind, u64)> {
        scan(text.as_bytes()).map(|f| (f.kind, f.line))
    }

    #[test]
    fn private_keys_are_found_by_header_and_body() {
        for label in ["RSA", "", "EC", "OPENSSH", "ENCRYPTED", "DSA"] {
            let label = format!("{label} PRIVATE KEY").trim().to_string();
            let pem = format!(
                "x\n{}\n{BODY}\n{}\n",
                line("BEGIN", &label),
                line("END", &label)
            );
            assert_eq!(kind_of(&pem), Some((SecretKind::PrivateKey, 2)), "{label}");
        }
        let pgp = format!("{}\n\n{BODY}\n", line("BEGIN", "PGP PRIVATE KEY BLOCK"));
        assert_eq!(kind_of(&pgp), Some((SecretKind::PrivateKey, 1)));
        let legacy = format!(
            "{}\nProc-Type: 4,ENCRYPTED\n\
             DEK-Info: AES-128-CBC,5E8A1C2B9E0F4D3A7B6C5D4E3F2A1B0C\n\n{BODY}\n",
            line("BEGIN", "RSA PRIVATE KEY")
        );
        assert_eq!(kind_of(&legacy), Some((SecretKind::PrivateKey, 1)));
        // Inside a JSON string, with escaped newlines.
        let json = format!(
            "{{\"key\": \"{}\\n{BODY}\\n\"}}",
            line("BEGIN", "PRIVATE KEY")
        );
        assert_eq!(kind_of(&json), Some((SecretKind::PrivateKey, 1)));
        // A header quoted in prose, with no body, or a public key, is none.
        let rsa = "RSA PRIVATE KEY";
        for text in [
            format!("a key starts with `{}` and ends …", line("BEGIN", rsa)),
            format!("{}\nMIIE...\n{}", line("BEGIN", rsa), line("END", rsa)),
            format!("{}\n{BODY}\n", line("BEGIN", "PUBLIC KEY")),
            format!("{}\n{BODY}\n", line("BEGIN", "rsa PRIVATE KEY")),
            "PRIVATE KEY".to_string(),
            String::new(),
        ] {
            assert_eq!(kind_of(&text), None, "{text}");
        }
    }

    #[test]
    fn tokens_are_found_by_prefix_and_shape() {
        let n = |c: char, len: usize| c.to_string().repeat(len);
        let cases = [
            (
                format!("token = ghp_{}", n('a', 36)),
                SecretKind::GithubToken,
            ),
            (format!("gho_{}", n('Z', 36)), SecretKind::GithubToken),
            (
                format!("github_pat_{}", n('9', 82)),
                SecretKind::GithubToken,
            ),
            (format!("glpat-{}", n('x', 20)), SecretKind::GitlabToken),
            (
                format!("xoxb-{}-{}", n('1', 12), n('f', 6)),
                SecretKind::SlackToken,
            ),
            (
                format!("key AKIA{}.", n('7', 16)),
                SecretKind::AwsAccessKeyId,
            ),
            (format!("ASIA{}", n('Q', 16)), SecretKind::AwsAccessKeyId),
            (format!("AIza{}", n('k', 35)), SecretKind::GoogleApiKey),
            (format!("sk_live_{}", n('4', 24)), SecretKind::StripeKey),
            (format!("npm_{}", n('b', 36)), SecretKind::NpmToken),
            (
                format!("pypi-AgEIcHlwaS5vcmc{}", n('A', 60)),
                SecretKind::PypiToken,
            ),
            (
                format!("sk-ant-api03-{}", n('q', 40)),
                SecretKind::AnthropicApiKey,
            ),
            (format!("sk-proj-{}", n('r', 40)), SecretKind::OpenaiApiKey),
        ];
        for (text, kind) in &cases {
            assert_eq!(kind_of(text), Some((*kind, 1)), "{text}");
        }
        // Too short, inside a longer word, or a prefix alone: none.
        for text in [
            format!("ghp_{}", n('a', 35)),
            format!("xghp_{}", n('a', 36)),
            format!("AKIA{}", n('Q', 17)),
            format!("AKIA{}", n('q', 16)),
            "ghp_ and github_pat_ and xoxb- and AKIA and sk-ant-".to_string(),
            format!("pypi-{}", n('A', 80)),
        ] {
            assert_eq!(kind_of(&text), None, "{text}");
        }
    }

    #[test]
    fn the_first_secret_by_position_is_the_one_reported() {
        let text = format!(
            "one\ntwo AKIA{}\nthree ghp_{}\n{}\n{BODY}\n",
            "A".repeat(16),
            "a".repeat(36),
            line("BEGIN", "PRIVATE KEY")
        );
        assert_eq!(kind_of(&text), Some((SecretKind::AwsAccessKeyId, 2)));
        let text = format!("x\ny\nghp_{} AKIA{}", "a".repeat(36), "A".repeat(16));
        assert_eq!(kind_of(&text), Some((SecretKind::GithubToken, 3)));
    }
}
