//! ed25519 key files: a private key as PKCS#8 PEM (mode 0600, the owner's
//! alone), its public key beside it as SubjectPublicKeyInfo PEM (`FILE.pub`).
//!
//! A private key file that another user owns, or that its group or others
//! may read or write, is refused before it is read, as ssh refuses one: a
//! key others can read signs for them too. No byte of a private key is ever
//! printed, logged or written anywhere but its own file.
//!
//! Every key file, private or public, is read through `open_key`: one
//! that is not a regular file (a FIFO, a device, a directory, a socket, or
//! a symlink to one) is refused at once, before any open that could block,
//! and the file opened must be the regular file looked at.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};

use super::SignError;
use crate::digest::KeyId;

/// The most bytes a key file may hold: a PEM key is a few hundred.
const MAX_KEY_BYTES: u64 = 16 * 1024;

/// A private key, loaded from a file that only its owner may read.
pub struct PrivateKey {
    signing: SigningKey,
    public: PublicKey,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key's bytes: only whose it is.
        write!(f, "PrivateKey({})", self.public.id)
    }
}

/// A public key, and its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    verifying: VerifyingKey,
    id: KeyId,
}

/// A key pair just written: where, and the key's id.
#[derive(Debug, serde::Serialize)]
pub struct GeneratedKey {
    /// The private key file.
    pub private_key: PathBuf,
    /// The public key file.
    pub public_key: PathBuf,
    /// The key's id: the SHA-256 of its public key's DER bytes.
    pub keyid: KeyId,
}

/// The public key file beside a private key file: `FILE.pub`.
pub fn public_path(private: &Path) -> PathBuf {
    let mut name = private.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Makes a new key pair: FILE (PKCS#8 PEM, mode 0600) and FILE.pub
/// (SubjectPublicKeyInfo PEM, mode 0644). Refuses to replace either file.
pub fn generate(private: &Path) -> Result<GeneratedKey, SignError> {
    let mut seed = [0u8; 32];
    fill_random(&mut seed).map_err(|source| SignError::Random { source })?;
    let signing = SigningKey::from_bytes(&seed);
    seed.fill(0);
    let public = PublicKey::of(signing.verifying_key());
    let pem = signing
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| SignError::Encode {
            path: private.to_path_buf(),
            reason: e.to_string(),
        })?;
    let public_pem = public.to_pem();
    let public_file = public_path(private);
    for path in [private, public_file.as_path()] {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(SignError::KeyExists {
                path: path.to_path_buf(),
            });
        }
    }
    write_new(private, pem.as_bytes(), 0o600)?;
    if let Err(e) = write_new(&public_file, public_pem.as_bytes(), 0o644) {
        let _ = std::fs::remove_file(private);
        return Err(e);
    }
    Ok(GeneratedKey {
        private_key: private.to_path_buf(),
        public_key: public_file,
        keyid: public.id,
    })
}

impl PrivateKey {
    /// Loads a private key file, refusing one another user owns or that
    /// others may read or write.
    pub fn load(path: &Path) -> Result<PrivateKey, SignError> {
        let read = |source| SignError::ReadKey {
            path: path.to_path_buf(),
            source,
        };
        let file = open_key(path)?;
        let meta = file.metadata().map_err(read)?;
        let uid = rustix::process::geteuid().as_raw();
        if meta.uid() != uid {
            return Err(SignError::KeyNotOwned {
                path: path.to_path_buf(),
                owner: meta.uid(),
            });
        }
        if meta.mode() & 0o077 != 0 {
            return Err(SignError::KeyTooOpen {
                path: path.to_path_buf(),
                mode: meta.mode() & 0o777,
            });
        }
        let text = read_bounded(file, path, MAX_KEY_BYTES)?;
        let signing = SigningKey::from_pkcs8_pem(&text).map_err(|_| SignError::NotAKey {
            path: path.to_path_buf(),
            what: "an ed25519 private key (PKCS#8 PEM)",
        })?;
        let public = PublicKey::of(signing.verifying_key());
        Ok(PrivateKey { signing, public })
    }

    /// The public half.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.signing.sign(message).to_bytes()
    }
}

