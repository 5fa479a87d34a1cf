//! TLS to PostgreSQL: `sslmode` in the database URL is honoured, the session is really
//! encrypted, certificates are verified against `sslrootcert`, and every failure says what
//! failed. Runs whenever `TALON_TEST_DATABASE_URL` is set (`.ci/run` sets it and fails if the
//! server is unreachable); the server must have TLS on, and the test role must be allowed to
//! read the server's certificate file (`pg_read_file`: a superuser or `pg_read_server_files`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sqlx::Connection;
use talon_store::{Store, StoreConfig, StoreError};

/// A CA no server certificate is signed by (self-signed, EC P-256, valid until 2126).
const UNRELATED_CA: &str = "-----BEGIN CERTIFICATE-----
MIIByzCCAXGgAwIBAgIUaMaoxlX0fhHPjoLkV2WiRtRYJDIwCgYIKoZIzj0EAwIw
MjEwMC4GA1UEAwwnVGFsb24gdGVzdCBDQSAobm90IHRydXN0ZWQgYnkgYW55dGhp
bmcpMCAXDTI2MTEyMzA5MTUxNVoYDzIxMjYxMDMwMDkxNTE1WjAyMTAwLgYDVQQD
DCdUYWxvbiB0ZXN0IENBIChub3QgdHJ1c3RlZCBieSBhbnl0aGluZykwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAAQoX8Z9wYtSq+TXSIdIDsnpozriJd4cwMdHTwkp
s32QoP1jNVmyRicdd6L6lAVivOfxhpZSttfExRF/hXzq5Pzco2MwYTAdBgNVHQ4E
FgQUGcyEKz6sHVqayHUs0MnLjJG64gkwHwYDVR0jBBgwFoAUGcyEKz6sHVqayHUs
0MnLjJG64gkwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwCgYIKoZI
zj0EAwIDSAAwRQIgF0jVI4sIS/bIziLJ1vgoo3WuA+32De75HVKfLSsZ2kgCIQDG
rDXnj5QP+QoHQFkv4m+m03cTj3QZvDyMmbqgRMlVAA==
-----END CERTIFICATE-----
";

fn test_url() -> Option<String> {
    std::env::var("TALON_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

macro_rules! postgres_url_or_return {
    () => {
        match test_url() {
            Some(url) => url,
            None => {
                eprintln!("TALON_TEST_DATABASE_URL is not set; PostgreSQL variant not run here");
                return;
            }
        }
    };
}

/// The TLS parameters this file sets; any the test URL carries are replaced.
const TLS_PARAMS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
];

/// `url` with its TLS parameters replaced by `params` (other query parameters kept) and, if
/// given, its host replaced.
fn tls_url(url: &str, host: Option<&str>, params: &[(&str, &str)]) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut base = base.to_string();
    if let Some(host) = host {
        let (start, end) = host_span(&base);
        base.replace_range(start..end, host);
    }
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            !pair.is_empty() && !TLS_PARAMS.contains(&key)
        })
        .map(str::to_string)
        .collect();
    pairs.extend(
        params
            .iter()
            .map(|(key, value)| format!("{key}={}", encode(value))),
    );
    if pairs.is_empty() {
        base
    } else {
        format!("{base}?{}", pairs.join("&"))
    }
}

/// Byte range of the host in `scheme://[user[:password]@]host[:port][/db]`.
fn host_span(url: &str) -> (usize, usize) {
    let start = url.find("://").expect("a URL with a scheme") + 3;
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let start = url[start..end].rfind('@').map_or(start, |i| start + i + 1);
    let end = if url[start..end].starts_with('[') {
        url[start..end].find(']').map_or(end, |i| start + i + 1)
    } else {
        url[start..end].rfind(':').map_or(end, |i| start + i)
    };
    (start, end)
}

fn host_of(url: &str) -> String {
    let (start, end) = host_span(url.split_once('?').map_or(url, |(base, _)| base));
    url[start..end].to_string()
}

/// Percent-encodes a query value (paths keep their slashes).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn connect(url: &str) -> Result<Store, StoreError> {
    Store::connect(&StoreConfig::url(url)).await
}

