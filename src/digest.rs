//! SHA-256 identities: one type per kind of digest, never bare hex strings.
//!
//! An [`ObjectId`] names one file content in the object store; a
//! [`ManifestDigest`] names one snapshot (the SHA-256 of its canonical
//! manifest). Both print as 64 lowercase hex characters, as do the others
//! here (a source record's, a key's, an attestation's, and the four digests
//! of the benchmark harness's task-asset trees, `crate::profile::tree`). A [`DigestPrefix`]
//! is what a user may type to name a snapshot: 4 to 64 hex characters. As
//! git does, a prefix needs [`MIN_PREFIX_LEN`] digits: a shorter one names
//! one snapshot only while the store is small, and stops working as it grows.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// Why a string is not a digest or a digest prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseDigestError {
    /// The string has the wrong number of characters.
    #[error("a SHA-256 digest has 64 hex characters, '{0}' has {1}")]
    Length(String, usize),
    /// The string holds a character that is not lowercase or uppercase hex.
    #[error("'{0}' is not hexadecimal")]
    NotHex(String),
    /// The string does not name its algorithm as [`ALGORITHM_PREFIX`].
    #[error("'{0}' does not start with sha256:")]
    NoAlgorithm(String),
    /// A prefix has fewer than [`MIN_PREFIX_LEN`] hex digits.
    #[error("a prefix needs at least {MIN_PREFIX_LEN} hex digits, '{0}' has {1}")]
    TooShort(String, usize),
}

/// The fewest hex digits a [`DigestPrefix`] may have, as git asks.
pub const MIN_PREFIX_LEN: usize = 4;

/// How a digest names its algorithm where other algorithms could stand
/// (OCI descriptors and references): `sha256:<hex>`.
pub const ALGORITHM_PREFIX: &str = "sha256:";

/// Which letters a digest's hex may use.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    /// Lowercase or uppercase, as a user may type it.
    Either,
    /// Lowercase only: the one form cestore writes.
    Lower,
}

fn hex_value(c: u8, case: Case) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' if case == Case::Either => Some(c - b'A' + 10),
        _ => None,
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes `bytes` as lowercase hex into `out`.
pub fn encode_hex(bytes: &[u8], out: &mut String) {
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0x0f)] as char);
    }
}

/// The one rule of a well-formed digest: 64 hex characters, in `case`.
fn parse_hex32(s: &str, case: Case) -> Result<[u8; 32], ParseDigestError> {
    if s.len() != 64 {
        return Err(ParseDigestError::Length(s.to_string(), s.len()));
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.as_bytes().chunks_exact(2).enumerate() {
        let hex = |c| hex_value(c, case).ok_or_else(|| ParseDigestError::NotHex(s.to_string()));
        let (hi, lo) = (hex(pair[0])?, hex(pair[1])?);
        out[i] = (hi << 4) | lo;
    }
    Ok(out)
}

macro_rules! sha256_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name([u8; 32]);

        impl $name {
            /// Wraps raw digest bytes.
            pub const fn from_bytes(bytes: [u8; 32]) -> Self {
                Self(bytes)
            }

            /// The raw digest bytes.
            pub const fn as_bytes(&self) -> &[u8; 32] {
                &self.0
            }

            /// The SHA-256 of `data`.
            pub fn of(data: &[u8]) -> Self {
                Self(Sha256::digest(data).into())
            }

            /// The digest `s` names when it is written exactly as cestore
            /// writes one: 64 lowercase hex characters.
            pub fn from_lower_hex(s: &str) -> Option<Self> {
                parse_hex32(s, Case::Lower).ok().map(Self)
            }

            /// Parses `sha256:<hex>`, the hex in either case.
            pub fn from_prefixed(s: &str) -> Result<Self, ParseDigestError> {
                let hex = s
                    .strip_prefix(ALGORITHM_PREFIX)
                    .ok_or_else(|| ParseDigestError::NoAlgorithm(s.to_string()))?;
                hex.parse()
            }

            /// The 64-character lowercase hex form.
            pub fn to_hex(&self) -> String {
                let mut s = String::with_capacity(64);
                encode_hex(&self.0, &mut s);
                s
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.to_hex())
            }
        }

        impl FromStr for $name {
            type Err = ParseDigestError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_hex32(s, Case::Either).map(Self)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_hex())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

