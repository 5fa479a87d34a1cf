//! OAuth 2.1 for remote servers, as the MCP authorization spec describes, on rmcp's
//! implementation: protected-resource and authorization-server metadata discovery (path-aware),
//! dynamic client registration, client ID metadata documents, pre-registered clients, PKCE
//! S256, the `resource` parameter, scopes from the challenge.
//!
//! [`login`] runs the browser flow with a loopback callback and keeps the tokens in a
//! [`TokenVault`] (Talon's encrypted store). A connection then sends the access token, refreshes
//! it before it expires (and once more when the server rejects it), and saves every new token
//! response, so a rotated refresh token is never lost. A server whose tokens are missing or no
//! longer refreshable fails with [`ServerError::NeedsLogin`], which says what to run.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    CredentialStore, OAuthClientConfig, StoredCredentials,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::server::ServerError;
use crate::transport::{HttpConfig, http_client};

/// The boxed future a [`TokenVault`] returns.
pub type VaultFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Where a server's tokens are kept, as opaque text (Talon: an encrypted secret per server).
pub trait TokenVault: Send + Sync + 'static {
    fn load<'a>(&'a self, server: &'a str) -> VaultFuture<'a, Option<String>>;
    fn save<'a>(&'a self, server: &'a str, tokens: String) -> VaultFuture<'a, ()>;
    fn clear<'a>(&'a self, server: &'a str) -> VaultFuture<'a, ()>;
}

/// How a server's client is identified to its authorization server. With none of the three,
/// Talon registers itself (dynamic client registration).
#[derive(Clone)]
pub struct OAuthConfig {
    /// A client registered beforehand with the authorization server.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// An HTTPS URL of Talon's client metadata document, used as the client ID where the
    /// authorization server supports it.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; empty: those the server's challenge or metadata names.
    pub scopes: Vec<String>,
    pub vault: Arc<dyn TokenVault>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl PartialEq for OAuthConfig {
    fn eq(&self, other: &Self) -> bool {
        self.client_id == other.client_id
            && self.client_secret == other.client_secret
            && self.client_metadata_url == other.client_metadata_url
            && self.scopes == other.scopes
            && Arc::ptr_eq(&self.vault, &other.vault)
    }
}

impl Eq for OAuthConfig {}

/// rmcp's credential store over a [`TokenVault`], for one server.
struct VaultStore {
    server: String,
    vault: Arc<dyn TokenVault>,
}

fn vault_error(e: String) -> AuthError {
    AuthError::InternalError(format!("token store: {e}"))
}

#[async_trait::async_trait]
impl CredentialStore for VaultStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match self.vault.load(&self.server).await.map_err(vault_error)? {
            Some(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| vault_error(format!("stored tokens are unreadable: {e}"))),
            None => Ok(None),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&credentials).map_err(|e| vault_error(e.to_string()))?;
        self.vault
            .save(&self.server, text)
            .await
            .map_err(vault_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.vault.clear(&self.server).await.map_err(vault_error)
    }
}

fn auth_failed(server: &str, e: impl std::fmt::Display) -> ServerError {
    ServerError::Protocol {
        server: server.to_string(),
        message: format!("OAuth: {e}"),
    }
}

async fn manager(
    server: &str,
    http: &HttpConfig,
    oauth: &OAuthConfig,
) -> Result<AuthorizationManager, ServerError> {
    // Every URL the server advertises is fetched through the address guard, with no more reach
    // than the configured URL ([`crate::oauth_http`]).
    let guard = crate::oauth_http::guard_for(&http.url)
        .await
        .map_err(|e| auth_failed(server, e))?;
    let client =
        crate::oauth_http::GuardedOAuthHttp::new(guard).map_err(|e| auth_failed(server, e))?;
    let mut manager =
        AuthorizationManager::new_with_oauth_http_client(http.url.as_str(), Arc::new(client))
            .await
            .map_err(|e| auth_failed(server, e))?;
    manager.set_credential_store(VaultStore {
        server: server.to_string(),
        vault: Arc::clone(&oauth.vault),
    });
    Ok(manager)
}