/// Asserts, on a pooled session of `store`, what `pg_stat_ssl` reports for it.
async fn assert_session_ssl(store: &Store, expected: bool) {
    store
        .execute_admin(&format!(
            "DO $$ DECLARE is_ssl boolean; BEGIN \
             SELECT ssl INTO is_ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid(); \
             IF is_ssl IS DISTINCT FROM {expected} THEN \
             RAISE EXCEPTION 'pg_stat_ssl.ssl is %, expected {expected}', is_ssl; END IF; END $$"
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The server's certificate (chain), fetched over the test URL and written into `dir`.
async fn server_certificate(url: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let mut conn = sqlx::postgres::PgConnection::connect(url).await.unwrap();
    let pem: String = sqlx::query_scalar("SELECT pg_read_file(current_setting('ssl_cert_file'))")
        .fetch_one(&mut conn)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot fetch the server certificate for the TLS tests ({e}); the role in \
                 TALON_TEST_DATABASE_URL must be allowed to read server files (a superuser or a \
                 member of pg_read_server_files)"
            )
        });
    conn.close().await.unwrap();
    assert!(pem.contains("-----BEGIN CERTIFICATE-----"), "{pem}");
    let path = dir.join("server.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

#[tokio::test]
async fn sslmode_require_encrypts_the_session() {
    let url = postgres_url_or_return!();
    let store = connect(&tls_url(&url, None, &[("sslmode", "require")]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_session_ssl(&store, true).await;
    store.close().await;
}

#[tokio::test]
async fn sslmode_disable_connects_in_plain_text() {
    let url = postgres_url_or_return!();
    match connect(&tls_url(&url, None, &[("sslmode", "disable")])).await {
        Ok(store) => {
            assert_session_ssl(&store, false).await;
            store.close().await;
        }
        // A server may allow TLS sessions only (`hostssl` in pg_hba.conf); then it must say so.
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains("no encryption") || message.contains("pg_hba.conf"),
                "{message}"
            );
            eprintln!("the server refuses plain-text sessions: {message}");
        }
    }
}

#[tokio::test]
async fn verify_ca_accepts_the_server_certificate() {
    let url = postgres_url_or_return!();
    let dir = tempfile::tempdir().unwrap();
    let cert = server_certificate(&url, dir.path()).await;
    let store = connect(&tls_url(
        &url,
        None,
        &[
            ("sslmode", "verify-ca"),
            ("sslrootcert", cert.to_str().unwrap()),
        ],
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_session_ssl(&store, true).await;
    store.close().await;
}

/// With the server's own certificate as root, verify-full connects to every name the
/// certificate lists and refuses any other, naming the host. Tried with the URL's host and, for
/// a loopback address, `localhost` (a snakeoil certificate names `localhost` or the machine,
/// rarely an IP address).
#[tokio::test]
async fn verify_full_checks_the_host_name() {
    let url = postgres_url_or_return!();
    let dir = tempfile::tempdir().unwrap();
    let cert = server_certificate(&url, dir.path()).await;
    let host = host_of(&url);
    let mut hosts = vec![host.clone()];
    if ["127.0.0.1", "[::1]"].contains(&host.as_str()) {
        hosts.push("localhost".to_string());
    }
    for host in hosts {
        let url = tls_url(
            &url,
            Some(&host),
            &[
                ("sslmode", "verify-full"),
                ("sslrootcert", cert.to_str().unwrap()),
            ],
        );
        match connect(&url).await {
            Ok(store) => {
                eprintln!("verify-full: the certificate names {host}");
                assert_session_ssl(&store, true).await;
                store.close().await;
            }
            Err(e) => {
                // The CA was accepted (it is the server's own certificate): only the name fails.
                let message = e.to_string();
                assert!(
                    message.contains("certificate verification failed"),
                    "{message}"
                );
                let name = host.trim_start_matches('[').trim_end_matches(']');
                assert!(
                    message.contains(&format!("not valid for name \"{name}\"")),
                    "{message}"
                );
                eprintln!("verify-full: the certificate does not name {host}: {message}");
            }
        }
    }
}

#[tokio::test]
async fn verification_against_an_unrelated_ca_fails() {
    let url = postgres_url_or_return!();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("unrelated-ca.pem");
    std::fs::write(&ca, UNRELATED_CA).unwrap();
    for mode in ["verify-full", "verify-ca"] {
        let err = connect(&tls_url(
            &url,
            None,
            &[("sslmode", mode), ("sslrootcert", ca.to_str().unwrap())],
        ))
        .await
        .expect_err("an unrelated CA must not verify the server");
        assert!(matches!(err, StoreError::Connect { .. }), "{err:?}");
        let message = err.to_string();
        for part in [
            "TLS".to_string(),
            format!("certificate verification failed (sslmode={mode})"),
            "UnknownIssuer".to_string(),
            ca.display().to_string(),
        ] {
            assert!(message.contains(&part), "{part:?} not in: {message}");
        }
    }
}

#[tokio::test]
async fn a_missing_root_certificate_file_is_named() {
    let url = postgres_url_or_return!();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-ca.pem");
    for mode in ["verify-full", "verify-ca"] {
        let err = connect(&tls_url(
            &url,
            None,
            &[
                ("sslmode", mode),
                ("sslrootcert", missing.to_str().unwrap()),
            ],
        ))
        .await
        .expect_err("a missing root certificate file must fail");
        let message = err.to_string();
        for part in [
            format!(
                "cannot read the TLS root certificate file {:?}",
                missing.display().to_string()
            ),
            "(sslrootcert)".to_string(),
            "No such file or directory".to_string(),
        ] {
            assert!(message.contains(&part), "{part:?} not in: {message}");
        }
    }
}

/// TLS parameters in the test URL (say `sslmode=require`) reach every connection, including
/// the per-test schema's session setup and migrations.
#[tokio::test]
async fn a_store_with_a_schema_keeps_the_url_tls_settings() {
    let url = postgres_url_or_return!();
    let mut config = StoreConfig::url(tls_url(&url, None, &[("sslmode", "require")]));
    let schema = {
        use std::hash::{BuildHasher, RandomState};
        format!(
            "t_tls_{:016x}",
            RandomState::new().hash_one(std::time::SystemTime::now())
        )
    };
    config.schema = Some(schema.clone());
    let store = Store::open(&config).await.unwrap_or_else(|e| panic!("{e}"));
    assert_session_ssl(&store, true).await;
    assert!(store.ensure_agent("a").await.unwrap());
    store.close().await;
    let admin = connect(&url).await.unwrap();
    admin
        .execute_admin(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
    admin.close().await;
}