sha256_id!(
    /// The SHA-256 of one file's bytes: the key of an object in the store.
    ObjectId
);
sha256_id!(
    /// The SHA-256 of a snapshot's canonical manifest: the snapshot's identity.
    ManifestDigest
);
sha256_id!(
    /// The SHA-256 of a source record file's bytes: its name in the store.
    SourceId
);
sha256_id!(
    /// The SHA-256 of an ed25519 public key's SubjectPublicKeyInfo DER bytes:
    /// the key's id in attestations.
    KeyId
);
sha256_id!(
    /// The SHA-256 of an attestation's envelope bytes: its name in the store.
    AttestationId
);
sha256_id!(
    /// The SHA-256 of a tree manifest's canonical bytes (an entry list of the
    /// tree profile, `crate::profile::tree`): upstream's `_manifest_digest`.
    TreeManifestDigest
);
sha256_id!(
    /// The SHA-256 of a dependency list's entries, one entry list per
    /// dependency: upstream's `sandbox_dependency_content_digest`.
    DependencyContentDigest
);
sha256_id!(
    /// The SHA-256 of a dependency list's declarations with their entries:
    /// upstream's `sandbox_dependency_manifest_digest`.
    DependencyManifestDigest
);
sha256_id!(
    /// The SHA-256 of a task-asset snapshot's identity (declarations, the
    /// digests above, repository and commit): upstream's `_snapshot_digest`.
    TreeSnapshotDigest
);

/// A user-typed digest or unique prefix of one: [`MIN_PREFIX_LEN`] to 64 hex
/// characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestPrefix(String);

impl DigestPrefix {
    /// The prefix in lowercase.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The full digest, when the prefix is all 64 characters.
    pub fn full(&self) -> Option<ManifestDigest> {
        self.0.parse().ok()
    }
}

impl FromStr for DigestPrefix {
    type Err = ParseDigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.strip_prefix(ALGORITHM_PREFIX).unwrap_or(s);
        if s.len() > 64 {
            return Err(ParseDigestError::Length(s.to_string(), s.len()));
        }
        if !s.bytes().all(|c| hex_value(c, Case::Either).is_some()) {
            return Err(ParseDigestError::NotHex(s.to_string()));
        }
        if s.len() < MIN_PREFIX_LEN {
            return Err(ParseDigestError::TooShort(s.to_string(), s.len()));
        }
        Ok(DigestPrefix(s.to_ascii_lowercase()))
    }
}

impl fmt::Display for DigestPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A streaming SHA-256 hasher that yields an [`ObjectId`].
#[derive(Default, Clone)]
pub struct ObjectHasher(Sha256);

impl ObjectHasher {
    /// Feeds bytes to the hash.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The digest of everything fed so far.
    pub fn finish(self) -> ObjectId {
        ObjectId(self.0.finalize().into())
    }
}