/// An HTTP client that authorizes every request with the stored tokens, refreshing them as
/// needed; [`ServerError::NeedsLogin`] when there are none.
pub(crate) async fn authorized_client(
    server: &str,
    http: &HttpConfig,
    oauth: &OAuthConfig,
) -> Result<AuthClient<reqwest::Client>, ServerError> {
    let mut manager = manager(server, http, oauth).await?;
    let signed_in = manager
        .initialize_from_store()
        .await
        .map_err(|e| auth_failed(server, e))?;
    if !signed_in {
        return Err(ServerError::NeedsLogin {
            server: server.to_string(),
            challenge: None,
        });
    }
    if let (Some(id), Some(secret)) = (&oauth.client_id, &oauth.client_secret) {
        let config = OAuthClientConfig::new(id.clone(), "http://127.0.0.1/callback")
            .with_client_secret(secret.clone());
        manager
            .configure_client(config)
            .map_err(|e| auth_failed(server, e))?;
    }
    Ok(AuthClient::new(http_client(server, &http.url)?, manager))
}

/// Whether tokens are stored for `server`.
pub async fn signed_in(server: &str, oauth: &OAuthConfig) -> Result<bool, String> {
    Ok(oauth.vault.load(server).await?.is_some())
}

/// Forgets `server`'s tokens (and a challenge noted for the next sign-in).
pub async fn logout(server: &str, oauth: &OAuthConfig) -> Result<(), String> {
    oauth.vault.clear(server).await?;
    oauth.vault.clear(&challenge_key(server)).await
}

/// Where the vault keeps `server`'s noted challenge: beside its tokens, under a name no server
/// can have (server names hold no `/`).
fn challenge_key(server: &str) -> String {
    format!("{server}/challenge")
}

/// Keeps the server's `WWW-Authenticate` `challenge` (a 403 `insufficient_scope` of a tool
/// call, which a fresh connection does not repeat) for the next [`login`], which asks for the
/// scopes it names.
pub async fn note_challenge(
    server: &str,
    oauth: &OAuthConfig,
    challenge: &str,
) -> Result<(), String> {
    // A challenge is one header line; anything longer is not kept.
    if challenge.len() > MAX_CHALLENGE {
        return Err(format!(
            "the challenge is {} bytes, more than {MAX_CHALLENGE}",
            challenge.len()
        ));
    }
    oauth
        .vault
        .save(&challenge_key(server), challenge.to_string())
        .await
}

/// The longest `WWW-Authenticate` challenge kept.
const MAX_CHALLENGE: usize = 8 * 1024;

/// The challenge `server` answers a client without a token with (the `WWW-Authenticate` of
/// its 401 or 403, to the handshake or, where the handshake is open to all, to `tools/list`),
/// or `None` when it sends none or cannot be reached.
async fn probe_challenge(server: &str, http: &HttpConfig, timeout: Duration) -> Option<String> {
    let mut bare = http.clone();
    bare.oauth = None;
    bare.bearer = None;
    let challenge_of = |e: ServerError| match e {
        ServerError::NeedsAuth { challenge, .. }
        | ServerError::NeedsLogin { challenge, .. }
        | ServerError::NeedsScope { challenge, .. } => challenge,
        _ => None,
    };
    match crate::Server::start(server, &crate::Transport::Http(bare), timeout).await {
        Ok(connected) => {
            let listed = connected.tools(timeout).await;
            connected.close(Duration::from_secs(2)).await;
            listed.err().and_then(challenge_of)
        }
        Err(e) => challenge_of(e),
    }
}

/// Signs in to `server`: discovers its authorization server, registers Talon (or uses the
/// configured client), hands the authorization URL to `open` (the browser), receives the code
/// on a loopback callback, exchanges it (PKCE) and stores the tokens. Gives up after `timeout`.
///
/// What the server asked for decides the sign-in, as in [`login_for`]: the challenge noted by a
/// tool call that needed more scopes ([`note_challenge`]), else the one the server answers a
/// connection without a token with (its protected-resource metadata may live only where that
/// challenge says, and its scope is the one to ask for).
pub async fn login(
    server: &str,
    http: &HttpConfig,
    oauth: &OAuthConfig,
    open: impl FnOnce(&str),
    timeout: Duration,
) -> Result<(), ServerError> {
    let noted = oauth
        .vault
        .load(&challenge_key(server))
        .await
        .ok()
        .flatten();
    let challenge = match noted {
        Some(challenge) => Some(challenge),
        None => probe_challenge(server, http, timeout.min(PROBE_TIMEOUT)).await,
    };
    login_for(server, http, oauth, challenge.as_deref(), open, timeout).await?;
    if let Err(e) = oauth.vault.clear(&challenge_key(server)).await {
        tracing::warn!(server, error = %e, "a challenge answered by the sign-in is still noted");
    }
    Ok(())
}

