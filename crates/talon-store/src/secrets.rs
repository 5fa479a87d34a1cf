//! Secrets at rest. A wrong key is a clear error at unlock time (a key-check value is stored
//! encrypted), and a corrupted secret fails alone, naming itself.

use std::path::Path;

use sqlx::Row;

use crate::{EncryptionKey, Store, StoreError, now_ms};

const KEY_CHECK: &str = "key_check";
const KEY_CHECK_PLAINTEXT: &[u8] = b"talon key check v1";

fn encode_check(key: &EncryptionKey) -> Result<String, StoreError> {
    let (nonce, ct) = key.seal(KEY_CHECK.as_bytes(), KEY_CHECK_PLAINTEXT)?;
    Ok(format!("{}:{}", hex::encode(nonce), hex::encode(ct)))
}

fn verify_check(key: &EncryptionKey, stored: &str) -> bool {
    let Some((nonce, ct)) = stored.split_once(':') else {
        return false;
    };
    match (hex::decode(nonce), hex::decode(ct)) {
        (Ok(nonce), Ok(ct)) => key
            .open(KEY_CHECK.as_bytes(), &nonce, &ct)
            .is_ok_and(|p| p == KEY_CHECK_PLAINTEXT),
        _ => false,
    }
}

impl Store {
    /// Attaches the encryption key after checking it is the one this database was created with
    /// (the first key to unlock a database is recorded; concurrent first starts agree on one).
    pub async fn unlock(mut self, key: EncryptionKey) -> Result<Self, StoreError> {
        let check = encode_check(&key)?;
        sqlx::query(
            "INSERT INTO talon_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        )
        .bind(KEY_CHECK)
        .bind(&check)
        .execute(self.pool())
        .await?;
        let stored: String = sqlx::query("SELECT value FROM talon_meta WHERE key = $1")
            .bind(KEY_CHECK)
            .fetch_one(self.pool())
            .await?
            .try_get("value")?;
        if !verify_check(&key, &stored) {
            return Err(StoreError::Key(
                "the encryption key does not match the one this database's secrets were encrypted with; set TALON_ENCRYPTION_KEY (or the data directory's encryption.key) to the original key".into(),
            ));
        }
        self.key = Some(key);
        Ok(self)
    }

    fn key(&self) -> Result<&EncryptionKey, StoreError> {
        self.key
            .as_ref()
            .ok_or_else(|| StoreError::Key("secrets are locked: no encryption key was provided, so nothing is stored in plaintext".into()))
    }

    /// Stores (or replaces) a secret, encrypted.
    pub async fn set_secret(&self, name: &str, value: &str) -> Result<(), StoreError> {
        self.put_secret(self.pool(), name, value).await
    }

    /// [`Store::set_secret`] on `executor`, so a module can write a secret in the same
    /// transaction as the rows that refer to it.
    pub(crate) async fn put_secret<'e, E>(
        &self,
        executor: E,
        name: &str,
        value: &str,
    ) -> Result<(), StoreError>
    where
        E: sqlx::Executor<'e, Database = sqlx::Any>,
    {
        if name.is_empty() || name.len() > 256 {
            return Err(StoreError::Invalid {
                what: "secret name",
                reason: "must be 1-256 characters".into(),
            });
        }
        let (nonce, ct) = self.key()?.seal(name.as_bytes(), value.as_bytes())?;
        sqlx::query(
            "INSERT INTO secrets (name, nonce, ciphertext, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(nonce.to_vec())
        .bind(ct)
        .bind(now_ms())
        .execute(executor)
        .await?;
        Ok(())
    }

    /// A secret's value, if it exists.
    pub async fn secret(&self, name: &str) -> Result<Option<String>, StoreError> {
        let key = self.key()?;
        let row = sqlx::query("SELECT nonce, ciphertext FROM secrets WHERE name = $1")
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let nonce: Vec<u8> = row.try_get("nonce")?;
        let ct: Vec<u8> = row.try_get("ciphertext")?;
        let plain =
            key.open(name.as_bytes(), &nonce, &ct)
                .map_err(|reason| StoreError::Decrypt {
                    name: name.to_string(),
                    reason,
                })?;
        String::from_utf8(plain)
            .map(Some)
            .map_err(|_| StoreError::Decrypt {
                name: name.to_string(),
                reason: "not UTF-8".into(),
            })
    }

    /// The JSON value in secret `name`, decrypted; its default when there is none and none is
    /// `expected` (a definition listing no variable names). A secret that is expected and
    /// missing, or does not hold the expected JSON, is an error naming it, never an empty
    /// value: what it configures must not run half-configured.
    pub(crate) async fn json_secret<T: serde::de::DeserializeOwned + Default>(
        &self,
        name: String,
        expected: bool,
    ) -> Result<T, StoreError> {
        match self.secret(&name).await? {
            Some(text) => serde_json::from_str(&text).map_err(|e| StoreError::Decrypt {
                name,
                reason: format!("not the expected JSON: {e}"),
            }),
            None if !expected => Ok(T::default()),
            None => Err(StoreError::NotFound {
                what: "secret",
                key: name,
            }),
        }
    }

    /// Names of all secrets, sorted.
    pub async fn secret_names(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT name FROM secrets ORDER BY name")
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("name").map_err(StoreError::from))
            .collect()
    }

