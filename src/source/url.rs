//! Repository URLs as git reads them: which argument names a remote
//! repository and which a local path, and a URL as cestore keeps and shows
//! it, with no user, password or token in it.
//!
//! Git's own rule decides what is a URL ([`is_remote`]): `HELPER::ADDRESS`
//! (a remote helper, `transport.c`), `SCHEME://…` (`is_url`, `url.c`), or a
//! `:` with no `/` before it, the scp-like `[user@]host:path`
//! (`url_is_local_not_ssh`, `connect.c`). Anything else is a local path.
//!
//! [`redact_url`] drops the whole user part (user and password alike: a user
//! name may itself be a token, `ghp_…@github.com:o/r`), a query and a
//! fragment, in every form git accepts, whatever the case of the scheme and
//! however many slashes follow it (curl reads `https:///user:pass@host` as
//! `https://user:pass@host`, and authenticates with it).

/// Whether `c` may be the first (`first`) or a later character of a URL
/// scheme: a letter, then letters, digits, `+`, `-` and `.` (git's
/// `is_urlschemechar`).
fn is_scheme_char(first: bool, c: u8) -> bool {
    c.is_ascii_alphabetic() || (!first && (c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.')))
}

/// The length of the scheme `s` opens with; 0 for none.
fn scheme_len(s: &str) -> usize {
    s.bytes()
        .enumerate()
        .take_while(|&(i, c)| is_scheme_char(i == 0, c))
        .count()
}

/// `HELPER::ADDRESS`, a remote helper and the address it is given.
fn helper(s: &str) -> Option<(&str, &str)> {
    let n = scheme_len(s);
    let address = s[n..].strip_prefix("::")?;
    (n > 0).then_some((&s[..n], address))
}

/// Whether git reads `s` as a local path, not as an scp-like `host:path`:
/// it has no `:`, or a `/` before the first one (`url_is_local_not_ssh`).
fn is_local(s: &str) -> bool {
    match s.find(':') {
        None => true,
        Some(colon) => s[..colon].contains('/'),
    }
}

/// Whether git takes `s` for a remote repository's URL rather than a local
/// path: `HELPER::ADDRESS`, `SCHEME://…` (`file://` included), or the
/// scp-like `[user@]host:path`.
pub fn is_remote(s: &str) -> bool {
    let n = scheme_len(s);
    helper(s).is_some() || (n > 0 && s[n..].starts_with("://")) || !is_local(s)
}

/// Whether `s` is a `file:` URL of a local path (`file:///path`).
pub fn is_file_url(s: &str) -> bool {
    let n = scheme_len(s);
    s[..n].eq_ignore_ascii_case("file") && s[n..].starts_with(":///")
}

/// An authority (or an scp-like head) with no user part, query or
/// fragment, and whether a query or fragment was cut off (then nothing
/// after the authority is path).
///
/// The user part is everything up to the last `@`, so that a `:`, `?` or
/// `#` in it never leaves a piece behind; then the host ends at a `?` or
/// `#`; then a `%40` in what is left is an `@` too (git decodes a URL before
/// it splits it). An opening `[` is kept.
fn host_part(authority: &str) -> (String, bool) {
    let host = authority
        .rfind('@')
        .map_or(authority, |i| &authority[i + 1..]);
    let cut = host.find(['?', '#']);
    let host = &host[..cut.unwrap_or(host.len())];
    let host = match host.to_ascii_lowercase().rfind("%40") {
        Some(i) => &host[i + 3..],
        None => host,
    };
    let host = if authority.starts_with('[') && !host.starts_with('[') {
        format!("[{host}")
    } else {
        host.to_string()
    };
    (host, cut.is_some())
}

/// An authority (or scp-like head) and the path after it, redacted.
fn without_user(authority: &str, path: &str) -> String {
    match host_part(authority) {
        (host, true) => host,
        (host, false) => format!(
            "{host}{}",
            &path[..path.find(['?', '#']).unwrap_or(path.len())]
        ),
    }
}

/// A repository URL as a record keeps it and a message shows it: with no
/// user part (neither user nor password), no query and no fragment.
///
/// `https://user:token@host/x`, `https:///token@host/x` and
/// `HTTPS://u%3Ap@host/x?token=t#f` keep only their scheme, slashes, host
/// and path (`https://host/x`, `https:///host/x`, `HTTPS://host/x`);
/// `ssh://git@host/x` becomes `ssh://host/x` and the scp-like
/// `git@host:o/r` becomes `host:o/r`; `HELPER::ADDRESS` has its address
/// redacted. The authority runs to the first `/` after the slashes; its
/// user part is everything before its last `@`, so that a `:`, `?` or `#`
/// in it never leaves a piece behind. A local path, and a `file:///`
/// URL (a local path too), is kept as it is.
pub fn redact_url(url: &str) -> String {
    fixpoint(url, true)
}

/// [`redact`] until nothing changes, so that what is kept reads back as
/// itself (an scp-like `host:/a@b` is also the URL `host:/a@b`). Each round
/// only removes characters, so this ends.
fn fixpoint(url: &str, keep_local: bool) -> String {
    let mut kept = redact(url, keep_local);
    loop {
        let again = redact(&kept, keep_local);
        if again == kept {
            return kept;
        }
        kept = again;
    }
}

/// An address that is never a local path (a registry reference,
/// `REGISTRY/REPOSITORY[:TAG]`) as a message shows it: redacted as
/// [`redact_url`] redacts an scp-like URL, with nothing before the last `@`
/// of what precedes the first `/`, and no query or fragment.
pub fn redact_address(address: &str) -> String {
    fixpoint(address, false)
}

/// [`redact_url`]; a local path (git's rule) is kept only when `keep_local`
/// (not in a remote helper's address, which is no path of git's).
fn redact(url: &str, keep_local: bool) -> String {
    if let Some((helper, address)) = helper(url) {
        return format!("{helper}::{}", redact(address, false));
    }
    let n = scheme_len(url);
    let after_scheme = url[n..]
        .strip_prefix(':')
        .filter(|rest| n > 0 && rest.starts_with(['/', '\\']));
    if let Some(after) = after_scheme {
        if is_file_url(url) {
            return url.to_string();
        }
        // Any number of slashes (curl takes up to three, git passes them on).
        let rest = after.trim_start_matches(['/', '\\']);
        let slashes = &after[..after.len() - rest.len()];
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        return format!("{}:{slashes}{}", &url[..n], without_user(authority, path));
    }
    if keep_local && is_local(url) {
        return url.to_string();
    }
    // scp-like: `[user@]host:path`, `user@[host]:path`, `[user@host:port]:path`.
    let (head, path) = url.split_at(url.find('/').unwrap_or(url.len()));
    without_user(head, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_stay_in_a_url() {
        for (url, want) in [
            (
                "https://user:token@github.com/o/r.git",
                "https://github.com/o/r.git",
            ),
            (
                "https://ghp_secret@github.com/o/r.git",
                "https://github.com/o/r.git",
            ),
            ("https://github.com/o/r", "https://github.com/o/r"),
            (
                "https://x:y@host:8443/o/r?token=abc#frag",
                "https://host:8443/o/r",
            ),
            ("http://a:b@host", "http://host"),
            (
                "ssh://git:pw@github.com/o/r.git",
                "ssh://github.com/o/r.git",
            ),
            ("ssh://git@github.com/o/r.git", "ssh://github.com/o/r.git"),
            ("git@github.com:o/r.git", "github.com:o/r.git"),
            ("ghp_tok3n@github.com:o/r.git", "github.com:o/r.git"),
            ("git:pa55@github.com:o/r.git", "github.com:o/r.git"),
            (":pa55@github.com:o/r.git", "github.com:o/r.git"),
            ("github.com:o/r.git?token=t#f", "github.com:o/r.git"),
            ("git@[::1]:o/r.git", "[::1]:o/r.git"),
            ("[git@host:2222]:o/r.git", "[host:2222]:o/r.git"),
            ("https://user:p#ss@host/r", "https://host/r"),
            ("https://user:p?ss@host/r?x=1", "https://host/r"),
            ("https://host?token=x", "https://host"),
            ("https://user@host", "https://host"),
            ("https://host/a@b/r.git", "https://host/a@b/r.git"),
            ("git+ssh://git:pw@host/r", "git+ssh://host/r"),
            // However many slashes, whatever the case.
            (
                "https:///u:S3CRETTOKEN@example.com/o/r.git",
                "https:///example.com/o/r.git",
            ),
            ("https:/u:p@host/r", "https:/host/r"),
            ("https:////u:p@host/r", "https:////host/r"),
            ("https:\\\\u:p@host/r", "https:\\\\host/r"),
            ("HTTPS://U:P@HOST/R", "HTTPS://HOST/R"),
            ("https:u:p@host", "host"),
            // Percent-encoded, as git decodes it.
            ("https://u%3Ap%40x@host/r", "https://host/r"),
            ("ssh://u%3Ap%40host/r", "ssh://host/r"),
            ("https://u:p@host?t=a%40b/c", "https://host"),
            ("https::https://u:p@host/r", "https::https://host/r"),
            ("http::u:p@host/r", "http::host/r"),
            ("file://u:p@host/srv/r.git", "file://host/srv/r.git"),
            ("/srv/git/r.git", "/srv/git/r.git"),
            ("/srv/a@b/r.git", "/srv/a@b/r.git"),
            ("./u:p@host:r", "./u:p@host:r"),
            ("file:///srv/git/r.git", "file:///srv/git/r.git"),
            ("FILE:///srv/a@b?c", "FILE:///srv/a@b?c"),
            // What is kept reads back as itself.
            ("u@a:/b@c", "a:/c"),
        ] {
            assert_eq!(redact_url(url), want, "{url}");
        }
        for (address, want) in [
            ("reg.example/ce:1.0.0", "reg.example/ce:1.0.0"),
            (
                "127.0.0.1:5000/a/b@sha256:ab",
                "127.0.0.1:5000/a/b@sha256:ab",
            ),
            ("u:p@reg.example/ce:1", "reg.example/ce:1"),
            ("reg.example/ce:1?token=t", "reg.example/ce:1"),
            ("oci://u:p@reg.example/ce", "oci://reg.example/ce"),
        ] {
            assert_eq!(redact_address(address), want, "{address}");
        }
    }

    #[test]
    fn git_decides_what_is_a_url() {
        for remote in [
            "https://host/r",
            "HTTPS://host/r",
            "file:///srv/r",
            "git@host:r",
            "host:r",
            "https:/u:p@host/r",
            "ext::ssh host",
            "[::1]:r",
        ] {
            assert!(is_remote(remote), "{remote}");
        }
        for local in ["/srv/r", "r", "./a:b", "a/b:c", "u@host", ""] {
            assert!(!is_remote(local), "{local}");
        }
        assert!(is_file_url("file:///srv/r"));
        assert!(!is_file_url("file://host/srv/r"));
    }

    mod proptests {
        use proptest::prelude::*;

        use super::super::*;

        /// What no redacted URL may hold: it opens every generated user,
        /// password, query value and fragment, and no scheme, host or path
        /// holds it.
        const MARK: &str = "ZZ";

        /// A user or a password: the mark, then unreserved and sub-delim
        /// characters and percent-encoded bytes (`%40` and `%3A` among them);
        /// a password may hold `:`.
        fn secret(colon: bool) -> impl Strategy<Value = String> {
            let plain =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=";
            let mut chars: Vec<char> = plain.chars().collect();
            if colon {
                chars.push(':');
            }
            let one = prop_oneof![
                3 => prop::sample::select(chars).prop_map(String::from),
                1 => any::<u8>().prop_map(|b| format!("%{b:02X}")),
                1 => any::<u8>().prop_map(|b| format!("%{b:02x}")),
                1 => prop::sample::select(vec!["%40", "%3A", "%3a", "%2F"]).prop_map(String::from),
            ];
            prop::collection::vec(one, 0..12).prop_map(|v| format!("{MARK}{}", v.concat()))
        }

        /// A user part: `user`, `user:password`, `:password` or `user:`.
        fn user_part() -> impl Strategy<Value = String> {
            (secret(false), secret(true), 0..4u8).prop_map(|(user, password, form)| match form {
                0 => user,
                1 => format!("{user}:{password}"),
                2 => format!(":{password}"),
                _ => format!("{user}:"),
            })
        }

        fn scheme() -> impl Strategy<Value = &'static str> {
            prop::sample::select(vec![
                "http",
                "https",
                "HTTPS",
                "Https",
                "ssh",
                "SSH",
                "git",
                "git+ssh",
                "ssh+git",
                "ftp",
                "ftps",
                "file",
                "x-helper.v2",
            ])
        }

        fn host() -> impl Strategy<Value = String> {
            prop_oneof![
                "[a-z0-9]{1,8}(\\.[a-z0-9]{1,8}){0,2}",
                "\\[[0-9a-f:]{2,12}\\]",
            ]
        }

        /// An optional port.
        fn port() -> impl Strategy<Value = String> {
            prop_oneof![
                Just(String::new()),
                "[0-9]{1,5}".prop_map(|p| format!(":{p}"))
            ]
        }

        /// A URL's path: empty, or segments each after a `/` (an `@` among
        /// their characters).
        fn path() -> impl Strategy<Value = String> {
            "(/[a-z0-9._~@-]{0,8}){0,3}"
        }

        /// What a URL may end with: a query and a fragment, each holding
        /// the mark.
        fn tail() -> impl Strategy<Value = String> {
            (
                prop_oneof![
                    Just(String::new()),
                    secret(false).prop_map(|v| format!("?token={v}&a=b"))
                ],
                prop_oneof![
                    Just(String::new()),
                    secret(false).prop_map(|v| format!("#{v}"))
                ],
            )
                .prop_map(|(q, f)| format!("{q}{f}"))
        }

        /// A `SCHEME:/…` URL holding a user part, and the URL redacted as it
        /// must be.
        fn scheme_url() -> impl Strategy<Value = (String, String)> {
            (
                scheme(),
                1..7usize,
                user_part(),
                host(),
                port(),
                path(),
                tail(),
            )
                .prop_map(|(scheme, n, user, host, port, path, tail)| {
                    // `file:///…` is a local path: two slashes there.
                    let n = if scheme == "file" { 2 } else { n };
                    let slashes = "/".repeat(n);
                    (
                        format!("{scheme}:{slashes}{user}@{host}{port}{path}{tail}"),
                        format!("{scheme}:{slashes}{host}{port}{path}"),
                    )
                })
        }

        /// A URL (in any form git reads) holding a user part, and the URL
        /// redacted as it must be.
        fn hostile() -> impl Strategy<Value = (String, String)> {
            let scp = (user_part(), host(), "[a-z0-9._~-]{1,8}", path(), tail()).prop_map(
                |(user, host, first, path, tail)| {
                    (
                        format!("{user}@{host}:{first}{path}{tail}"),
                        format!("{host}:{first}{path}"),
                    )
                },
            );
            let bracketed = (user_part(), "[a-z0-9.]{1,8}", port(), path()).prop_map(
                |(user, host, port, path)| {
                    (
                        format!("[{user}@{host}{port}]:r{path}"),
                        format!("[{host}{port}]:r{path}"),
                    )
                },
            );
            // No slash after the scheme: git reads it as scp-like.
            let bare = (scheme(), user_part(), host(), path(), tail()).prop_map(
                |(scheme, user, host, path, tail)| {
                    let url = format!("{scheme}:{user}@{host}{path}{tail}");
                    if user.starts_with(':') {
                        // `SCHEME::ADDRESS`: a remote helper and its address.
                        (url, format!("{scheme}::{host}{path}"))
                    } else {
                        (url, format!("{host}{path}"))
                    }
                },
            );
            let helper = scheme_url()
                .prop_map(|(url, want)| (format!("ext::{url}"), format!("ext::{want}")));
            prop_oneof![3 => scheme_url(), 2 => scp, 1 => bracketed, 1 => bare, 1 => helper]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            #[test]
            fn no_user_part_query_or_fragment_survives((url, want) in hostile()) {
                let got = redact_url(&url);
                prop_assert!(!got.contains(MARK), "{url} -> {got}");
                prop_assert_eq!(&got, &want, "{}", url);
                prop_assert!(is_remote(&url), "{}", url);
                // Redacting twice changes nothing.
                prop_assert_eq!(redact_url(&got), got);
            }

            #[test]
            fn a_local_path_is_kept_as_it_is(path in "(\\.{0,2}/[a-zA-Z0-9:@?#%._~-]{0,10}){1,4}") {
                prop_assert!(!is_remote(&path), "{}", path);
                prop_assert_eq!(redact_url(&path), path);
            }
        }
    }
}
