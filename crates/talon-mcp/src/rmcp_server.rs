//! [`TalonMcp`] as rmcp's `ServerHandler`: streamable HTTP, and stdio sessions of the
//! 2026-07-28 protocol (`server/discover` and per-request `_meta` instead of `initialize`), which
//! the stdio loop hands over (see [`crate::stdio`]).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    ListToolsResult, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerConfig, ServerNotification, SubscriptionFilter, ToolListChangedNotification,
};
use rmcp::service::SubscriptionContext;
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::logging::LogLevel;
use crate::mrtr::Round;
use crate::{IncomingCall, McpError, Notify, TalonMcp};

impl Notify for rmcp::Peer<RoleServer> {
    async fn log(&self, param: LoggingMessageNotificationParam) -> Result<(), String> {
        self.notify_logging_message(param)
            .await
            .map_err(|e| e.to_string())
    }

    async fn progress(&self, param: ProgressNotificationParam) -> Result<(), String> {
        self.notify_progress(param).await.map_err(|e| e.to_string())
    }

    async fn tools_changed(&self) -> Result<(), String> {
        self.notify_tool_list_changed()
            .await
            .map_err(|e| e.to_string())
    }
}

/// Whether a request speaks the 2026-07-28 protocol (its own `_meta` names the version).
fn stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl TalonMcp {
    /// The session key for a request: the HTTP transport's session id when there is one.
    fn session_for(&self, context: &RequestContext<RoleServer>) -> String {
        context
            .extensions
            .get::<http::request::Parts>() // rmcp stores the HTTP request parts here
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| self.session_key.clone(), |id| format!("mcp:http:{id}"))
    }
}

impl ServerHandler for TalonMcp {
    fn get_info(&self) -> ServerConfig {
        self.server_info()
    }

    /// Forwards tool list changes until the client cannot be reached.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.forward_tool_list_changes(context.peer, CancellationToken::new());
    }

    /// Lets rmcp check a 2026-07-28 call's `Mcp-Param-*` headers against the tool's
    /// `x-mcp-header` parameters (SEP-2243); without it they went unchecked.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tool(name)
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
        // The call's own token: a question in a 2026-07-28 request stops the call with it.
        let cancel = context.ct.child_token();
        let round = if stateless(&context) {
            // No channel for questions: they end the round (SEP-2322), when the client
            // declared that it answers them.
            let answers = context
                .meta
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some());
            if answers {
                Some(Arc::new(Round::open(
                    &self.sealer,
                    &request.name,
                    request.arguments.as_ref(),
                    request.request_state.as_deref(),
                    request.input_responses.as_ref(),
                    cancel.clone(),
                )?))
            } else {
                None
            }
        } else {
            None
        };
        let client = match &round {
            Some(round) => Some(round.client()),
            None => context
                .peer
                .peer_info()
                .is_some_and(|info| info.capabilities.elicitation.is_some())
                .then(|| talon_core::ClientHandle(Arc::new(PeerClient(context.peer.clone())))),
        };
        let call = IncomingCall {
            session: self.session_for(&context),
            cancel,
            name: request.name.to_string(),
            arguments: request.arguments,
            progress_token: context.meta.get_progress_token(),
            client,
            notify: context.peer.clone(),
            log_level: stateless(&context).then(|| LogLevel::for_request(context.meta.log_level())),
        };
        let result = self.run_call(call).await;
        if let Some(asked) = round.and_then(|r| r.input_required(&self.sealer)) {
            return asked.map(CallToolResponse::InputRequired);
        }
        Ok(result.into())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Err(ErrorData::invalid_params(
            "no such prompt (Talon serves no prompts)",
            Some(json!({"name": request.name})),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // SEP-2164: an unknown resource is an invalid parameter, naming the URI.
        Err(ErrorData::invalid_params(
            "resource not found",
            Some(json!({"uri": request.uri})),
        ))
    }

    /// `subscriptions/listen` (2026-07-28): the tool-list changes the client asks for.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    /// Sends `notifications/tools/list_changed` on the subscription's stream whenever the
    /// registry changes, until the client cancels it or goes away.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.pipeline.registry().subscribe();
        loop {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return Ok(()) },
                () = subscription.cancelled() => return Ok(()),
            }
            if subscription.accepted().tools_list_changed != Some(true) {
                continue;
            }
            let changed = ServerNotification::ToolListChangedNotification(
                ToolListChangedNotification::default(),
            );
            if subscription.sink().send(changed).await.is_err() {
                return Ok(());
            }
        }
    }

    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.set_log_level(request.level);
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

/// Serves one stdio session with rmcp until the client closes its end.
pub(crate) async fn serve_stream<R, W>(
    handler: TalonMcp,
    reader: R,
    writer: W,
) -> Result<(), McpError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let running = handler
        .serve((reader, writer))
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
