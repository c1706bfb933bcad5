//! `cestore list`, `cestore log` and `cestore find`: catalogue queries for auditors.

use std::io::{self, Write};
use std::path::Path;

use super::{resolve, Report};
use crate::catalogue::{FileFilter, IngestEvent, SnapshotRow};
use crate::digest::{DigestPrefix, ManifestDigest, ObjectId};
use crate::error::{Error, Result};
use crate::store::{LockMode, Store};

/// The report of `cestore list`.
#[derive(Debug, serde::Serialize)]
pub struct ListReport {
    /// The snapshots, oldest first.
    pub snapshots: Vec<SnapshotRow>,
}

impl Report for ListReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for s in &self.snapshots {
            writeln!(
                w,
                "{}  {} {}  {}  {}  {}",
                s.digest,
                s.name,
                s.version,
                super::counted(s.file_count, "file", "files"),
                super::counted(s.total_bytes, "byte", "bytes"),
                s.first_ingested_at
            )?;
        }
        Ok(())
    }
}

/// Lists snapshots, optionally filtered.
pub fn list(store_root: &Path, version: Option<&str>, name: Option<&str>) -> Result<ListReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    Ok(ListReport {
        snapshots: store.catalogue().snapshots(version, name)?,
    })
}

/// The report of `cestore log`.
#[derive(Debug, serde::Serialize)]
pub struct LogReport {
    /// The ingest events, oldest first.
    pub ingests: Vec<IngestEvent>,
}

impl Report for LogReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for e in &self.ingests {
            writeln!(
                w,
                "{}  {}  {}  {}@{}  {}  new {} reused {}",
                e.at,
                e.digest,
                e.source,
                e.user,
                e.host,
                e.tool_version,
                e.new_objects,
                e.reused_objects
            )?;
        }
        Ok(())
    }
}

/// Lists ingest events, of one snapshot or all.
pub fn log(store_root: &Path, digest: Option<&str>) -> Result<LogReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let digest = digest.map(|d| resolve(store.catalogue(), d)).transpose()?;
    Ok(LogReport {
        ingests: store.catalogue().ingests(digest.as_ref())?,
    })
}

/// What `cestore find` looks for.
pub enum FindQuery<'a> {
    /// A file content, by SHA-256.
    Object(&'a str),
    /// A relative path.
    Path(&'a str),
}

/// One file of one snapshot that `cestore find` matched.
#[derive(Debug, serde::Serialize)]
pub struct FindHit {
    /// The snapshot.
    pub manifest_digest: ManifestDigest,
    /// Its version.
    pub version: String,
    /// The file's path.
    pub path: String,
    /// The file's SHA-256.
    pub sha256: ObjectId,
    /// The file's size.
    pub size: i64,
    /// Whether it is executable.
    pub executable: bool,
}

/// The report of `cestore find`.
#[derive(Debug, serde::Serialize)]
pub struct FindReport {
    /// Every match, by snapshot then manifest order.
    pub matches: Vec<FindHit>,
}

impl Report for FindReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        for h in &self.matches {
            writeln!(
                w,
                "{}  {}  {} {} {:>8} {}",
                h.manifest_digest,
                h.version,
                h.sha256,
                if h.executable { "x" } else { "-" },
                h.size,
                h.path
            )?;
        }
        Ok(())
    }
}

