//! The encryption key for secrets at rest: AES-256-GCM, a random 96-bit nonce per value, and the
//! secret's name as associated data (a ciphertext cannot be moved to another name).
//!
//! The key comes from `TALON_ENCRYPTION_KEY` (64 hex digits, base64 of 32 bytes, or 32 raw
//! characters — the forms GoClaw accepts) or from `encryption.key` in the data directory, which is
//! generated with mode 0600 on first start. Talon never stores a secret without a key (GoClaw
//! silently stored plaintext when its key was unset).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use base64::Engine;
use rand::RngCore;

use crate::StoreError;

/// Environment variable holding the key.
pub const KEY_ENV: &str = "TALON_ENCRYPTION_KEY";
/// Key file name in the data directory.
pub const KEY_FILE: &str = "encryption.key";

/// A 256-bit key. Its `Debug` output never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct EncryptionKey([u8; 32]);

impl std::fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncryptionKey(***)")
    }
}

/// Where the key came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Env,
    File(PathBuf),
    Generated(PathBuf),
}

fn random_suffix() -> [u8; 8] {
    let mut bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

impl EncryptionKey {
    /// Parses 64 hex digits, base64 of 32 bytes, or exactly 32 raw bytes.
    pub fn parse(raw: &str) -> Result<Self, StoreError> {
        let raw = raw.trim();
        let bytes = if raw.len() == 64 && raw.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(raw).ok()
        } else if raw.len() == 32 {
            Some(raw.as_bytes().to_vec())
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(raw)
                .ok()
                .filter(|b| b.len() == 32)
        };
        match bytes.and_then(|b| <[u8; 32]>::try_from(b).ok()) {
            Some(key) => Ok(Self(key)),
            None => Err(StoreError::Key(format!(
                "{KEY_ENV} must be a 32-byte key: 64 hex digits, base64 of 32 bytes, or 32 raw characters (generate one with `openssl rand -hex 32`)"
            ))),
        }
    }

    /// A fresh random key.
    pub fn generate() -> Self {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        Self(key)
    }

    /// The key as 64 hex digits (the key file's format).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The key from the environment, else the data directory's key file, else a new key written
    /// there with mode 0600.
    pub fn load_or_create(data_dir: &Path) -> Result<(Self, KeySource), StoreError> {
        if let Ok(raw) = std::env::var(KEY_ENV)
            && !raw.is_empty()
        {
            return Ok((Self::parse(&raw)?, KeySource::Env));
        }
        let path = data_dir.join(KEY_FILE);
        match std::fs::read_to_string(&path) {
            Ok(raw) => {
                let key = Self::parse(&raw).map_err(|_| {
                    StoreError::Key(format!(
                        "{} does not hold a valid key (64 hex digits)",
                        path.display()
                    ))
                })?;
                Ok((key, KeySource::File(path)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::generate();
                match key.write_new(&path) {
                    Ok(()) => Ok((key, KeySource::Generated(path))),
                    // Another process created the key first: use theirs.
                    Err(StoreError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::AlreadyExists =>
                    {
                        Self::load_or_create(data_dir)
                    }
                    Err(e) => Err(e),
                }
            }
            Err(source) => Err(StoreError::Io {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Writes the key to a new file with mode 0600 (refuses to overwrite).
    ///
    /// The key is written and synced under a temporary name, then linked into place, so another
    /// process starting at the same moment sees either no key file or a complete one, never an
    /// empty file it would reject. When two processes race, the second gets
    /// [`std::io::ErrorKind::AlreadyExists`] and [`EncryptionKey::load_or_create`] reads the winner's key.
    pub fn write_new(&self, path: &Path) -> Result<(), StoreError> {
        let io = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        let parent = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io)?;
        let name = path.file_name().map_or_else(
            || std::ffi::OsString::from("key"),
            std::ffi::OsStr::to_os_string,
        );
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(&name);
        temp_name.push(format!(
            ".{}.{}.tmp",
            std::process::id(),
            hex::encode(random_suffix())
        ));
        let temp = parent.join(temp_name);
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            file.write_all(format!("{}\n", self.to_hex()).as_bytes())?;
            file.sync_all()?;
            std::fs::hard_link(&temp, path)
        })();
        let _ = std::fs::remove_file(&temp);
        written.map_err(io)
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(&self.0.into())
    }

    /// Encrypts `plaintext`, binding it to `aad`; returns (nonce, ciphertext).
    pub(crate) fn seal(
        &self,
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<([u8; 12], Vec<u8>), StoreError> {
        let mut nonce = [0u8; 12];
        rand::rng().fill_bytes(&mut nonce);
        let ciphertext = self
            .cipher()
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .map_err(|_| StoreError::Key("encryption failed".into()))?;
        Ok((nonce, ciphertext))
    }

    /// Decrypts; fails if the key, the nonce, the ciphertext or `aad` do not match.
    pub(crate) fn open(
        &self,
        aad: &[u8],
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> Result<Vec<u8>, String> {
        if nonce.len() != 12 {
            return Err(format!(
                "stored nonce has {} bytes, expected 12",
                nonce.len()
            ));
        }
        self.cipher()
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad,
                },
            )
            .map_err(|_| "authentication failed: wrong key or corrupted ciphertext".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_forms() {
        let hex_key = "00".repeat(32);
        assert_eq!(EncryptionKey::parse(&hex_key).expect("hex").0, [0u8; 32]);
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(EncryptionKey::parse(&b64).expect("b64").0, [7u8; 32]);
        assert_eq!(
            EncryptionKey::parse(&"k".repeat(32)).expect("raw").0,
            [b'k'; 32]
        );
        let err = EncryptionKey::parse("short").expect_err("bad");
        assert!(err.to_string().contains("64 hex digits"), "{err}");
        assert_eq!(
            format!("{:?}", EncryptionKey::generate()),
            "EncryptionKey(***)"
        );
    }

    #[test]
    fn seal_and_open_bind_the_name() {
        let key = EncryptionKey::generate();
        let (nonce, ct) = key.seal(b"db_password", b"hunter2").expect("seal");
        assert_eq!(
            key.open(b"db_password", &nonce, &ct).expect("open"),
            b"hunter2"
        );
        assert!(
            key.open(b"other_name", &nonce, &ct).is_err(),
            "ciphertext bound to its name"
        );
        assert!(
            EncryptionKey::generate()
                .open(b"db_password", &nonce, &ct)
                .is_err(),
            "wrong key"
        );
        let (nonce2, _) = key.seal(b"db_password", b"hunter2").expect("seal");
        assert_ne!(nonce, nonce2, "fresh nonce per value");
    }

    #[test]
    fn generated_key_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tmp");
        let (key, source) = EncryptionKey::load_or_create(dir.path()).expect("create");
        assert!(matches!(source, KeySource::Generated(_)));
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .expect("file")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let (again, source) = EncryptionKey::load_or_create(dir.path()).expect("load");
        assert_eq!(key, again);
        assert!(matches!(source, KeySource::File(_)));
    }
}