impl ObjectId {
    /// The SHA-256 of everything `r` yields, and how many bytes that was.
    pub fn of_reader(mut r: impl std::io::Read) -> std::io::Result<(ObjectId, u64)> {
        let mut hasher = ObjectHasher::default();
        let mut buf = vec![0u8; 64 * 1024];
        let mut len = 0u64;
        loop {
            match r.read(&mut buf) {
                Ok(0) => return Ok((hasher.finish(), len)),
                Ok(n) => {
                    hasher.update(&buf[..n]);
                    len += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// An object's identity: its content hash and whether it is executable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The SHA-256 of the bytes.
    pub id: ObjectId,
    /// Whether the object is stored at mode 0555 (else 0444).
    pub executable: bool,
}

impl ObjectKey {
    /// The object's name: `<64 hex>`, with `.x` when it is executable.
    pub fn name(&self) -> String {
        let mut s = self.id.to_hex();
        if self.executable {
            s.push_str(".x");
        }
        s
    }

    /// The object's path relative to `objects/`: `ab/<62 hex>[.x]`.
    pub fn rel_path(&self) -> String {
        let name = self.name();
        format!("{}/{}", &name[..2], &name[2..])
    }

    /// The file name inside the shard directory: `<62 hex>[.x]`.
    pub fn file_name(&self) -> String {
        self.name()[2..].to_string()
    }

    /// The mode the object is stored at.
    pub fn mode(&self) -> u32 {
        if self.executable {
            0o555
        } else {
            0o444
        }
    }

    /// Parses a key's [`ObjectKey::name`], `<64 hex>[.x]`, back into it.
    pub fn from_name(name: &str) -> Option<ObjectKey> {
        ObjectKey::from_parts(name.get(..2)?, name.get(2..)?)
    }

    /// Parses `ab` and `<62 hex>[.x]` back into a key.
    pub fn from_parts(shard: &str, name: &str) -> Option<ObjectKey> {
        let (rest, executable) = match name.strip_suffix(".x") {
            Some(rest) => (rest, true),
            None => (name, false),
        };
        let id = format!("{shard}{rest}").parse().ok()?;
        let key = ObjectKey { id, executable };
        (key.file_name() == name && key.name()[..2] == *shard).then_some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader's bytes hash as the same bytes in one slice do, across
    /// reads of any size, and are counted.
    #[test]
    fn a_reader_hashes_as_its_bytes_do() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let chained = std::io::Read::chain(&data[..70_000], &data[70_000..]);
        assert_eq!(
            ObjectId::of_reader(chained).unwrap(),
            (ObjectId::of(&data), data.len() as u64)
        );
        assert_eq!(
            ObjectId::of_reader(&b""[..]).unwrap(),
            (ObjectId::of(b""), 0)
        );
    }

    #[test]
    fn hex_round_trip() {
        let id = ObjectId::of(b"abc");
        assert_eq!(
            id.to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(id.to_hex().parse::<ObjectId>().unwrap(), id);
        assert_eq!(id.to_hex().to_uppercase().parse::<ObjectId>().unwrap(), id);
    }

    #[test]
    fn bad_digests_are_refused() {
        assert!(matches!(
            "abc".parse::<ObjectId>(),
            Err(ParseDigestError::Length(..))
        ));
        let not_hex = "g".repeat(64);
        assert!(matches!(
            not_hex.parse::<ManifestDigest>(),
            Err(ParseDigestError::NotHex(_))
        ));
        assert!(matches!(
            "".parse::<DigestPrefix>(),
            Err(ParseDigestError::TooShort(_, 0))
        ));
        assert!(matches!(
            "xyz".parse::<DigestPrefix>(),
            Err(ParseDigestError::NotHex(_))
        ));
        assert!(matches!(
            "sha256:abc".parse::<DigestPrefix>(),
            Err(ParseDigestError::TooShort(_, 3))
        ));
        assert_eq!(
            "sha256:ABCD".parse::<DigestPrefix>().unwrap().as_str(),
            "abcd"
        );
        let id = ObjectId::of(b"abc");
        assert_eq!(ObjectId::from_lower_hex(&id.to_hex()), Some(id));
        assert_eq!(ObjectId::from_lower_hex(&id.to_hex().to_uppercase()), None);
        let upper = format!("sha256:{}", id.to_hex().to_uppercase());
        assert_eq!(ObjectId::from_prefixed(&upper), Ok(id));
        assert!(matches!(
            ObjectId::from_prefixed(&id.to_hex()),
            Err(ParseDigestError::NoAlgorithm(_))
        ));
    }
}

#[cfg(test)]
mod object_key_tests {
    use super::*;
    use proptest::prelude::*;

    fn key(executable: bool) -> ObjectKey {
        ObjectKey {
            id: ObjectId::of(b"abc"),
            executable,
        }
    }

    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn names_paths_and_modes() {
        let plain = key(false);
        assert_eq!(plain.name(), ABC);
        assert_eq!(plain.file_name(), &ABC[2..]);
        assert_eq!(plain.rel_path(), format!("ba/{}", &ABC[2..]));
        assert_eq!(plain.mode(), 0o444);

        let exec = key(true);
        assert_eq!(exec.name(), format!("{ABC}.x"));
        assert_eq!(exec.file_name(), format!("{}.x", &ABC[2..]));
        assert_eq!(exec.rel_path(), format!("ba/{}.x", &ABC[2..]));
        assert_eq!(exec.mode(), 0o555);
        assert_ne!(plain, exec, "the same bytes at two modes are two objects");
    }

    #[test]
    fn from_parts_reads_back_both_kinds() {
        for k in [key(false), key(true)] {
            assert_eq!(ObjectKey::from_parts("ba", &k.file_name()), Some(k));
        }
    }

    #[test]
    fn from_parts_refuses_what_is_not_an_object_name() {
        let rest = &ABC[2..];
        let refused = [
            ("ba", format!("{rest}.X")),
            ("ba", format!("{rest}.y")),
            ("ba", format!("{rest}.x.x")),
            ("ba", format!("{rest}x")),
            ("ba", format!("{rest}.")),
            ("ba", rest.to_uppercase()),
            ("ba", rest[1..].to_string()),
            ("ba", format!("{rest}0")),
            ("ba", format!("{}g", &rest[1..])),
            ("ba", String::new()),
            ("ba", ".x".to_string()),
            ("b", format!("a{rest}")),
            ("bac", rest[1..].to_string()),
            ("", ABC.to_string()),
            ("ba", format!("../{rest}")),
            ("ba", format!("{rest}.tmp")),
            ("BA", rest.to_string()),
            ("Ba", rest.to_string()),
        ];
        for (shard, name) in refused {
            assert_eq!(
                ObjectKey::from_parts(shard, &name),
                None,
                "accepted {shard}/{name}"
            );
        }
    }

    proptest! {
        #[test]
        fn every_key_reads_back_from_its_path(bytes in any::<[u8; 32]>(), executable in any::<bool>()) {
            let k = ObjectKey { id: ObjectId::from_bytes(bytes), executable };
            let rel = k.rel_path();
            let (shard, file) = rel.split_once('/').unwrap();
            prop_assert_eq!(shard.len(), 2);
            prop_assert_eq!(file, k.file_name());
            prop_assert_eq!(format!("{shard}{file}"), k.name());
            prop_assert_eq!(ObjectKey::from_parts(shard, file), Some(k));
        }
    }
}
