//! How Talon reaches a server: a child process over stdio, streamable HTTP, or the legacy
//! HTTP+SSE transport (protocol version 2024-11-05), and the connection each one makes.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::server::ServerError;

/// Variables a server process gets from Talon's environment; everything else it needs is in
/// its configured `env`. Talon's own secrets never reach it.
pub const ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "USER",
    "TMPDIR",
    "NODE_PATH",
];

/// How to start a stdio server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioConfig {
    pub command: String,
    pub args: Vec<String>,
    /// Added to the allowlisted environment.
    pub env: HashMap<String, String>,
    pub cwd: Option<PathBuf>,
}

/// Where a remote server listens and what every request carries.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The endpoint: the MCP URL for streamable HTTP, the SSE URL for the legacy transport.
    pub url: String,
    /// Sent with every request (API keys and the like; values come from the encrypted store).
    pub headers: BTreeMap<String, String>,
    /// Sent as `Authorization: Bearer <token>`.
    pub bearer: Option<String>,
    /// Sign in with OAuth (streamable HTTP only); the tokens come from its vault.
    pub oauth: Option<crate::oauth::OAuthConfig>,
    /// The protocol version to speak (streamable HTTP). 2026-07-28 and later have no
    /// `initialize`: the session opens with `server/discover` and every request carries its
    /// version in `_meta` and the `MCP-Protocol-Version` header. `None` (`auto`):
    /// `server/discover` at 2026-07-28, then the `initialize` handshake if the server does not
    /// take it (an older server).
    pub protocol_version: Option<String>,
}

impl std::fmt::Debug for HttpConfig {
    // Header values and the token are credentials: never in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("bearer", &self.bearer.as_ref().map(|_| "***"))
            .field("oauth", &self.oauth)
            .field("protocol_version", &self.protocol_version)
            .finish()
    }
}

/// A server's transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio(StdioConfig),
    /// Streamable HTTP (protocol 2025-03-26 and later).
    Http(HttpConfig),
    /// HTTP with Server-Sent Events (protocol 2024-11-05), still served by many servers.
    Sse(HttpConfig),
}

impl Transport {
    /// The transport's name as configured (`stdio`, `http`, `sse`).
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio(_) => "stdio",
            Transport::Http(_) => "http",
            Transport::Sse(_) => "sse",
        }
    }

    /// What the server is, for listings: the command line or the URL.
    pub fn target(&self) -> String {
        match self {
            Transport::Stdio(s) => std::iter::once(s.command.as_str())
                .chain(s.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http(h) | Transport::Sse(h) => h.url.clone(),
        }
    }
}

/// Starts `config` as a child process, stdin and stdout piped for the protocol, stderr going to
/// Talon's log (never Talon's own streams), killed if dropped.
pub(crate) fn spawn_stdio(
    server: &str,
    config: &StdioConfig,
) -> Result<tokio::process::Child, ServerError> {
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).env_clear();
    for key in ENV_ALLOWLIST {
        if let Some(v) = std::env::var_os(key) {
            command.env(key, v);
        }
    }
    command.envs(&config.env);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ServerError::Spawn {
            server: server.to_string(),
            command: config.command.clone(),
            source,
        })?;
    if let Some(stderr) = child.stderr.take() {
        let server = server.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(server = %server, "{line}");
            }
        });
    }
    Ok(child)
}

/// The configured headers as HTTP headers, or which one is unusable.
pub(crate) fn header_map(
    server: &str,
    config: &HttpConfig,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, ServerError> {
    config
        .headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::try_from(k.as_str());
            let value = http::HeaderValue::try_from(v.as_str());
            match (name, value) {
                (Ok(name), Ok(mut value)) => {
                    value.set_sensitive(true);
                    Ok((name, value))
                }
                _ => Err(ServerError::Config {
                    server: server.to_string(),
                    message: format!(
                        "header {k:?} is not a valid HTTP header name and value (no line breaks or control characters)"
                    ),
                }),
            }
        })
        .collect()
}

/// The HTTP client every request to the remote server at `url` goes through. A redirect is a
/// URL the server names, so it is followed only on `url`'s own origin: the server cannot send
/// Talon's requests, and the credentials they carry, anywhere the operator did not configure
/// (OAuth's own requests go through the address guard, [`crate::oauth_http`]).
pub(crate) fn http_client(server: &str, url: &str) -> Result<reqwest::Client, ServerError> {
    let origin = reqwest::Url::parse(url)
        .map_err(|e| ServerError::Config {
            server: server.to_string(),
            message: format!("invalid URL {url:?}: {e}"),
        })?
        .origin();
    let same_origin = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 10 {
            attempt.error("too many redirects")
        } else if attempt.url().origin() == origin {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .user_agent(concat!("talon/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(10))
        .redirect(same_origin)
        .build()
        .map_err(|e| ServerError::Config {
            server: server.to_string(),
            message: format!("cannot build the HTTP client: {e}"),
        })
}

/// The transport's settings for `config`.
fn http_settings(
    server: &str,
    config: &HttpConfig,
) -> Result<StreamableHttpClientTransportConfig, ServerError> {
    let mut settings = StreamableHttpClientTransportConfig::with_uri(config.url.as_str())
        .custom_headers(header_map(server, config)?)
        .reinit_on_expired_session(true);
    if let Some(token) = &config.bearer {
        settings = settings.auth_header(token.clone());
    }
    Ok(settings)
}

/// The streamable HTTP transport for an OAuth server: every request carries the stored access
/// token, refreshed before it expires.
pub(crate) async fn streamable_http_oauth(
    server: &str,
    config: &HttpConfig,
    oauth: &crate::oauth::OAuthConfig,
) -> Result<
    StreamableHttpClientTransport<rmcp::transport::auth::AuthClient<reqwest::Client>>,
    ServerError,
> {
    let client = crate::oauth::authorized_client(server, config, oauth).await?;
    Ok(StreamableHttpClientTransport::with_client(
        client,
        http_settings(server, config)?,
    ))
}

/// The streamable HTTP transport for `config`: retries the event stream as the server's SSE
/// `retry` field says, resumes it with `Last-Event-ID`, and re-initialises an expired session
/// once (rmcp's client does all three).
pub(crate) fn streamable_http(
    server: &str,
    config: &HttpConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, ServerError> {
    Ok(StreamableHttpClientTransport::with_client(
        http_client(server, &config.url)?,
        http_settings(server, config)?,
    ))
}
