//! One connected MCP server (any transport): its tool list, resources, calls with a timeout.

use std::time::Duration;

use std::sync::Arc;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::sync::Notify;

use crate::transport::{self, Transport};

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
        "MCP server {server:?} needs authorization: run `talon mcp-servers login {server}`, or configure a bearer token or header"
    )]
    NeedsAuth { server: String },
}

/// Talon's side of a session: it hears `notifications/tools/list_changed`.
#[derive(Debug, Clone, Default)]
pub struct Watcher {
    tools_changed: Arc<Notify>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

/// A running, initialised server.
pub struct Server {
    name: String,
    service: RunningService<RoleClient, Watcher>,
    tools_changed: Arc<Notify>,
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
        let tools_changed = Arc::clone(&watcher.tools_changed);
        let handshake = async {
            match transport {
                Transport::Stdio(config) => {
                    watcher.serve(transport::spawn_stdio(name, config)?).await
                }
                Transport::Http(config) => {
                    watcher
                        .serve(transport::streamable_http(name, config)?)
                        .await
                }
                Transport::Sse(config) => {
                    watcher
                        .serve(crate::sse::LegacySse::connect(name, config, timeout).await?)
                        .await
                }
            }
            .map_err(|e| {
                let message = e.to_string();
                if message.contains("Auth required") {
                    ServerError::NeedsAuth {
                        server: name.to_string(),
                    }
                } else {
                    ServerError::Handshake {
                        server: name.to_string(),
                        message,
                    }
                }
            })
        };
        let service = tokio::time::timeout(timeout, handshake)
            .await
            .map_err(|_| ServerError::Timeout {
                server: name.to_string(),
                secs: timeout.as_secs(),
            })??;
        Ok(Self {
            name: name.to_string(),
            service,
            tools_changed,
        })
    }

    /// Whether the session is still up (the process has not exited, the pipe is open).
    pub fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.service.is_transport_closed()
    }

    /// Sends `ping` and waits for the answer.
    pub async fn ping(&self, timeout: Duration) -> Result<(), ServerError> {
        let ping = rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        self.within(timeout, self.service.send_request(ping))
            .await
            .map(|_| ())
    }

    /// Woken when the server says its tool list changed.
    pub fn tools_changed(&self) -> Arc<Notify> {
        Arc::clone(&self.tools_changed)
    }

    /// The server's name in Talon.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every tool the server lists.
    pub async fn tools(&self, timeout: Duration) -> Result<Vec<ListedTool>, ServerError> {
        let tools = self.within(timeout, self.service.list_all_tools()).await?;
        Ok(tools
            .into_iter()
            .filter_map(|t| serde_json::to_value(&t).ok())
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
        let listed = self
            .within(timeout, self.service.list_all_resources())
            .await?;
        Ok(listed
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect())
    }

    /// Reads the resource at `uri`; the result as the protocol's JSON.
    pub async fn read_resource(&self, uri: &str, timeout: Duration) -> Result<Value, ServerError> {
        let params = rmcp::model::ReadResourceRequestParams::new(uri.to_string());
        let result = self
            .within(timeout, self.service.read_resource(params))
            .await?;
        serde_json::to_value(&result).map_err(|e| self.protocol(e.to_string()))
    }

    /// Calls `tool` (its raw name) with `arguments`; the result as the protocol's JSON.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<Value, ServerError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => return Err(self.protocol(format!("arguments must be an object, not {other}"))),
        };
        let result = self.within(timeout, self.service.call_tool(params)).await?;
        serde_json::to_value(&result).map_err(|e| self.protocol(e.to_string()))
    }

    /// `request`'s answer within `timeout`, its errors as this server's.
    async fn within<T, E: std::fmt::Display>(
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
            .map_err(|e| self.protocol(e.to_string()))
    }

    fn protocol(&self, message: String) -> ServerError {
        ServerError::Protocol {
            server: self.name.clone(),
            message,
        }
    }

    /// Ends the session and the child process, waiting at most `grace`.
    pub async fn close(self, grace: Duration) {
        let _ = tokio::time::timeout(grace, self.service.cancel()).await;
    }
}
