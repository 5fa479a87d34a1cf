//! Talon's MCP server: the caller's effective tool set, every call through the one pipeline.
//!
//! [`TalonMcp`] implements rmcp's `ServerHandler`. It serves over stdio ([`serve_stdio`], used by
//! `talon mcp`) and over streamable HTTP ([`http_service`], mounted at `/mcp` by the gateway).
//! An MCP client session is the pipeline's session key, so rate limits and per-session tool state
//! (TodoWrite) are per client session: one key per stdio process, and for HTTP the
//! `Mcp-Session-Id` the transport assigned. Each call is bound to its agent and workspace by
//! [`Callers`], like every other entry point's, and the session can follow calls through MCP
//! logging (see [`logging`]).

mod logging;

use std::sync::Arc;

use base64::Engine;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use talon_core::{CallContext, Callers, Pipeline, RunKind, ToolCall, ToolOutput};

use crate::logging::LogLevel;
use tokio_util::sync::CancellationToken;

/// Errors starting or running the MCP server.
#[derive(Debug)]
pub struct McpError(String);

impl std::fmt::Display for McpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for McpError {}

/// The MCP server handler. Cheap to clone; each clone for a new HTTP session gets a fresh key.
#[derive(Clone)]
pub struct TalonMcp {
    pipeline: Arc<Pipeline>,
    template: Arc<CallContext>,
    callers: Callers,
    session_key: String,
    log_level: LogLevel,
}

impl std::fmt::Debug for TalonMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalonMcp")
            .field("session_key", &self.session_key)
            .finish_non_exhaustive()
    }
}

impl TalonMcp {
    /// A handler calling through `pipeline`. `template` supplies the agent, permission mode and
    /// the rest; `callers` binds each call to its agent and workspace; the session key is
    /// replaced per client session.
    pub fn new(
        pipeline: Arc<Pipeline>,
        template: CallContext,
        callers: Callers,
        transport: &str,
    ) -> Self {
        Self {
            pipeline,
            template: Arc::new(template),
            callers,
            session_key: format!("mcp:{transport}:{}", uuid::Uuid::new_v4()),
            log_level: LogLevel::default(),
        }
    }

    /// A handler for a new client session: its own key and its own log level.
    fn fresh_session(&self, transport: &str) -> Self {
        Self {
            pipeline: Arc::clone(&self.pipeline),
            template: Arc::clone(&self.template),
            callers: self.callers.clone(),
            session_key: format!("mcp:{transport}:{}", uuid::Uuid::new_v4()),
            log_level: LogLevel::default(),
        }
    }

    /// The session key for a request: the HTTP transport's session id when there is one.
    fn session_for(&self, context: &RequestContext<RoleServer>) -> String {
        context
            .extensions
            .get::<http::request::Parts>() // rmcp stores the HTTP request parts here
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| self.session_key.clone(), |id| format!("mcp:http:{id}"))
    }

    fn context(&self, session_key: String, cancel: CancellationToken) -> CallContext {
        let mut ctx = (*self.template).clone();
        ctx.session_key = session_key;
        ctx.channel_type = Some("mcp".into());
        ctx.run_kind = RunKind::Api;
        ctx.cancel = cancel;
        ctx.scrub_bag = Default::default();
        ctx
    }

    /// The tools this client is offered, as MCP tools.
    pub async fn tools(&self) -> Vec<Tool> {
        let ctx = self.context(self.session_key.clone(), CancellationToken::new());
        self.pipeline
            .offered_to(&ctx)
            .await
            .iter()
            .map(|t| {
                let spec = t.spec();
                let schema: JsonObject = match t.schema() {
                    Value::Object(map) => map.clone(),
                    _ => JsonObject::new(),
                };
                let hints = talon_core::wire::mcp_hints(spec);
                let annotations = ToolAnnotations::new()
                    .read_only(hints.read_only)
                    .destructive(hints.destructive)
                    .idempotent(hints.idempotent)
                    .open_world(hints.open_world);
                Tool::new(
                    spec.name.clone(),
                    spec.description.clone(),
                    Arc::new(schema),
                )
                .with_annotations(annotations)
            })
            .collect()
    }
}

