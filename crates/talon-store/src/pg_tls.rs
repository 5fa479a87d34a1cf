//! TLS settings of a PostgreSQL connection, read as sqlx reads them (URL query parameters over
//! the `PGSSL*` environment variables), so that a failed connect can say what failed: sqlx
//! reports a handshake's certificate errors and unreadable certificate files as bare I/O errors
//! ("error communicating with database: No such file or directory").

use std::error::Error;
use std::fmt;
use std::io;
use std::str::FromStr;

use sqlx::postgres::PgSslMode;

/// The TLS settings a PostgreSQL URL connects with.
#[derive(Debug, Clone)]
pub(crate) struct TlsSettings {
    mode: PgSslMode,
    root_cert: Option<String>,
    client_cert: Option<String>,
    client_key: Option<String>,
}

impl TlsSettings {
    /// The settings of `url`, with the process environment as fallback.
    pub(crate) fn of(url: &str) -> Self {
        Self::parse(url, |name| std::env::var(name).ok())
    }

    fn parse(url: &str, env: impl Fn(&str) -> Option<String>) -> Self {
        let mut settings = Self {
            mode: env("PGSSLMODE")
                .and_then(|mode| PgSslMode::from_str(&mode).ok())
                .unwrap_or_default(),
            root_cert: env("PGSSLROOTCERT"),
            client_cert: env("PGSSLCERT"),
            client_key: env("PGSSLKEY"),
        };
        let query = url
            .split_once('?')
            .map_or("", |(_, query)| query.split('#').next().unwrap_or(""));
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value);
            match decode(key).as_str() {
                "sslmode" | "ssl-mode" => {
                    // An invalid mode fails parsing the URL before any connect.
                    if let Ok(mode) = PgSslMode::from_str(&value) {
                        settings.mode = mode;
                    }
                }
                "sslrootcert" | "ssl-root-cert" | "ssl-ca" => settings.root_cert = Some(value),
                "sslcert" | "ssl-cert" => settings.client_cert = Some(value),
                "sslkey" | "ssl-key" => settings.client_key = Some(value),
                _ => {}
            }
        }
        settings
    }

    fn mode_name(&self) -> &'static str {
        match self.mode {
            PgSslMode::Disable => "disable",
            PgSslMode::Allow => "allow",
            PgSslMode::Prefer => "prefer",
            PgSslMode::Require => "require",
            PgSslMode::VerifyCa => "verify-ca",
            PgSslMode::VerifyFull => "verify-full",
        }
    }

    /// The certificate and key files a TLS handshake in this mode reads, as
    /// `(parameter, what, path)`. Inline PEM (possible through the environment) is no file.
    fn files(&self) -> Vec<(&'static str, &'static str, &str)> {
        let verifies = matches!(self.mode, PgSslMode::VerifyCa | PgSslMode::VerifyFull);
        let tls = !matches!(self.mode, PgSslMode::Disable | PgSslMode::Allow);
        [
            (
                verifies,
                "sslrootcert",
                "root certificate",
                self.root_cert.as_deref(),
            ),
            (
                tls,
                "sslcert",
                "client certificate",
                self.client_cert.as_deref(),
            ),
            (tls, "sslkey", "client key", self.client_key.as_deref()),
        ]
        .into_iter()
        .filter_map(|(used, param, what, path)| match path {
            Some(path) if used && !path.trim_start().starts_with("-----BEGIN") => {
                Some((param, what, path))
            }
            _ => None,
        })
        .collect()
    }

    /// Restates a connect error sqlx reports as bare I/O, naming what failed; the original
    /// error stays the source. Other errors pass through unchanged.
    pub(crate) async fn explain(&self, error: sqlx::Error) -> sqlx::Error {
        let sqlx::Error::Io(io) = error else {
            return error;
        };
        for (param, what, path) in self.files() {
            if let Err(cause) = tokio::fs::read(path).await
                && cause.kind() == io.kind()
            {
                return sqlx::Error::Configuration(Box::new(Explained {
                    message: format!("cannot read the TLS {what} file {path:?} ({param}): {cause}"),
                    source: io,
                }));
            }
        }
        let Some(inner) = io
            .get_ref()
            .filter(|_| io.kind() == io::ErrorKind::InvalidData)
        else {
            return sqlx::Error::Io(io);
        };
        let inner = inner.to_string();
        if inner.starts_with("invalid peer certificate") {
            let hint = if inner.contains("not valid for name") {
                " (connect by a host name the certificate lists, or use sslmode=verify-ca to \
                 check the certificate's CA but not its names)"
                    .to_string()
            } else if inner.contains("UnknownIssuer") {
                match &self.root_cert {
                    Some(path) => format!(
                        " (the server's certificate is signed neither by a CA in {path:?} \
                         (sslrootcert) nor by a public root CA)"
                    ),
                    None => " (the server's certificate is not signed by a public root CA; set \
                             sslrootcert to the file of the CA that signed it)"
                        .to_string(),
                }
            } else {
                String::new()
            };
            sqlx::Error::Tls(Box::new(Explained {
                message: format!(
                    "certificate verification failed (sslmode={}): {inner}{hint}",
                    self.mode_name()
                ),
                source: io,
            }))
        } else if matches!(
            self.mode,
            PgSslMode::Require | PgSslMode::VerifyCa | PgSslMode::VerifyFull
        ) {
            // rustls reports every handshake failure as invalid data; only claim it where the
            // session cannot have gone on in plain text.
            sqlx::Error::Tls(Box::new(Explained {
                message: format!(
                    "TLS handshake failed (sslmode={}): {inner}",
                    self.mode_name()
                ),
                source: io,
            }))
        } else {
            sqlx::Error::Io(io)
        }
    }
}