/// Time the connection that asks the server for its challenge may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// [`login`] answering the server's `challenge` (the `WWW-Authenticate` header of its 401 or
/// 403, as [`ServerError::NeedsLogin`] and [`ServerError::NeedsScope`] carry it): discovery
/// starts from the metadata it names, and the scope it names is asked for, together with the
/// scopes granted before (a step-up adds to what Talon holds, it does not trade it).
pub async fn login_for(
    server: &str,
    http: &HttpConfig,
    oauth: &OAuthConfig,
    challenge: Option<&str>,
    open: impl FnOnce(&str),
    timeout: Duration,
) -> Result<(), ServerError> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| auth_failed(server, format!("cannot listen for the callback: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| auth_failed(server, e))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let manager = manager(server, http, oauth).await?;
    let previous = VaultStore {
        server: server.to_string(),
        vault: Arc::clone(&oauth.vault),
    }
    .load()
    .await
    .ok()
    .flatten()
    .map(|c| c.granted_scopes)
    .unwrap_or_default();
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(|e| auth_failed(server, format!("discovery failed: {e}")))?;
    let mut manager = manager;
    manager.set_metadata(resolution.metadata);
    let mut request = AuthorizationRequest::new(redirect_uri.clone()).with_client_name("Talon");
    if let Some(id) = &oauth.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(secret) = &oauth.client_secret {
            request = request.with_client_secret(secret.clone());
        }
    } else if let Some(url) = &oauth.client_metadata_url {
        request = request.with_client_metadata_url(url.clone());
    }
    let challenged = challenge.map(challenge_scopes).unwrap_or_default();
    if !oauth.scopes.is_empty() {
        request = request.with_scopes(oauth.scopes.iter().cloned());
    } else if !challenged.is_empty() {
        let mut scopes = previous;
        for scope in challenged {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        request = request.with_scopes(scopes);
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| auth_failed(server, e))?;
    open(&session.auth_url);
    let callback = tokio::time::timeout(timeout, wait_for_callback(&listener))
        .await
        .map_err(|_| ServerError::Timeout {
            server: server.to_string(),
            secs: timeout.as_secs(),
        })?
        .map_err(|e| auth_failed(server, e))?;
    session
        .handle_callback_url(&format!("http://127.0.0.1:{port}{callback}"))
        .await
        .map_err(|e| auth_failed(server, format!("the token exchange failed: {e}")))?;
    Ok(())
}

/// The scopes a `WWW-Authenticate: Bearer …, scope="a b"` challenge names.
pub(crate) fn challenge_scopes(challenge: &str) -> Vec<String> {
    // The `scope` parameter itself, not one ending in "scope" (`x_scope=`).
    let Some(start) = challenge
        .match_indices("scope=")
        .map(|(i, _)| i)
        .find(|&i| i == 0 || matches!(challenge.as_bytes()[i - 1], b' ' | b',' | b'\t'))
    else {
        return Vec::new();
    };
    let rest = &challenge[start + "scope=".len()..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or_default(),
        None => rest.split([',', ' ']).next().unwrap_or_default(),
    };
    value.split_whitespace().map(str::to_string).collect()
}

/// Answers requests on the loopback listener until one is the authorization callback; returns
/// its path and query.
async fn wait_for_callback(listener: &tokio::net::TcpListener) -> Result<String, String> {
    loop {
        let (mut socket, _) = listener.accept().await.map_err(|e| e.to_string())?;
        // The request line may come in more than one read (a busy browser, a slow machine):
        // read until the end of the head, within 16 KiB.
        let mut buf = vec![0u8; 16 * 1024];
        let mut n = 0;
        while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut buf[n..]).await {
                Ok(0) => break,
                Ok(read) => n += read,
                Err(e) => return Err(e.to_string()),
            }
        }
        let head = String::from_utf8_lossy(&buf[..n]);
        let target = head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("/")
            .to_string();
        if !target.starts_with("/callback") {
            let _ = socket
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let denied = target.contains("error=");
        let page = if denied {
            "Talon: the authorization server refused the sign-in. You can close this tab."
        } else {
            "Talon: signed in. You can close this tab."
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = socket.write_all(response.as_bytes()).await;
        if denied {
            return Err(format!("the authorization server refused: {target}"));
        }
        return Ok(target);
    }
}

#[cfg(test)]
mod tests {
    use super::challenge_scopes;

    #[test]
    fn a_challenge_names_its_scopes() {
        let header = r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://x/.well-known/oauth-protected-resource""#;
        assert_eq!(challenge_scopes(header), ["mcp:basic", "mcp:write"]);
        assert_eq!(challenge_scopes("Bearer scope=files:read"), ["files:read"]);
        assert!(challenge_scopes(r#"Bearer x_scope="nope""#).is_empty());
        assert!(challenge_scopes("Bearer").is_empty());
    }
}