/// Maps a pipeline output to MCP content: the text, then any images inline.
pub fn to_call_result(output: &ToolOutput) -> CallToolResult {
    let mut content = vec![ContentBlock::text(output.for_llm.clone())];
    for media in output.media.iter().filter(|m| m.is_image()) {
        let data = base64::engine::general_purpose::STANDARD.encode(&media.data);
        content.push(ContentBlock::image(data, media.mime_type.clone()));
    }
    if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl ServerHandler for TalonMcp {
    #[allow(deprecated)] // enable_logging: see the `logging` module
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .build(),
        )
            .with_server_info(Implementation::new("talon", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Talon tools. Every call passes Talon's policy, validation, rate limit, hooks, permission \
                 checks and credential scrubbing.",
            )
    }

    /// Tells the client whenever the registry changes (a bridged server's tools came, went or
    /// changed), so it lists the tools again.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changes = self.pipeline.registry().subscribe();
        let peer = context.peer;
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools().await))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = self.session_for(&context);
        let mut ctx = self.context(session, context.ct.clone());
        if let Err(e) = self.callers.bind(&mut ctx, None, None).await {
            let output = ToolOutput::error(e.to_string());
            return Ok(to_call_result(&output).into());
        }
        if let Some(token) = context.meta.get_progress_token() {
            ctx.progress = Some(progress_to(context.peer.clone(), token));
        }
        let asks = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some());
        if asks {
            ctx.client = Some(talon_core::ClientHandle(Arc::new(PeerClient(
                context.peer.clone(),
            ))));
        }
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let name = request.name.to_string();
        self.log_level.call_started(&context.peer, &name).await;
        let outcome = self
            .pipeline
            .call(Arc::new(ctx), ToolCall::new(name, arguments))
            .await;
        self.log_level.call_ended(&context.peer, &outcome).await;
        Ok(to_call_result(&outcome.output).into())
    }

    #[allow(deprecated)] // logging: see the `logging` module
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level.set(request.level);
        Ok(())
    }
}

/// The connected client, for requests a tool passes on (elicitation from bridged servers).
struct PeerClient(rmcp::Peer<RoleServer>);

impl talon_core::ClientRequests for PeerClient {
    fn elicit(&self, params: Value) -> talon_core::context::ClientFuture {
        let peer = self.0.clone();
        Box::pin(async move {
            let params: rmcp::model::ElicitRequestParams = serde_json::from_value(params)
                .map_err(|e| format!("not an elicitation request: {e}"))?;
            let result = peer
                .create_elicitation(params)
                .await
                .map_err(|e| format!("the client did not answer: {e}"))?;
            serde_json::to_value(result).map_err(|e| e.to_string())
        })
    }
}

/// Sends a call's progress reports to the client as `notifications/progress` for `token`, in
/// order, until the call's context is dropped.
fn progress_to(
    peer: rmcp::Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
) -> talon_core::ProgressSink {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<talon_core::ProgressUpdate>();
    tokio::spawn(async move {
        while let Some(update) = rx.recv().await {
            let mut param =
                rmcp::model::ProgressNotificationParam::new(token.clone(), update.progress);
            param.total = update.total;
            param.message = update.message;
            if peer.notify_progress(param).await.is_err() {
                return;
            }
        }
    });
    talon_core::ProgressSink(Arc::new(move |update| {
        let _ = tx.send(update);
    }))
}

/// Serves MCP over stdin/stdout until the client disconnects.
pub async fn serve_stdio(handler: TalonMcp) -> Result<(), McpError> {
    let running = handler
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| McpError(format!("MCP initialization failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| McpError(format!("MCP server stopped abnormally: {e}")))?;
    Ok(())
}

/// A tower service for streamable HTTP; each MCP session gets its own handler and session key.
/// `allowed_hosts` guards against DNS rebinding (the `Host` header must be one of them).
pub fn http_service(
    handler: TalonMcp,
    allowed_hosts: Vec<String>,
    shutdown: CancellationToken,
) -> StreamableHttpService<TalonMcp, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_cancellation_token(shutdown);
    StreamableHttpService::new(
        move || Ok(handler.fresh_session("http")),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use talon_core::Media;

    #[test]
    fn images_become_image_content() {
        let output = ToolOutput::text("Image file read: a.png").with_media(Media {
            mime_type: "image/png".into(),
            data: vec![1, 2, 3],
            name: Some("a.png".into()),
            prompt: None,
        });
        let result = serde_json::to_value(to_call_result(&output)).expect("serializes");
        assert_eq!(result["content"][0]["type"], "text");
        assert_eq!(result["content"][1]["type"], "image");
        assert_eq!(result["content"][1]["mimeType"], "image/png");
        assert_eq!(result["content"][1]["data"], "AQID");
        assert_eq!(result["isError"], false);
    }
}
