//! Recording an environment: a named set of stored snapshots, kept as one snapshot of its own.
//!
//! An environment's manifest ([`crate::profile::tree::digests::environment_bytes`])
//! names each member by its store digest, with the kind the store records
//! for it and the results-row field it fills (its role). It holds no file;
//! its row names its members in `snapshot_refs`, so that `rm` refuses to
//! forget one while the environment is recorded. [`record`] is the one
//! entry point: `ingest --profile environment` calls it, and so may any
//! other command that has typed members at hand.

use crate::digest::ManifestDigest;
use crate::error::{Error, Result};
use crate::profile::ce::manifest::Manifest;
use crate::profile::tree::stored::{check_members, sort_members, valid_role, Kind, Stored};
use crate::profile::tree::EnvironmentMember;
use crate::store::ingest::{publish_and_record, Staged};
use crate::store::{Need, Opener};

/// One member as a caller names it: the role it fills and its digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The results-row field the member fills (`[a-z0-9_]{1,64}`).
    pub role: String,
    /// The stored snapshot's digest.
    pub digest: ManifestDigest,
}

impl std::str::FromStr for Member {
    type Err = Error;

    /// Reads `ROLE=DIGEST` (the digest in full, 64 hex digits).
    fn from_str(spec: &str) -> Result<Member> {
        let bad = |why: &str| Error::Usage(format!("could not read the member '{spec}': {why}"));
        let (role, digest) = spec
            .split_once('=')
            .ok_or_else(|| bad("expected ROLE=DIGEST"))?;
        if !valid_role(role) {
            return Err(bad("the role is not 1 to 64 of a-z, 0-9 and _"));
        }
        let digest = digest
            .parse()
            .map_err(|_| bad("the digest is not 64 hexadecimal digits"))?;
        Ok(Member {
            role: role.to_string(),
            digest,
        })
    }
}

/// One member of a recorded environment, as reports give it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MemberReport {
    /// The results-row field it fills.
    pub role: String,
    /// Its kind: `ce`, `tree`, `dependencies` or `task`.
    pub kind: &'static str,
    /// Its store digest.
    pub digest: ManifestDigest,
}

impl From<&EnvironmentMember> for MemberReport {
    fn from(m: &EnvironmentMember) -> Self {
        MemberReport {
            role: m.role.clone(),
            kind: m.kind.name(),
            digest: m.digest,
        }
    }
}

/// The report of `ingest --profile environment`.
#[derive(Debug, serde::Serialize)]
pub struct EnvironmentReport {
    /// `environment`.
    pub profile: &'static str,
    /// The environment's name.
    pub name: String,
    /// The environment's digest: the SHA-256 of its manifest.
    pub manifest_digest: ManifestDigest,
    /// Its members, in (role, digest) order.
    pub members: Vec<MemberReport>,
    /// Whether this command recorded it (false: it was recorded already).
    pub stored: bool,
    /// The store, absolute.
    pub store: String,
}

/// Records the environment of `members` (each a stored snapshot) under
/// `name` (default `environment`), signed with `sign_with` when given. The
/// same set again records nothing new.
///
/// # Errors
///
/// A usage error (exit 2) when there is no member, too many, or a role is
/// not a results-row field name; an unknown digest (exit 4, naming it) when
/// a member is not stored; a usage error when a member is an environment;
/// whatever the store's recording fails with.
pub fn record(
    open: Opener<'_>,
    members: &[Member],
    name: Option<&str>,
    sign_with: Option<&crate::sign::PrivateKey>,
) -> Result<EnvironmentReport> {
    if members.is_empty() {
        return Err(Error::Usage(
            "ingest --profile environment: needs at least one --member ROLE=DIGEST".into(),
        ));
    }
    if let Some(m) = members.iter().find(|m| !valid_role(&m.role)) {
        return Err(Error::Usage(format!(
            "could not read the member '{}={}': the role is not 1 to 64 of a-z, 0-9 and _",
            m.role, m.digest
        )));
    }
    let mut store = open(Need::Existing)?;
    record_in(&mut store, members, name, sign_with).map(|(report, _)| report)
}

/// [`record`] in an open store, returning the record too, so that a
/// command failing later can take it back ([`crate::store::ingest::undo_ingest`]).
///
/// # Errors
///
/// As [`record`].
pub fn record_in(
    store: &mut crate::store::Store,
    members: &[Member],
    name: Option<&str>,
    sign_with: Option<&crate::sign::PrivateKey>,
) -> Result<(EnvironmentReport, crate::store::ingest::IngestReport)> {
    if members.is_empty() {
        return Err(Error::Usage(
            "an environment needs at least one member".into(),
        ));
    }
    let mut typed = Vec::with_capacity(members.len());
    for m in members {
        let kind = store
            .catalogue()
            .kind_of(&m.digest)
            .ok_or_else(|| Error::UnknownDigest {
                prefix: m.digest.to_hex(),
            })?;
        if kind == Kind::Environment {
            return Err(Error::Usage(format!(
                "could not take the member '{}={}': it is an environment; environments do not nest",
                m.role, m.digest
            )));
        }
        typed.push(EnvironmentMember {
            role: m.role.clone(),
            digest: m.digest,
            kind,
        });
    }
    sort_members(&mut typed);
    check_members(&typed)
        .map_err(|e| Error::Usage(format!("ingest --profile environment: {e}")))?;
    let manifest = Manifest::stored(Stored::Environment(typed.clone()));
    crate::store::ingest::adopt::check_named(store, &manifest)?;
    let name = name.unwrap_or("environment");
    let attestations = crate::store::trust::signed::sign_ingest(
        store.catalogue(),
        sign_with,
        name,
        manifest.digest,
    )?;
    let work = store.work_dir("ingest")?;
    let source = store.root().display().to_string();
    let r = publish_and_record(
        store,
        work,
        Staged {
            manifest: &manifest,
            name: Some(name),
            version: "",
            event: "ingest",
            source: &source,
            origin: None,
            sources: Vec::new(),
            attestations,
            tree_digest: None,
            objects: Vec::new(),
            drifted: Vec::new(),
            left_out: Vec::new(),
            secrets: Vec::new(),
            reused: 0,
            bytes: 0,
        },
    )?;
    let report = EnvironmentReport {
        profile: "environment",
        name: r.provenance.name.clone(),
        manifest_digest: manifest.digest,
        members: typed.iter().map(MemberReport::from).collect(),
        stored: !r.ingest.already_present,
        store: store.root().display().to_string(),
    };
    Ok((report, r))
}
