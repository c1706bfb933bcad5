//! The OCI engine: snapshots as OCI artifacts in a container registry.
//!
//! A snapshot is one OCI image manifest (or, past the limits, an index of
//! several) whose config blob is the canonical manifest and whose layers are
//! the snapshot's objects, raw; it is tagged `sha256-<hex>`. See
//! [`mapping`] and `docs/remote.md`.

pub mod auth;
pub mod client;
pub mod mapping;

use std::collections::BTreeSet;

use self::client::Client;
use self::mapping::{Document, Plan};
use super::{Incoming, Options, Outgoing, Published, Remote, RemoteError, SnapshotRef};
use crate::digest::ObjectId;
use crate::error::{Error, Result};

/// The default most layers per image manifest: the CNCF registry takes
/// thousands, but some hosted registries refuse manifests with more than
/// about a thousand layers, and smaller manifests are cheaper to re-fetch.
pub const DEFAULT_MAX_LAYERS: usize = 1000;
/// The largest canonical manifest (config blob) a pull accepts.
const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// A registry and a repository in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// The registry host, with its port when it has one.
    pub registry: String,
    /// The repository path, e.g. `cestore/ce`.
    pub repository: String,
}

fn valid_repository(repo: &str) -> bool {
    !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|c| {
            let b = c.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|&x| x.is_ascii_lowercase() || x.is_ascii_digit() || b"._-".contains(&x))
        })
}

fn valid_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|&x| x.is_ascii_alphanumeric() || b"._-".contains(&x))
}

fn valid_registry(reg: &str) -> bool {
    !reg.is_empty()
        && reg
            .bytes()
            .all(|x| x.is_ascii_alphanumeric() || b".-:[]".contains(&x))
}

impl Address {
    /// Parses `REGISTRY/REPOSITORY[:TAG|@sha256:HEX]`.
    pub fn parse(s: &str) -> Result<(Address, Option<SnapshotRef>)> {
        let usage = |why: &str| {
            Error::Usage(format!(
                "'{s}' is not a remote address ({why}): write REGISTRY/REPOSITORY, e.g. 127.0.0.1:5000/cestore/ce, with :TAG or @sha256:<hex> to pull"
            ))
        };
        let Some((registry, rest)) = s.split_once('/') else {
            return Err(usage("no repository"));
        };
        if !valid_registry(registry) {
            return Err(usage(
                "the registry is not a host name with an optional port",
            ));
        }
        let (repository, reference) = if let Some((repo, digest)) = rest.split_once('@') {
            let hex = digest
                .strip_prefix("sha256:")
                .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| usage("a digest is sha256: and 64 hex characters"))?;
            (repo, Some(SnapshotRef::Digest(hex.to_ascii_lowercase())))
        } else {
            match rest.rsplit_once(':') {
                Some((repo, tag)) if !tag.contains('/') => {
                    if !valid_tag(tag) {
                        return Err(usage("the tag has characters a tag cannot have"));
                    }
                    (repo, Some(SnapshotRef::Tag(tag.to_string())))
                }
                _ => (rest, None),
            }
        };
        if !valid_repository(repository) {
            return Err(usage(
                "a repository is lowercase letters, digits and . _ - between slashes",
            ));
        }
        Ok((
            Address {
                registry: registry.to_string(),
                repository: repository.to_string(),
            },
            reference,
        ))
    }
}

/// A repository of an OCI registry, as a [`Remote`].
pub struct OciRemote {
    address: Address,
    client: Client,
    max_layers: usize,
}

impl OciRemote {
    /// A remote for `address`; credentials are looked up for its registry.
    pub fn new(address: Address, opts: &Options) -> Result<OciRemote> {
        let creds = auth::lookup(&address.registry);
        let client = Client::new(
            &address.registry,
            &address.repository,
            opts.plain_http,
            creds,
            opts.push,
        );
        Ok(OciRemote {
            address,
            client,
            max_layers: opts.max_layers,
        })
    }

    fn full(&self, reference: &str) -> String {
        let sep = if reference.starts_with("sha256:") {
            '@'
        } else {
            ':'
        };
        format!(
            "{}/{}{sep}{reference}",
            self.address.registry, self.address.repository
        )
    }

    fn fetch_document(&self, reference: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .client
            .get_manifest(reference, mapping::MAX_MANIFEST_BYTES)?)
    }
}

