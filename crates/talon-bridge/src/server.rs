//! One connected MCP server (any transport): its tool list, resources, calls with a timeout.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService};
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::Value;
use talon_core::{ClientHandle, ProgressSink};
use tokio::sync::Notify;

use crate::stdio_client::StdioClient;
use crate::transport::{self, Transport};
use crate::watcher::Registration;
pub use crate::watcher::{Held, Watcher};

/// Why a server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("MCP server {server:?}: cannot start {command:?}: {source}")]
    Spawn {
        server: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("MCP server {server:?}: the handshake failed: {message}")]
    Handshake { server: String, message: String },
    #[error("MCP server {server:?} did not answer within {secs} s")]
    Timeout { server: String, secs: u64 },
    #[error("MCP server {server:?}: {message}")]
    Protocol { server: String, message: String },
    #[error("MCP server {server:?} is misconfigured: {message}")]
    Config { server: String, message: String },
    #[error(
        "MCP server {server:?} needs authorization (it answered HTTP 401): sign in with OAuth (oauth = true, then `talon mcp-servers login {server}`) or give it a token (bearer_token_env, or `talon mcp-servers add {server} --replace --url URL --header Authorization='Bearer …'`)"
    )]
    NeedsAuth {
        server: String,
        /// The server's `WWW-Authenticate` challenge, when it sent one.
        challenge: Option<String>,
    },
    #[error("MCP server {server:?} needs you to sign in: run `talon mcp-servers login {server}`")]
    NeedsLogin {
        server: String,
        /// The server's `WWW-Authenticate` challenge, when it sent one (what to sign in for).
        challenge: Option<String>,
    },
    #[error(
        "MCP server {server:?} needs more permissions (scopes) than Talon was granted{}: run `talon mcp-servers login {server}` to grant them",
        scopes_named(challenge.as_deref())
    )]
    NeedsScope {
        server: String,
        /// The server's `WWW-Authenticate` challenge naming the scope it wants.
        challenge: Option<String>,
    },
}

/// `; it asks for "a b"` when `challenge` names scopes (shown with control characters spelled
/// out: the server wrote them), else nothing.
fn scopes_named(challenge: Option<&str>) -> String {
    let scopes = challenge
        .map(crate::oauth::challenge_scopes)
        .unwrap_or_default();
    if scopes.is_empty() {
        String::new()
    } else {
        format!(
            "; it asks for \"{}\"",
            talon_core::visible::visible(&scopes.join(" "))
        )
    }
}

/// Keeps the challenge of an authorization failure in `result` for the next sign-in of an OAuth
/// server ([`crate::oauth::note_challenge`]): a 403 asking for more scopes (a step-up), or a 401
/// on a request past the handshake, names what to sign in for, and neither shows on the bare
/// connection `talon mcp-servers login` can make.
async fn note<T>(
    server: &str,
    oauth: Option<&crate::oauth::OAuthConfig>,
    result: &Result<T, ServerError>,
) {
    let (
        Some(oauth),
        Err(
            ServerError::NeedsScope {
                challenge: Some(challenge),
                ..
            }
            | ServerError::NeedsLogin {
                challenge: Some(challenge),
                ..
            },
        ),
    ) = (oauth, result)
    else {
        return;
    };
    if let Err(e) = crate::oauth::note_challenge(server, oauth, challenge).await {
        tracing::warn!(server, error = %e, "the server's challenge was not kept for the next sign-in");
    }
}

/// A call in flight over rmcp: tells the server when the call is abandoned before its answer
/// (cancelled by Talon's caller, or timed out). Its watcher entries go with `_registration`.
struct InFlight {
    peer: rmcp::Peer<RoleClient>,
    /// Cleared once the answer arrived.
    id: Option<rmcp::model::RequestId>,
    _registration: Registration,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            tokio::spawn(async move {
                let reason = "the caller cancelled the call".to_string();
                let _ = peer
                    .notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                        Some(id),
                        Some(reason),
                    ))
                    .await;
            });
        }
    }
}