impl PublicKey {
    fn of(verifying: VerifyingKey) -> PublicKey {
        let id = verifying
            .to_public_key_der()
            .map(|der| KeyId::of(der.as_bytes()))
            // An ed25519 key always encodes; the fallback names the raw key.
            .unwrap_or_else(|_| KeyId::of(verifying.as_bytes()));
        PublicKey { verifying, id }
    }

    /// Loads a public key file (SubjectPublicKeyInfo PEM).
    pub fn load(path: &Path) -> Result<PublicKey, SignError> {
        let file = open_key(path)?;
        let text = read_bounded(file, path, MAX_KEY_BYTES)?;
        Self::from_pem(&text).ok_or_else(|| SignError::NotAKey {
            path: path.to_path_buf(),
            what: "an ed25519 public key (SubjectPublicKeyInfo PEM)",
        })
    }

    /// The key a SubjectPublicKeyInfo PEM text holds, if it holds one.
    pub fn from_pem(text: &str) -> Option<PublicKey> {
        VerifyingKey::from_public_key_pem(text.trim())
            .ok()
            .map(PublicKey::of)
    }

    /// The key as SubjectPublicKeyInfo PEM.
    pub fn to_pem(&self) -> String {
        self.verifying
            .to_public_key_pem(LineEnding::LF)
            .unwrap_or_default()
    }

    /// The key's id: the SHA-256 of its DER bytes.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// Whether `signature` is this key's over `message` (strict: no
    /// malleable or small-order forms).
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let Ok(bytes) = <[u8; 64]>::try_from(signature) else {
            return false;
        };
        self.verifying
            .verify_strict(message, &ed25519_dalek::Signature::from_bytes(&bytes))
            .is_ok()
    }
}

/// The public keys trusted: each `--trusted-key PUB` file, and every key of
/// each `--trusted-keys FILE` (public keys in PEM, one after another, as an
/// ssh `authorized_keys` lists keys; lines outside the PEM blocks are
/// comments). At least one key, or none given at all.
pub fn trusted_keys(keys: &[PathBuf], lists: &[PathBuf]) -> Result<Vec<PublicKey>, SignError> {
    let mut out = Vec::new();
    for path in keys {
        out.push(PublicKey::load(path)?);
    }
    for path in lists {
        let file = open_key(path)?;
        let text = read_bounded(file, path, MAX_KEY_BYTES * 64)?;
        let blocks = pem_blocks(&text);
        if blocks.is_empty() {
            return Err(SignError::NotAKey {
                path: path.clone(),
                what: "a list of ed25519 public keys (SubjectPublicKeyInfo PEM)",
            });
        }
        for block in blocks {
            out.push(
                PublicKey::from_pem(block).ok_or_else(|| SignError::NotAKey {
                    path: path.clone(),
                    what: "a list of ed25519 public keys (SubjectPublicKeyInfo PEM)",
                })?,
            );
        }
    }
    Ok(out)
}

/// The PEM blocks of `text`, each from its `-----BEGIN` line to its
/// `-----END` line.
fn pem_blocks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start..];
        let Some(end) = after.find("-----END ") else {
            break;
        };
        let close = after[end..].find('\n').map_or(after.len(), |i| end + i + 1);
        out.push(&after[..close]);
        rest = &after[close..];
    }
    out
}

/// Opens a key file to read through [`crate::fsutil::open_regular`]: a
/// path that is not a regular file is refused before any open that could
/// block.
fn open_key(path: &Path) -> Result<std::fs::File, SignError> {
    crate::fsutil::open_regular(path).map_err(|e| match e {
        crate::fsutil::NotOpened::Io(source) => SignError::ReadKey {
            path: path.to_path_buf(),
            source,
        },
        crate::fsutil::NotOpened::NotRegular(what) => SignError::NotRegular {
            path: path.to_path_buf(),
            what,
        },
    })
}

