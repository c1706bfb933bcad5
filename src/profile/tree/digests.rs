//! The canonical bytes of a tree manifest, of a dependency list and of a snapshot's identity, and their digests.
//!
//! Each is the UTF-8 of what Python's
//! `json.dumps(payload, sort_keys=True, separators=(",", ":"))` writes for
//! the harness's payload: keys sorted, no white space, integers in decimal,
//! and `ensure_ascii` on (the default), so that every character outside
//! `0x20..=0x7E` is a `\uXXXX` escape and the bytes are ASCII. The entry
//! lists are hashed in the order given: [`super::sort_entries`] gives the
//! harness's order.

use std::path::Path;

use crate::digest::{
    DependencyContentDigest, DependencyManifestDigest, TreeManifestDigest, TreeSnapshotDigest,
};

use super::{Dependency, TreeEntry};
use crate::pyjson::{push_u_escape, write_json_string, write_json_string_body};

/// The `schema_version` of the dependency manifest.
pub const DEPENDENCY_SCHEMA_VERSION: u32 = 1;

/// The `schema_version` of the snapshot identity.
pub const SNAPSHOT_SCHEMA_VERSION: u32 = 3;

/// Appends a path as `json.dumps(str(path))` writes it for a `pathlib.Path`.
///
/// `str(path)` is the path as pathlib parses it: repeated `/` and `.`
/// components dropped, no trailing `/`, a root of exactly two slashes kept
/// (POSIX leaves its meaning to the system), `.` for an empty path. Python
/// decodes a path's bytes as UTF-8 with `surrogateescape`, so each byte of a
/// part that is not UTF-8 is the lone surrogate U+DC00 + byte, `\udcXX`.
fn write_path(out: &mut Vec<u8>, path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    out.push(b'"');
    for chunk in python_path_str(path.as_os_str().as_bytes()).utf8_chunks() {
        write_json_string_body(out, chunk.valid());
        for &byte in chunk.invalid() {
            push_u_escape(out, 0xdc00 | u16::from(byte));
        }
    }
    out.push(b'"');
}

/// The bytes of `str(PurePosixPath(raw))`.
pub(super) fn python_path_str(raw: &[u8]) -> Vec<u8> {
    let slashes = raw.iter().take_while(|&&b| b == b'/').count();
    let root: &[u8] = match slashes {
        0 => b"",
        2 => b"//",
        _ => b"/",
    };
    let mut out = root.to_vec();
    let parts = raw
        .split(|&b| b == b'/')
        .filter(|part| !part.is_empty() && *part != b".");
    for (i, part) in parts.enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(part);
    }
    if out.is_empty() {
        out.push(b'.');
    }
    out
}

fn write_int(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(n.to_string().as_bytes());
}

/// Appends one entry: `{"kind":…,"link_target":…,"mode":…,"path":…,"sha256":…,"size":…}`.
fn write_entry(out: &mut Vec<u8>, e: &TreeEntry) {
    out.extend_from_slice(b"{\"kind\":");
    write_json_string(out, e.kind());
    out.extend_from_slice(b",\"link_target\":");
    write_json_string(out, e.link_target());
    out.extend_from_slice(b",\"mode\":");
    write_int(out, u64::from(e.mode()));
    out.extend_from_slice(b",\"path\":");
    write_json_string(out, &e.path);
    out.extend_from_slice(b",\"sha256\":\"");
    if let Some(id) = e.sha256() {
        out.extend_from_slice(id.to_hex().as_bytes());
    }
    out.extend_from_slice(b"\",\"size\":");
    write_int(out, e.size());
    out.push(b'}');
}

/// Appends `[e,e,…]`, the entries in the order given.
fn write_entries(out: &mut Vec<u8>, entries: &[TreeEntry]) {
    out.push(b'[');
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_entry(out, e);
    }
    out.push(b']');
}

/// The bytes of an entry list that [`manifest_digest`] hashes: a JSON array
/// of one object per entry, in the order given.
pub fn manifest_bytes(entries: &[TreeEntry]) -> Vec<u8> {
    // 200 bytes covers one entry's fixed part, its digest and a short path.
    let mut out = Vec::with_capacity(2 + entries.len() * 200);
    write_entries(&mut out, entries);
    out
}

/// The manifest digest of an entry list: upstream's `_manifest_digest`.
pub fn manifest_digest(entries: &[TreeEntry]) -> TreeManifestDigest {
    TreeManifestDigest::of(&manifest_bytes(entries))
}

/// Appends `{"entries":[…]}`, one dependency's content.
fn write_content(out: &mut Vec<u8>, d: &Dependency) {
    out.extend_from_slice(b"{\"entries\":");
    write_entries(out, &d.entries);
    out.push(b'}');
}

/// The bytes [`DependencyDigests::content`] hashes: a JSON array of
/// `{"entries":[…]}`, one per dependency, in the order declared.
pub fn dependency_content_bytes(dependencies: &[Dependency]) -> Vec<u8> {
    let mut out = Vec::new();
    out.push(b'[');
    for (i, d) in dependencies.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_content(&mut out, d);
    }
    out.push(b']');
    out
}