/// What an authorization failure means, told apart by rmcp's messages: a server that signs in
/// with OAuth needs a (new) login or more scopes; any other needs a token configured. `None`
/// for every other failure. The server's challenge comes along, so that signing in again asks
/// for what the server named (the scope of a 403 `insufficient_scope`, for one).
fn auth_error(
    server: &str,
    error: &(dyn std::error::Error + 'static),
    oauth: bool,
) -> Option<ServerError> {
    let message = error.to_string();
    let server = server.to_string();
    let challenge = challenge(error);
    if message.contains("Insufficient scope") {
        Some(ServerError::NeedsScope { server, challenge })
    } else if message.contains("Auth required") {
        Some(if oauth {
            ServerError::NeedsLogin { server, challenge }
        } else {
            ServerError::NeedsAuth { server, challenge }
        })
    } else {
        None
    }
}

/// The `WWW-Authenticate` header behind an authorization failure, from rmcp's error chain.
fn challenge(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<AuthRequiredError>() {
            return Some(e.www_authenticate_header.clone());
        }
        if let Some(e) = e.downcast_ref::<InsufficientScopeError>() {
            return Some(e.www_authenticate_header.clone());
        }
        next = cause(e);
    }
    None
}

/// The cause of `e`, including the ones rmcp keeps without reporting them as the source (a
/// handshake's transport error, a send's, the HTTP client's error inside a transport error).
fn cause<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    if let Some(rmcp::service::ClientInitializeError::TransportError { error, .. }) =
        e.downcast_ref::<rmcp::service::ClientInitializeError>()
    {
        return Some(error);
    }
    if let Some(rmcp::ServiceError::TransportSend(error)) = e.downcast_ref::<rmcp::ServiceError>() {
        return Some(error);
    }
    if let Some(StreamableHttpError::Client(client)) =
        e.downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        return Some(client);
    }
    e.source()
}