impl Remote for OciRemote {
    fn location(&self) -> String {
        format!(
            "oci://{}/{}",
            self.address.registry, self.address.repository
        )
    }

    fn has_blob(&self, id: &ObjectId) -> Result<bool> {
        Ok(self.client.has_blob(id)?)
    }

    fn put_blob(&self, id: &ObjectId, data: &[u8]) -> Result<()> {
        Ok(self.client.put_blob(id, data)?)
    }

    fn get_blob(&self, id: &ObjectId, max: u64) -> Result<Vec<u8>> {
        Ok(self.client.get_blob(id, max)?)
    }

    fn publish(&self, snapshot: &Outgoing<'_>) -> Result<Published> {
        let tag = super::snapshot_tag(&snapshot.manifest.digest);
        let reference = self.full(&tag);
        match mapping::plan(snapshot, self.max_layers, mapping::MAX_MANIFEST_BYTES) {
            Plan::Single(bytes) => {
                self.client
                    .put_manifest(&tag, mapping::MANIFEST_MEDIA_TYPE, &bytes)?;
                if let Some(human) = &snapshot.tag {
                    self.client
                        .put_manifest(human, mapping::MANIFEST_MEDIA_TYPE, &bytes)?;
                }
                Ok(Published {
                    reference,
                    remote_digest: format!("sha256:{}", ObjectId::of(&bytes)),
                    media_type: mapping::MANIFEST_MEDIA_TYPE.into(),
                    manifests: 1,
                    layers: snapshot.objects.len(),
                    tag_reference: snapshot.tag.as_ref().map(|t| self.full(t)),
                })
            }
            Plan::Index {
                parts,
                index,
                layers,
            } => {
                for p in &parts {
                    self.client.put_manifest(
                        &format!("sha256:{}", ObjectId::of(p)),
                        mapping::MANIFEST_MEDIA_TYPE,
                        p,
                    )?;
                }
                self.client
                    .put_manifest(&tag, mapping::INDEX_MEDIA_TYPE, &index)?;
                if let Some(human) = &snapshot.tag {
                    self.client
                        .put_manifest(human, mapping::INDEX_MEDIA_TYPE, &index)?;
                }
                Ok(Published {
                    reference,
                    remote_digest: format!("sha256:{}", ObjectId::of(&index)),
                    media_type: mapping::INDEX_MEDIA_TYPE.into(),
                    manifests: parts.len(),
                    layers,
                    tag_reference: snapshot.tag.as_ref().map(|t| self.full(t)),
                })
            }
        }
    }