/// The bytes [`DependencyDigests::manifest`] hashes:
/// `{"dependencies":[{"content":{"entries":[…]},"source":…,"target":…},…],"schema_version":1}`.
pub fn dependency_manifest_bytes(dependencies: &[Dependency]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"dependencies\":[");
    for (i, d) in dependencies.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"content\":");
        write_content(&mut out, d);
        out.extend_from_slice(b",\"source\":");
        write_json_string(&mut out, &d.source);
        out.extend_from_slice(b",\"target\":");
        write_json_string(&mut out, &d.target);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"schema_version\":");
    write_int(&mut out, u64::from(DEPENDENCY_SCHEMA_VERSION));
    out.push(b'}');
    out
}

/// A dependency list's two digests, as a task binding carries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DependencyDigests {
    /// What the dependencies hold, whatever they were declared as:
    /// `sandbox_dependency_content_digest`.
    pub content: DependencyContentDigest,
    /// What they hold with where each comes from and goes:
    /// `sandbox_dependency_manifest_digest`.
    pub manifest: DependencyManifestDigest,
}

/// The two digests of a dependency list: upstream's `_dependency_digests`.
pub fn dependency_digests(dependencies: &[Dependency]) -> DependencyDigests {
    DependencyDigests {
        content: DependencyContentDigest::of(&dependency_content_bytes(dependencies)),
        manifest: DependencyManifestDigest::of(&dependency_manifest_bytes(dependencies)),
    }
}

/// What a task-asset snapshot's digest is taken over.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotIdentity<'a> {
    /// The repository the assets were read from, as the absolute path the
    /// harness resolved it to (its `real_directory`), written as Python's
    /// `str(path)`.
    pub repo_identity: &'a Path,
    /// The commit the task was resolved to (or whatever the caller bound,
    /// `unbound` for a standalone staging).
    pub resolved_sha: &'a str,
    /// The task's `sandbox_copy` strings, exactly as declared, in order.
    pub declarations: &'a [String],
    /// The manifest digest of the `sandbox_copy` entries.
    pub manifest_digest: TreeManifestDigest,
    /// The dependency list's digests.
    pub dependencies: DependencyDigests,
    /// The harness checkout that review-case paths were read from, when a
    /// declaration lies under one (`""` in the payload when `None`).
    pub harness_identity: Option<&'a Path>,
}

/// The bytes [`snapshot_digest`] hashes: an object with `declarations`,
/// `dependency_content_digest`, `dependency_manifest_digest`,
/// `harness_identity`, `manifest_digest`, `repo_identity`, `resolved_sha`
/// and `schema_version` 3, in that (sorted) order.
pub fn snapshot_bytes(id: &SnapshotIdentity<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"declarations\":[");
    for (i, d) in id.declarations.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(&mut out, d);
    }
    out.extend_from_slice(b"],\"dependency_content_digest\":");
    write_json_string(&mut out, &id.dependencies.content.to_hex());
    out.extend_from_slice(b",\"dependency_manifest_digest\":");
    write_json_string(&mut out, &id.dependencies.manifest.to_hex());
    out.extend_from_slice(b",\"harness_identity\":");
    match id.harness_identity {
        Some(path) => write_path(&mut out, path),
        None => write_json_string(&mut out, ""),
    }
    out.extend_from_slice(b",\"manifest_digest\":");
    write_json_string(&mut out, &id.manifest_digest.to_hex());
    out.extend_from_slice(b",\"repo_identity\":");
    write_path(&mut out, id.repo_identity);
    out.extend_from_slice(b",\"resolved_sha\":");
    write_json_string(&mut out, id.resolved_sha);
    out.extend_from_slice(b",\"schema_version\":");
    write_int(&mut out, u64::from(SNAPSHOT_SCHEMA_VERSION));
    out.push(b'}');
    out
}

/// A task-asset snapshot's digest: upstream's `_snapshot_digest`.
pub fn snapshot_digest(id: &SnapshotIdentity<'_>) -> TreeSnapshotDigest {
    TreeSnapshotDigest::of(&snapshot_bytes(id))
}

/// The `schema_version` of an environment manifest.
pub const ENVIRONMENT_SCHEMA_VERSION: u32 = 1;

/// The most members an environment may name.
pub const MAX_ENVIRONMENT_MEMBERS: usize = 65_536;

/// One member of an environment: a stored snapshot, the kind the store
/// records for it, and the results-row field it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvironmentMember {
    /// The results-row field the member fills (`[a-z0-9_]{1,64}`), e.g.
    /// `ce_plugin_manifest_digest`.
    pub role: String,
    /// The member's store digest.
    pub digest: crate::digest::ManifestDigest,
    /// The member's kind: `ce`, `tree`, `dependencies` or `task`.
    pub kind: super::stored::Kind,
}

/// The bytes of an environment manifest: `{"members":[{"digest":…,
/// "kind":…,"role":…},…],"schema_version":1}`, the members in the order
/// given ([`super::stored::check_members`] asks for (role, digest) order).
pub fn environment_bytes(members: &[EnvironmentMember]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"members\":[");
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"digest\":");
        write_json_string(&mut out, &m.digest.to_hex());
        out.extend_from_slice(b",\"kind\":");
        write_json_string(&mut out, m.kind.name());
        out.extend_from_slice(b",\"role\":");
        write_json_string(&mut out, &m.role);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"schema_version\":");
    write_int(&mut out, u64::from(ENVIRONMENT_SCHEMA_VERSION));
    out.push(b'}');
    out
}