/// Lists the snapshots that contain a content or a path.
///
/// `--object` takes a SHA-256 or a prefix that only one stored content has.
/// `--path` takes an exact path, a directory (`skills/ce-plan` or
/// `skills/ce-plan/`: every file below it), or a glob (see [`glob_matches`]).
pub fn find(store_root: &Path, query: &FindQuery<'_>) -> Result<FindReport> {
    let store = Store::open(store_root, LockMode::Shared, false)?;
    let cat = store.catalogue();
    let hits = match query {
        FindQuery::Object(text) => {
            let prefix: DigestPrefix = text.parse().map_err(|e| {
                Error::Usage(format!("--object takes a SHA-256 or a unique prefix: {e}"))
            })?;
            let ids = cat.objects_with_prefix(prefix.as_str(), 11)?;
            match ids.as_slice() {
                [] => Vec::new(),
                [one] => {
                    let id: ObjectId = one.parse().map_err(|_| {
                        Error::Integrity(format!(
                            "the catalogue holds a malformed object id '{one}'"
                        ))
                    })?;
                    cat.files_matching(&FileFilter::Object(id))?
                }
                _ => {
                    return Err(Error::AmbiguousDigest {
                        prefix: prefix.to_string(),
                        matches: ids,
                    })
                }
            }
        }
        FindQuery::Path(p) => {
            let p = p.trim_start_matches("./");
            if p.contains(['*', '?']) {
                let literal = &p[..p.find(['*', '?']).unwrap_or(p.len())];
                cat.files_matching(&FileFilter::PathStartsWith(literal))?
                    .into_iter()
                    .filter(|h| glob_matches(p, &h.entry.path))
                    .collect()
            } else {
                cat.files_matching(&FileFilter::PathOrUnder(p.trim_end_matches('/')))?
            }
        }
    };
    let matches = hits
        .into_iter()
        .map(|h| FindHit {
            manifest_digest: h.digest,
            version: h.version,
            path: h.entry.path,
            sha256: h.entry.sha256,
            size: h.entry.size as i64,
            executable: h.entry.executable,
        })
        .collect();
    Ok(FindReport { matches })
}

/// Whether `path` matches the glob `pattern`, compared component by
/// component (split at `/`): `*` matches any run of characters within one
/// component, `?` one character, and a component that is exactly `**`
/// matches any number of whole components, none included. Every other
/// character matches itself.
pub fn glob_matches(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').collect();
    let parts: Vec<&str> = path.split('/').collect();
    components_match(&pat, &parts)
}

fn components_match(pat: &[&str], parts: &[&str]) -> bool {
    match pat.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|i| components_match(rest, &parts[i..])),
        Some((first, rest)) => parts.split_first().is_some_and(|(part, tail)| {
            component_matches(first.as_bytes(), part.as_bytes()) && components_match(rest, tail)
        }),
    }
}

/// `*` and `?` within one component, by characters (a `?` takes one UTF-8
/// character, not one byte).
fn component_matches(pat: &[u8], text: &[u8]) -> bool {
    let text: Vec<char> = String::from_utf8_lossy(text).chars().collect();
    let pat: Vec<char> = String::from_utf8_lossy(pat).chars().collect();
    // Iterative matching with one backtrack point: linear in practice and
    // never exponential.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && (pat[p] == '?' || pat[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pat.len() && pat[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn globs() {
        let yes = [
            ("skills/*/SKILL.md", "skills/ce-plan/SKILL.md"),
            ("skills/ce-*/SKILL.md", "skills/ce-plan/SKILL.md"),
            ("skills/**/SKILL.md", "skills/SKILL.md"),
            ("skills/**/SKILL.md", "skills/a/b/SKILL.md"),
            ("**", "a/b"),
            ("*.md", "README.md"),
            ("a?c", "abc"),
            ("a?c", "aéc"),
            ("*", ""),
        ];
        let no = [
            ("skills/*/SKILL.md", "skills/a/b/SKILL.md"),
            ("skills/*", "skills/a/b"),
            ("*.md", "skills/a.md"),
            ("a?c", "ac"),
            ("a*b", "a/b"),
            ("skills/*/SKILL.md", "skills/ce-plan/SKILL.mdx"),
        ];
        for (p, t) in yes {
            assert!(glob_matches(p, t), "{p} should match {t}");
        }
        for (p, t) in no {
            assert!(!glob_matches(p, t), "{p} should not match {t}");
        }
    }
}