/// An error restated with what failed.
#[derive(Debug)]
struct Explained {
    message: String,
    source: io::Error,
}

impl fmt::Display for Explained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for Explained {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}

/// Decodes a query component as `application/x-www-form-urlencoded`, as sqlx's URL parser does.
fn decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            b'+' => out.push(b' '),
            b'%' => match (
                bytes.get(i).copied().and_then(hex),
                bytes.get(i + 1).copied().and_then(hex),
            ) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn query_parameters_are_read_like_sqlx() {
        let s = TlsSettings::parse(
            "postgres://u@h/db?application_name=x&ssl-mode=Verify-Full&sslrootcert=%2Ftmp%2Fmy+ca.pem&sslkey=/k#frag",
            no_env,
        );
        assert!(matches!(s.mode, PgSslMode::VerifyFull));
        assert_eq!(s.root_cert.as_deref(), Some("/tmp/my ca.pem"));
        assert_eq!(s.client_key.as_deref(), Some("/k"));
        assert_eq!(
            s.files(),
            vec![
                ("sslrootcert", "root certificate", "/tmp/my ca.pem"),
                ("sslkey", "client key", "/k")
            ]
        );
    }

    #[test]
    fn the_url_overrides_the_environment() {
        let env = |name: &str| match name {
            "PGSSLMODE" => Some("verify-ca".to_string()),
            "PGSSLROOTCERT" => Some("/env/ca.pem".to_string()),
            "PGSSLCERT" => Some("-----BEGIN CERTIFICATE-----\n...".to_string()),
            _ => None,
        };
        let s = TlsSettings::parse("postgres://u@h/db", env);
        assert!(matches!(s.mode, PgSslMode::VerifyCa));
        assert_eq!(
            s.files(),
            vec![("sslrootcert", "root certificate", "/env/ca.pem")],
            "inline PEM is no file"
        );
        let s = TlsSettings::parse(
            "postgres://u@h/db?sslmode=require&sslrootcert=/url.pem",
            env,
        );
        assert_eq!(s.root_cert.as_deref(), Some("/url.pem"));
        assert!(s.files().is_empty(), "require reads no root certificate");
    }

    #[test]
    fn the_default_mode_is_prefer() {
        assert!(matches!(
            TlsSettings::parse("postgres://h/db", no_env).mode,
            PgSslMode::Prefer
        ));
    }

    #[test]
    fn decoding() {
        assert_eq!(decode("a%20b+c%2fd%zz%4"), "a b c/d%zz%4");
        assert_eq!(decode("%C3%A9"), "é");
    }
}