/// Reads a key file's text, at most `max` bytes.
fn read_bounded(file: std::fs::File, path: &Path, max: u64) -> Result<String, SignError> {
    use std::io::Read;
    let mut text = String::new();
    file.take(max)
        .read_to_string(&mut text)
        .map_err(|source| SignError::ReadKey {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(text)
}

/// Writes a new file at `mode`, whatever the umask, refusing to replace one.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), SignError> {
    use std::os::unix::fs::PermissionsExt;
    crate::fsutil::write_new(path, bytes, mode)
        .and_then(|file| {
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            file.sync_all()
        })
        .map_err(|source| SignError::WriteKey {
            path: path.to_path_buf(),
            source,
        })
}

/// Fills `buf` from the system's random source.
fn fill_random(buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_generated_key_signs_and_its_public_key_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k");
        let made = generate(&file).unwrap();
        assert_eq!(made.public_key, dir.path().join("k.pub"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&made.public_key), 0o644);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("-----BEGIN PRIVATE KEY-----"), "{text}");
        let key = PrivateKey::load(&file).unwrap();
        let public = PublicKey::load(&made.public_key).unwrap();
        assert_eq!(public.id(), made.keyid);
        assert_eq!(key.public(), &public);
        let sig = key.sign(b"message");
        assert!(public.verifies(b"message", &sig));
        assert!(!public.verifies(b"massage", &sig));
        assert!(!public.verifies(b"message", &sig[..63]));
        assert!(!format!("{key:?}").contains(&text[30..60]));
        assert!(matches!(generate(&file), Err(SignError::KeyExists { .. })));
    }

    #[test]
    fn a_private_key_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k");
        generate(&file).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = PrivateKey::load(&file).unwrap_err();
            assert!(matches!(err, SignError::KeyTooOpen { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(&file.display().to_string()) && text.contains("chmod 600"),
                "{text}"
            );
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(PrivateKey::load(&file).is_ok());
    }

    #[test]
    fn trusted_keys_come_from_files_and_lists() {
        let dir = tempfile::tempdir().unwrap();
        let mut ids = Vec::new();
        for name in ["a", "b", "c"] {
            ids.push(generate(&dir.path().join(name)).unwrap().keyid);
        }
        let list = dir.path().join("trusted");
        let text = format!(
            "# the release team\n{}\n# the stager\n{}",
            std::fs::read_to_string(dir.path().join("b.pub")).unwrap(),
            std::fs::read_to_string(dir.path().join("c.pub")).unwrap()
        );
        std::fs::write(&list, text).unwrap();
        let keys = trusted_keys(&[dir.path().join("a.pub")], std::slice::from_ref(&list)).unwrap();
        assert_eq!(keys.iter().map(PublicKey::id).collect::<Vec<_>>(), ids);
        std::fs::write(&list, "no keys here\n").unwrap();
        assert!(matches!(
            trusted_keys(&[], &[list]),
            Err(SignError::NotAKey { .. })
        ));
        // A private key is no public key.
        assert!(matches!(
            trusted_keys(&[dir.path().join("a")], &[]),
            Err(SignError::NotAKey { .. })
        ));
    }

    #[test]
    fn a_key_path_that_is_no_regular_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        for (path, what) in [
            (fifo.as_path(), "a FIFO"),
            (link.as_path(), "a FIFO"),
            (dir.path(), "a directory"),
            (socket.as_path(), "a socket"),
            (Path::new("/dev/null"), "a character device"),
        ] {
            for err in [
                PrivateKey::load(path).unwrap_err(),
                PublicKey::load(path).unwrap_err(),
                trusted_keys(&[], &[path.to_path_buf()]).unwrap_err(),
            ] {
                assert!(matches!(err, SignError::NotRegular { .. }), "{err}");
                let text = err.to_string();
                assert!(
                    text.contains(&path.display().to_string())
                        && text.contains(what)
                        && text.contains("must be a regular file"),
                    "{text}"
                );
            }
        }
        // A symlink to a key is followed.
        let key = dir.path().join("k");
        generate(&key).unwrap();
        let to_key = dir.path().join("to-key");
        std::os::unix::fs::symlink(&key, &to_key).unwrap();
        assert!(PrivateKey::load(&to_key).is_ok());
    }

    #[test]
    fn a_file_that_is_no_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k");
        std::fs::write(&file, "not a key\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            PrivateKey::load(&file),
            Err(SignError::NotAKey { .. })
        ));
        assert!(matches!(
            PublicKey::load(&file),
            Err(SignError::NotAKey { .. })
        ));
    }
}