/// `e` with every cause, as a person reads it ("… error sending request: … Connection refused").
fn readable(e: &(dyn std::error::Error + 'static)) -> String {
    talon_core::error_text::with_causes_by(e, cause)
}

/// How a streamable HTTP session configured for `version` opens: `server/discover` at that
/// version when it is 2026-07-28 or later (those servers have no `initialize`), else the
/// `initialize` handshake.
fn lifecycle(server: &str, version: &str) -> Result<ClientLifecycleMode, ServerError> {
    let parsed: ProtocolVersion = serde_json::from_value(Value::String(version.to_string()))
        .map_err(|e| ServerError::Config {
            server: server.to_string(),
            message: format!("protocol version {version:?}: {e}"),
        })?;
    Ok(
        if parsed.as_str() >= ProtocolVersion::V_2026_07_28.as_str() {
            ClientLifecycleMode::Discover {
                preferred_versions: vec![parsed],
            }
        } else {
            ClientLifecycleMode::Initialize
        },
    )
}

/// A streamable HTTP session opened with `lifecycle` (its own transport, so a refused opening
/// can be tried again another way).
async fn http_session(
    watcher: &Watcher,
    name: &str,
    config: &transport::HttpConfig,
    lifecycle: ClientLifecycleMode,
) -> Result<Result<RunningService<RoleClient, Watcher>, ClientInitializeError>, ServerError> {
    Ok(match &config.oauth {
        Some(oauth) => {
            let transport = transport::streamable_http_oauth(name, config, oauth).await?;
            watcher
                .clone()
                .serve_with_lifecycle(transport, lifecycle)
                .await
        }
        None => {
            let transport = transport::streamable_http(name, config)?;
            watcher
                .clone()
                .serve_with_lifecycle(transport, lifecycle)
                .await
        }
    })
}

/// A streamable HTTP session with no configured version (`auto`): `server/discover` at
/// 2026-07-28 first, and when the server does not take it (an older server answers with a
/// JSON-RPC error, an HTTP 400 or 404, or a body that is no discovery result), the
/// `initialize` handshake on a fresh transport. An authorization failure is not a "no": it
/// goes to the operator as it is, so a server demanding a sign-in is asked once.
async fn auto_session(
    watcher: &Watcher,
    name: &str,
    config: &transport::HttpConfig,
    oauth: bool,
) -> Result<Result<RunningService<RoleClient, Watcher>, ClientInitializeError>, ServerError> {
    let modern = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    match http_session(watcher, name, config, modern).await? {
        Err(e) if auth_error(name, &e, oauth).is_none() => {
            tracing::debug!(server = %name, error = %readable(&e), "server/discover refused; opening with initialize");
            http_session(watcher, name, config, ClientLifecycleMode::Initialize).await
        }
        other => Ok(other),
    }
}

/// The protocol client of a session.
enum Session {
    /// Child processes: Talon's own client ([`crate::stdio_client`]).
    Stdio(StdioClient),
    /// HTTP and SSE: rmcp's.
    Rmcp(RunningService<RoleClient, Watcher>),
}

/// A running, initialised server.
pub struct Server {
    name: String,
    session: Session,
    /// Talon's side of the session (shared with the protocol client).
    watcher: Watcher,
    /// How it signs in with OAuth, if it does (what an authorization failure asks of the
    /// operator, and where a challenge for more scopes is noted for the next sign-in).
    oauth: Option<crate::oauth::OAuthConfig>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A tool as the server lists it (the protocol's JSON, kept raw).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub read_only: bool,
    pub destructive: bool,
}

impl Server {
    /// Connects to server `name` over `transport` and completes the MCP handshake within
    /// `timeout`. A child process's stderr goes to Talon's log, never to Talon's own streams.
    pub async fn start(
        name: &str,
        transport: &Transport,
        timeout: Duration,
    ) -> Result<Self, ServerError> {
        let watcher = Watcher::default();
        let shared = watcher.clone();
        let oauth = match transport {
            Transport::Http(h) => h.oauth.clone(),
            _ => None,
        };
        let handshake = async {
            match transport {
                Transport::Stdio(config) => {
                    let child = transport::spawn_stdio(name, config)?;
                    return StdioClient::start(name, child, watcher)
                        .await
                        .map(Session::Stdio)
                        .map_err(|message| ServerError::Handshake {
                            server: name.to_string(),
                            message,
                        });
                }
                Transport::Http(config) => match &config.protocol_version {
                    Some(version) => {
                        let lifecycle = lifecycle(name, version)?;
                        http_session(&watcher, name, config, lifecycle).await?
                    }
                    None => auto_session(&watcher, name, config, oauth.is_some()).await?,
                },
                Transport::Sse(config) => {
                    watcher
                        .serve(crate::sse::LegacySse::connect(name, config, timeout).await?)
                        .await
                }
            }
            .map(Session::Rmcp)
            .map_err(|e| {
                auth_error(name, &e, oauth.is_some()).unwrap_or_else(|| ServerError::Handshake {
                    server: name.to_string(),
                    message: readable(&e),
                })
            })
        };
        let opened = tokio::time::timeout(timeout, handshake)
            .await
            .map_err(|_| ServerError::Timeout {
                server: name.to_string(),
                secs: timeout.as_secs(),
            })?;
        note(name, oauth.as_ref(), &opened).await;
        let session = opened?;
        Ok(Self {
            name: name.to_string(),
            session,
            watcher: shared,
            oauth,
        })
    }

    /// Whether the session is still up (the process has not exited, the pipe is open).
    pub fn is_alive(&self) -> bool {
        match &self.session {
            Session::Stdio(client) => client.is_alive(),
            Session::Rmcp(service) => !service.is_closed() && !service.is_transport_closed(),
        }
    }

    /// Sends `ping` and waits for the answer.
    pub async fn ping(&self, timeout: Duration) -> Result<(), ServerError> {
        match &self.session {
            Session::Stdio(client) => self
                .within(
                    timeout,
                    client.request("ping", serde_json::json!({}), false),
                )
                .await
                .map(|_| ()),
            Session::Rmcp(service) => {
                let ping = rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest {
                    method: Default::default(),
                    extensions: Default::default(),
                });
                self.within(timeout, service.send_request(ping))
                    .await
                    .map(|_| ())
            }
        }
    }

    /// What the session holds and has dropped on Talon's side.
    pub fn held(&self) -> Held {
        let mut held = self.watcher.held();
        if let Session::Stdio(client) = &self.session {
            held.unwritten = client.backlog();
        }
        held
    }

    /// Woken when the server says its tool list changed.
    pub fn tools_changed(&self) -> Arc<Notify> {
        Arc::clone(&self.watcher.tools_changed)
    }

    /// The server's name in Talon.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every tool the server lists.
    pub async fn tools(&self, timeout: Duration) -> Result<Vec<ListedTool>, ServerError> {
        let tools: Vec<Value> = match &self.session {
            Session::Stdio(_) => self.list_all("tools/list", "tools", timeout).await?,
            Session::Rmcp(service) => {
                let listed = self.within(timeout, service.list_all_tools()).await;
                note(&self.name, self.oauth.as_ref(), &listed).await;
                listed?
                    .iter()
                    .filter_map(|t| serde_json::to_value(t).ok())
                    .collect()
            }
        };
        Ok(tools
            .into_iter()
            .map(|t| {
                let hint = |k: &str| {
                    t.pointer(&format!("/annotations/{k}"))
                        .and_then(Value::as_bool)
                };
                ListedTool {
                    name: t
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    input_schema: t
                        .get("inputSchema")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    read_only: hint("readOnlyHint").unwrap_or(false),
                    // The protocol's default for destructiveHint is true, but only when readOnly
                    // is false; an unannotated tool is "neither" (high risk), as Talon rates it.
                    destructive: hint("destructiveHint").unwrap_or(false),
                }
            })
            .filter(|t| !t.name.is_empty())
            .collect())
    }

    /// Every resource the server lists, as the protocol's JSON.
    pub async fn resources(&self, timeout: Duration) -> Result<Vec<Value>, ServerError> {
        match &self.session {
            Session::Stdio(_) => self.list_all("resources/list", "resources", timeout).await,
            Session::Rmcp(service) => Ok(self
                .within(timeout, service.list_all_resources())
                .await?
                .iter()
                .filter_map(|r| serde_json::to_value(r).ok())
                .collect()),
        }
    }

    /// Reads the resource at `uri`; the result as the protocol's JSON.
    pub async fn read_resource(&self, uri: &str, timeout: Duration) -> Result<Value, ServerError> {
        match &self.session {
            Session::Stdio(client) => {
                self.within(
                    timeout,
                    client.request("resources/read", serde_json::json!({"uri": uri}), false),
                )
                .await
            }
            Session::Rmcp(service) => {
                let params = rmcp::model::ReadResourceRequestParams::new(uri.to_string());
                let result = self.within(timeout, service.read_resource(params)).await?;
                serde_json::to_value(&result).map_err(|e| self.protocol(e.to_string()))
            }
        }
    }

    /// Calls `tool` (its raw name) with `arguments`; the result as the protocol's JSON. The
    /// server's progress reports go to `progress`; if the call is dropped before its answer
    /// (the caller cancelled it), the server is sent `notifications/cancelled`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Duration,
        progress: Option<ProgressSink>,
        client: Option<ClientHandle>,
    ) -> Result<Value, ServerError> {
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => return Err(self.protocol(format!("arguments must be an object, not {other}"))),
        };
        let service = match &self.session {
            Session::Stdio(stdio) => {
                return self
                    .within(timeout, stdio.call(tool, arguments, progress, client))
                    .await;
            }
            Session::Rmcp(service) => service,
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        let answer = self
            .call_rounds(service, params, timeout, progress, client)
            .await;
        note(&self.name, self.oauth.as_ref(), &answer).await;
        answer
    }

    /// `tools/call` until the server answers with a result (`input_required` rounds answered).
    async fn call_rounds(
        &self,
        service: &RunningService<RoleClient, Watcher>,
        mut params: CallToolRequestParams,
        timeout: Duration,
        progress: Option<ProgressSink>,
        client: Option<ClientHandle>,
    ) -> Result<Value, ServerError> {
        // A 2026-07-28 server may answer `input_required` (SEP-2322): Talon answers what it was
        // asked and sends the call again, the server's request state echoed untouched.
        for _ in 0..crate::mrtr::MAX_ROUNDS {
            let answer = self
                .call_once(
                    service,
                    params.clone(),
                    timeout,
                    progress.clone(),
                    client.clone(),
                )
                .await?;
            match answer {
                rmcp::model::ServerResult::CallToolResult(result) => {
                    return serde_json::to_value(&result).map_err(|e| self.protocol(e.to_string()));
                }
                rmcp::model::ServerResult::InputRequiredResult(asked) => {
                    let requests = asked.input_requests.unwrap_or_default();
                    params.input_responses =
                        Some(crate::mrtr::answer(&self.name, requests, client.as_ref()).await);
                    params.request_state = asked.request_state;
                }
                other => {
                    return Err(
                        self.protocol(format!("unexpected answer to tools/call: {other:?}"))
                    );
                }
            }
        }
        Err(self.protocol(format!(
            "tools/call still needed input after {} rounds",
            crate::mrtr::MAX_ROUNDS
        )))
    }

    /// One `tools/call` request over rmcp, cancellable, its progress and elicitations routed
    /// to this call's caller while it runs.
    async fn call_once(
        &self,
        service: &RunningService<RoleClient, Watcher>,
        params: CallToolRequestParams,
        timeout: Duration,
        progress: Option<ProgressSink>,
        client: Option<ClientHandle>,
    ) -> Result<rmcp::model::ServerResult, ServerError> {
        let request =
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let peer = service.peer().clone();
        // rmcp picks the progress token as it sends: reports may come before it is known.
        let opening = self.watcher.opening();
        let handle = self
            .within(
                timeout,
                peer.send_cancellable_request(
                    request,
                    rmcp::service::PeerRequestOptions::no_options(),
                ),
            )
            .await?;
        let mut pending = InFlight {
            peer,
            id: Some(handle.id.clone()),
            _registration: self
                .watcher
                .register(&handle.progress_token, progress, client),
        };
        drop(opening);
        let answer = self.within(timeout, handle.await_response()).await;
        if !matches!(answer, Err(ServerError::Timeout { .. })) {
            pending.id = None;
        }
        answer
    }

    /// `request`'s answer within `timeout`, its errors as this server's.
    async fn within<T, E: std::error::Error + 'static>(
        &self,
        timeout: Duration,
        request: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, ServerError> {
        tokio::time::timeout(timeout, request)
            .await
            .map_err(|_| ServerError::Timeout {
                server: self.name.clone(),
                secs: timeout.as_secs(),
            })?
            .map_err(|e| {
                auth_error(&self.name, &e, self.oauth.is_some())
                    .unwrap_or_else(|| self.protocol(e.to_string()))
            })
    }

    fn protocol(&self, message: String) -> ServerError {
        ServerError::Protocol {
            server: self.name.clone(),
            message,
        }
    }

    /// Ends the session and the child process, waiting at most `grace`.
    pub async fn close(self, grace: Duration) {
        match self.session {
            Session::Stdio(client) => client.close(grace).await,
            Session::Rmcp(service) => {
                let _ = tokio::time::timeout(grace, service.cancel()).await;
            }
        }
    }

    /// Every page of a `*/list` request over the stdio client: the `key` arrays joined.
    async fn list_all(
        &self,
        method: &str,
        key: &str,
        timeout: Duration,
    ) -> Result<Vec<Value>, ServerError> {
        let Session::Stdio(client) = &self.session else {
            return Err(self.protocol(format!("{method} is not listed page by page here")));
        };
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        // A server repeating a cursor must not keep Talon listing forever.
        for _ in 0..1000 {
            let params = match &cursor {
                Some(c) => serde_json::json!({"cursor": c}),
                None => serde_json::json!({}),
            };
            let mut page = self
                .within(timeout, client.request(method, params, false))
                .await?;
            match page.get_mut(key).map(Value::take) {
                Some(Value::Array(items)) => all.extend(items),
                _ => return Err(self.protocol(format!("the {method} answer has no {key} list"))),
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            if cursor.is_none() {
                return Ok(all);
            }
        }
        Err(self.protocol(format!("{method} never ended (1000 pages)")))
    }
}