    /// Deletes a secret; returns whether it existed.
    pub async fn delete_secret(&self, name: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM secrets WHERE name = $1")
            .bind(name)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Every secret value that decrypts (for the scrubber), with the names of those that do not.
    /// A credentialed binary's environment (one secret holding a JSON object) yields each of its
    /// values, since those are what a command's output could echo.
    pub async fn secret_values(
        &self,
    ) -> Result<(Vec<String>, Vec<(String, StoreError)>), StoreError> {
        let mut values = Vec::new();
        let mut broken = Vec::new();
        for name in self.secret_names().await? {
            match self.secret(&name).await {
                // Not a credential: scrubbing it would only hide the server's challenge.
                Ok(Some(_)) if crate::mcp_servers::is_oauth_note(&name) => {}
                Ok(Some(v)) if crate::mcp_servers::is_oauth_secret(&name) => {
                    // Only the tokens: the rest (client id, issuer URL, "Bearer") is not secret
                    // and would be scrubbed from every output.
                    values.extend(crate::fields::oauth_tokens(&v));
                    values.push(v);
                }
                Ok(Some(v))
                    if crate::cli_credentials::is_env_secret(&name)
                        || crate::mcp_servers::is_server_secret(&name)
                        || crate::custom_tools::is_custom_tool_secret(&name) =>
                {
                    values.extend(crate::fields::json_strings(&v));
                    values.push(v);
                }
                Ok(Some(v)) => values.push(v),
                Ok(None) => {}
                Err(e) => broken.push((name, e)),
            }
        }
        Ok((values, broken))
    }

    /// Rotates the key kept in `data_dir` (`talon secrets rotate-key`): a new key is written
    /// first beside the old one (`encryption.key.new`), so a crash never leaves secrets
    /// encrypted with a key that exists nowhere; every secret is re-encrypted with it; then it
    /// replaces the key file. When the key comes from [`crate::KEY_ENV`] the new one is left
    /// beside it for the operator to put there ([`RotatedKey::staged`]).
    pub async fn rotate_key_file(&mut self, data_dir: &Path) -> Result<RotatedKey, StoreError> {
        let key_file = data_dir.join(crate::KEY_FILE);
        let from_env = std::env::var(crate::KEY_ENV).is_ok_and(|v| !v.is_empty());
        let new = EncryptionKey::generate();
        let staged = key_file.with_extension("key.new");
        let _ = std::fs::remove_file(&staged);
        new.write_new(&staged)?;
        let count = match self.rotate_key(new).await {
            Ok(n) => n,
            Err(e) => {
                let _ = std::fs::remove_file(&staged);
                return Err(e);
            }
        };
        if from_env {
            return Ok(RotatedKey {
                count,
                key_file: staged,
                staged: true,
            });
        }
        std::fs::rename(&staged, &key_file).map_err(|source| StoreError::Io {
            path: format!(
                "{} (the secrets were re-encrypted; the new key is in {})",
                key_file.display(),
                staged.display()
            ),
            source,
        })?;
        Ok(RotatedKey {
            count,
            key_file,
            staged: false,
        })
    }

    /// Re-encrypts every secret and the key check with `new` in one transaction; on success the
    /// store uses `new`. Returns how many secrets were re-encrypted.
    pub async fn rotate_key(&mut self, new: EncryptionKey) -> Result<usize, StoreError> {
        let old = self.key()?.clone();
        let mut tx = self.pool().begin().await?;
        let rows = sqlx::query("SELECT name, nonce, ciphertext FROM secrets ORDER BY name")
            .fetch_all(&mut *tx)
            .await?;
        let mut count = 0;
        for row in &rows {
            let name: String = row.try_get("name")?;
            let nonce: Vec<u8> = row.try_get("nonce")?;
            let ct: Vec<u8> = row.try_get("ciphertext")?;
            let plain =
                old.open(name.as_bytes(), &nonce, &ct)
                    .map_err(|reason| StoreError::Decrypt {
                        name: name.clone(),
                        reason,
                    })?;
            let (nonce, ct) = new.seal(name.as_bytes(), &plain)?;
            sqlx::query(
                "UPDATE secrets SET nonce = $1, ciphertext = $2, updated_at = $3 WHERE name = $4",
            )
            .bind(nonce.to_vec())
            .bind(ct)
            .bind(now_ms())
            .bind(&name)
            .execute(&mut *tx)
            .await?;
            count += 1;
        }
        sqlx::query("UPDATE talon_meta SET value = $1 WHERE key = $2")
            .bind(encode_check(&new)?)
            .bind(KEY_CHECK)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.key = Some(new);
        Ok(count)
    }
}

/// A rotated key: how many secrets were re-encrypted and where the new key is.
#[derive(Debug)]
pub struct RotatedKey {
    pub count: usize,
    pub key_file: std::path::PathBuf,
    /// The key comes from the environment: the new one waits in `key_file` to be put there.
    pub staged: bool,
}