    fn resolve(&self, reference: &SnapshotRef) -> Result<Incoming> {
        // The document, the snapshot digest the reference itself promises (a
        // `sha256-<hex>` tag), and the document digest it promises (`@sha256:`).
        let (bytes, promised, pinned) = match reference {
            SnapshotRef::Tag(tag) => {
                let bytes = self
                    .fetch_document(tag)?
                    .ok_or_else(|| RemoteError::NotFound(self.full(tag)))?;
                (bytes, super::tag_digest(tag), None)
            }
            SnapshotRef::Digest(hex) => {
                // The snapshot's own digest is a tag; anything else must be a
                // manifest's digest. (Asking for the config blob's digest as a
                // manifest makes some registries answer 500, so the tag goes first.)
                let tag = format!("sha256-{hex}");
                match self.fetch_document(&tag)? {
                    Some(bytes) => (bytes, super::tag_digest(&tag), None),
                    None => {
                        let bytes =
                            self.fetch_document(&format!("sha256:{hex}"))?
                                .ok_or_else(|| {
                                    RemoteError::NotFound(format!(
                                        "{} (neither a snapshot's tag nor a manifest's digest)",
                                        self.full(&format!("sha256:{hex}"))
                                    ))
                                })?;
                        (bytes, None, Some(hex.clone()))
                    }
                }
            }
        };
        let top = ObjectId::of(&bytes);
        if let Some(hex) = pinned {
            if top.to_hex() != hex {
                return Err(Error::Integrity(format!(
                    "the registry served a manifest for sha256:{hex} that hashes to sha256:{top}"
                )));
            }
        }
        let doc = Document::parse(&bytes)?;
        let (media_type, parts) = if doc.is_index() {
            let listed = doc.manifests.unwrap_or_default();
            if listed.is_empty() {
                return Err(RemoteError::Protocol(
                    "the registry's index lists no manifests".into(),
                )
                .into());
            }
            let mut parts = Vec::with_capacity(listed.len());
            for d in &listed {
                let id = mapping::parse_digest(&d.digest)?;
                let part = self.fetch_document(&d.digest)?.ok_or_else(|| {
                    RemoteError::Protocol(format!(
                        "the index lists manifest {} that the registry does not have",
                        d.digest
                    ))
                })?;
                if ObjectId::of(&part) != id {
                    return Err(Error::Integrity(format!(
                        "the registry served a manifest for {} that hashes to sha256:{}",
                        d.digest,
                        ObjectId::of(&part)
                    )));
                }
                let part = Document::parse(&part)?;
                if part.is_index() {
                    return Err(RemoteError::Protocol(
                        "the index lists another index; cestore writes one level only".into(),
                    )
                    .into());
                }
                parts.push(part);
            }
            (mapping::INDEX_MEDIA_TYPE, parts)
        } else {
            (mapping::MANIFEST_MEDIA_TYPE, vec![doc])
        };
        let mut config: Option<mapping::Descriptor> = None;
        let mut blobs = BTreeSet::new();
        for part in &parts {
            let c = part.config.as_ref().ok_or_else(|| {
                RemoteError::Protocol("the registry's manifest has no config".into())
            })?;
            if c.media_type != mapping::CONFIG_MEDIA_TYPE {
                return Err(RemoteError::Protocol(format!(
                    "not a cestore snapshot: the config's media type is '{}', not '{}'",
                    c.media_type,
                    mapping::CONFIG_MEDIA_TYPE
                ))
                .into());
            }
            match &config {
                Some(first) if first.digest != c.digest || first.size != c.size => {
                    return Err(RemoteError::Protocol(format!(
                        "the index's manifests name different configs ({} and {})",
                        first.digest, c.digest
                    ))
                    .into())
                }
                Some(_) => {}
                None => config = Some(c.clone()),
            }
            for l in &part.layers {
                blobs.insert(mapping::parse_digest(&l.digest)?);
            }
        }
        let Some(config) = config else {
            return Err(
                RemoteError::Protocol("the registry's manifest has no config".into()).into(),
            );
        };
        let config_id = mapping::parse_digest(&config.digest)?;
        let snapshot = crate::digest::ManifestDigest::from_bytes(*config_id.as_bytes());
        if let Some(promised) = promised {
            if promised != snapshot {
                return Err(Error::Integrity(format!(
                    "the tag sha256-{promised} names a manifest whose config is snapshot {snapshot}"
                )));
            }
        }
        if config.size > MAX_CONFIG_BYTES {
            return Err(RemoteError::Protocol(format!(
                "the config is {} bytes, more than a snapshot's manifest can be",
                config.size
            ))
            .into());
        }
        let manifest_bytes = self.client.get_blob(&config_id, config.size)?;
        if manifest_bytes.len() as u64 != config.size || ObjectId::of(&manifest_bytes) != config_id
        {
            return Err(Error::Integrity(format!(
                "the registry's config blob {} does not hash to its digest",
                config.digest
            )));
        }
        Ok(Incoming {
            manifest_bytes,
            snapshot,
            source: format!("{}@sha256:{top}", self.location()),
            remote_digest: format!("sha256:{top}"),
            media_type: media_type.into(),
            manifests: parts.len(),
            blobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses() {
        let (a, r) = Address::parse("127.0.0.1:5000/cestore/ce").unwrap();
        assert_eq!(a.registry, "127.0.0.1:5000");
        assert_eq!(a.repository, "cestore/ce");
        assert_eq!(r, None);
        let (_, r) = Address::parse("reg.example/ce:sha256-abc").unwrap();
        assert_eq!(r, Some(SnapshotRef::Tag("sha256-abc".into())));
        let hex = "A".repeat(64);
        let (a, r) = Address::parse(&format!("localhost:5000/a/b@sha256:{hex}")).unwrap();
        assert_eq!(a.repository, "a/b");
        assert_eq!(r, Some(SnapshotRef::Digest("a".repeat(64))));
        for bad in [
            "noslash",
            "reg/",
            "reg/UPPER",
            "reg/a//b",
            "reg/a@sha256:xyz",
            "reg/a:bad tag",
            "reg/-a",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad}");
        }
    }
}
