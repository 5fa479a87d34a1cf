//! Talon's MCP server: the caller's effective tool set, every call through the one pipeline.
//!
//! [`TalonMcp`] holds what a session serves. It is served over stdio by a loop of Talon's own
//! ([`serve_stdio`], used by `talon mcp`; see [`stdio`] for why) and over streamable HTTP by rmcp
//! ([`http_service`], mounted at `/mcp` by the gateway). Both reach the same call path
//! (`TalonMcp::run_call`), so a tool behaves the same whichever transport brought the call.
//! An MCP client session is the pipeline's session key, so rate limits and per-session tool state
//! (TodoWrite) are per client session: one key per stdio process, and for HTTP the
//! `Mcp-Session-Id` the transport assigned. Each call is bound to its agent and workspace by
//! [`Callers`], like every other entry point's, and the session can follow calls through MCP
//! logging (see the `logging` module).
//!
//! # Charter
//!
//! - **Owns:** Talon as an MCP server over stdio and HTTP.
//! - **Never contains:** tool logic: every call goes through the pipeline.
//! - **A new feature goes:** a new MCP server capability.

// rmcp marks MCP logging deprecated (SEP-2577); Talon still serves it, see the `logging` module.
#![allow(deprecated)]

mod logging;
pub mod mrtr;
mod progress;
mod rmcp_server;
pub mod stdio;

pub use rmcp_server::http_service;
pub use stdio::serve_stdio;

use std::sync::Arc;

use base64::Engine;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, JsonObject, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use serde_json::Value;
use talon_core::{CallContext, Callers, ClientHandle, Pipeline, RunKind, ToolCall, ToolOutput};

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
    /// Seals the `requestState` of `input_required` results (see [`mrtr`]).
    sealer: Arc<mrtr::Sealer>,
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
    ///
    /// Approvals of its calls are asked of the client (see [`talon_core::context::AskVia`]),
    /// which is taken to confirm each call with its user; [`TalonMcp::client_confirms`] says
    /// otherwise.
    pub fn new(
        pipeline: Arc<Pipeline>,
        mut template: CallContext,
        callers: Callers,
        transport: &str,
    ) -> Self {
        template.ask_via = talon_core::context::AskVia::McpClient {
            confirms_calls: true,
        };
        // MCP hosts (Claude Code) have Read and Bash of their own: GoClaw's names do not
        // shadow them, and the client sees one tool per job (`[tools] dialect` overrides).
        template.dialect = Some(talon_core::policy::Dialect::Goclaw);
        Self {
            pipeline,
            template: Arc::new(template),
            callers,
            session_key: format!("mcp:{transport}:{}", uuid::Uuid::new_v4()),
            log_level: LogLevel::default(),
            sealer: Arc::new(mrtr::Sealer::new()),
        }
    }

    /// Whether the clients ask their users before each tool call (`[mcp_server]
    /// client_confirms`, default true): if not, a tool's risk alone asks too.
    pub fn client_confirms(mut self, confirms_calls: bool) -> Self {
        let mut template = (*self.template).clone();
        template.ask_via = talon_core::context::AskVia::McpClient { confirms_calls };
        self.template = Arc::new(template);
        self
    }

    /// A handler for a new client session: its own key and its own log level.
    fn fresh_session(&self, transport: &str) -> Self {
        Self {
            pipeline: Arc::clone(&self.pipeline),
            template: Arc::clone(&self.template),
            callers: self.callers.clone(),
            session_key: format!("mcp:{transport}:{}", uuid::Uuid::new_v4()),
            log_level: LogLevel::default(),
            sealer: Arc::clone(&self.sealer),
        }
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
            .map(|t| mcp_tool(t))
            .collect()
    }

    /// One registered tool as an MCP tool, whether or not this client is offered it (rmcp checks
    /// a call's `Mcp-Param-*` headers against its schema before the call reaches the pipeline,
    /// which refuses a tool the client is not offered).
    pub fn tool(&self, name: &str) -> Option<Tool> {
        self.pipeline.registry().resolve(name).map(|t| mcp_tool(&t))
    }
}

fn mcp_tool(tool: &talon_core::registry::RegisteredTool) -> Tool {
    let spec = tool.spec();
    let schema: JsonObject = match tool.schema() {
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
}

/// Maps a pipeline output to MCP content: the text, then each media file: images and audio
/// inline, anything else as an embedded resource (text when it is text, else base64), so no file
/// a tool hands over is lost on the way to an MCP client.
pub fn to_call_result(output: &ToolOutput) -> CallToolResult {
    let mut content = Vec::with_capacity(1 + output.media.len());
    // A tool that only hands over files has no text to show; MCP needs no empty text block.
    if !output.for_llm.is_empty() || output.media.is_empty() {
        content.push(ContentBlock::text(output.for_llm.clone()));
    }
    content.extend(output.media.iter().enumerate().map(media_content));
    if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// One media file as MCP content.
fn media_content((index, media): (usize, &talon_core::Media)) -> ContentBlock {
    let base64 = || base64::engine::general_purpose::STANDARD.encode(&media.data);
    let mime = media.mime_type.clone();
    if media.is_image() {
        return ContentBlock::image(base64(), mime);
    }
    if mime.starts_with("audio/") {
        return ContentBlock::audio(base64(), mime);
    }
    // A resource needs a URI: the file's name when it is one (`scheme:…`), else one naming the
    // file among the call's media.
    let uri = match media.name.as_deref() {
        Some(name) if is_uri(name) => name.to_string(),
        Some(name) => format!("talon:media/{index}/{name}"),
        None => format!("talon:media/{index}"),
    };
    let textual = mime.starts_with("text/") || mime == "application/json";
    let resource = match std::str::from_utf8(&media.data) {
        Ok(text) if textual => rmcp::model::ResourceContents::TextResourceContents {
            uri,
            mime_type: Some(mime),
            text: text.to_string(),
            meta: None,
        },
        _ => rmcp::model::ResourceContents::BlobResourceContents {
            uri,
            mime_type: Some(mime),
            blob: base64(),
            meta: None,
        },
    };
    ContentBlock::resource(resource)
}

/// `scheme:rest` with an RFC 3986 scheme (a letter, then letters, digits, `+`, `-`, `.`).
fn is_uri(name: &str) -> bool {
    name.split_once(':').is_some_and(|(scheme, rest)| {
        !rest.is_empty()
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// Where a session's notifications go: rmcp's peer (HTTP) or Talon's own stdio loop.
pub(crate) trait Notify: Clone + Send + Sync + 'static {
    /// Sends `notifications/message`.
    fn log(
        &self,
        param: LoggingMessageNotificationParam,
    ) -> impl Future<Output = Result<(), String>> + Send;
    /// Sends `notifications/progress`.
    fn progress(
        &self,
        param: ProgressNotificationParam,
    ) -> impl Future<Output = Result<(), String>> + Send;
    /// Sends `notifications/tools/list_changed`.
    fn tools_changed(&self) -> impl Future<Output = Result<(), String>> + Send;
}

/// One `tools/call`, whichever transport brought it.
pub(crate) struct IncomingCall<N> {
    /// The pipeline's session key for the client session.
    pub session: String,
    /// Cancelled when the client cancels the call or goes away.
    pub cancel: CancellationToken,
    pub name: String,
    pub arguments: Option<JsonObject>,
    /// The client's `_meta.progressToken`: progress goes to it as notifications.
    pub progress_token: Option<ProgressToken>,
    /// The client, when it can answer elicitations.
    pub client: Option<ClientHandle>,
    /// Where logging and progress notifications go.
    pub notify: N,
    /// The call's own log level (a 2026-07-28 request's `_meta`); `None`: the session's.
    pub log_level: Option<LogLevel>,
}

impl TalonMcp {
    /// The server's `initialize` answer (the protocol version is the transport's to settle).
    pub fn server_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                // Talon serves no prompts or resources of its own; it says so with empty lists,
                // and declares both so that what `server/discover` advertises is what it answers.
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("talon", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Talon tools. Every call passes Talon's policy, validation, rate limit, hooks, permission \
             checks and credential scrubbing.",
        )
    }

    /// Runs one call through the pipeline: binds it to its caller, wires progress and the
    /// client's elicitation, and logs its start and end to the session.
    pub(crate) async fn run_call<N: Notify>(&self, call: IncomingCall<N>) -> CallToolResult {
        let mut ctx = self.context(call.session, call.cancel);
        if let Err(e) = self.callers.bind(&mut ctx, None, None).await {
            return to_call_result(&ToolOutput::error(e.to_string()));
        }
        let progress = call.progress_token.map(|token| {
            let forwarder = progress::Forwarder::start(call.notify.clone(), token);
            ctx.progress = Some(forwarder.sink());
            forwarder
        });
        ctx.client = call.client;
        let arguments = call.arguments.map_or(Value::Null, Value::Object);
        let log = call.log_level.as_ref().unwrap_or(&self.log_level);
        let tool_log = log.tool_log(call.notify.clone());
        ctx.log = Some(tool_log.sink());
        log.call_started(&call.notify, &call.name).await;
        let outcome = self
            .pipeline
            .call(Arc::new(ctx), ToolCall::new(call.name, arguments))
            .await;
        tool_log.flush().await;
        if let Some(progress) = progress {
            progress.flush().await;
        }
        log.call_ended(&call.notify, &outcome).await;
        to_call_result(&outcome.output)
    }

    /// Tells the client whenever the registry changes (a bridged server's tools came, went or
    /// changed), so it lists the tools again; until `ended` or the client cannot be reached.
    pub(crate) fn forward_tool_list_changes(&self, notify: impl Notify, ended: CancellationToken) {
        let mut changes = self.pipeline.registry().subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    () = ended.cancelled() => return,
                }
                if notify.tools_changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// `logging/setLevel` for this session.
    pub(crate) fn set_log_level(&self, level: rmcp::model::LoggingLevel) {
        self.log_level.set(level);
    }
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

    fn media(mime_type: &str, data: &[u8], name: Option<&str>) -> Media {
        Media {
            mime_type: mime_type.into(),
            data: data.to_vec(),
            name: name.map(Into::into),
            prompt: None,
        }
    }

    /// Audio and other files used to be dropped on the way to an MCP client.
    #[test]
    fn audio_and_other_files_reach_the_client() {
        let output = ToolOutput::text("files")
            .with_media(media("audio/wav", b"RIFF", Some("a.wav")))
            .with_media(media("text/plain", b"hello", Some("test://note")))
            .with_media(media("application/pdf", &[0, 1], Some("report.pdf")));
        let result = serde_json::to_value(to_call_result(&output)).expect("serializes");
        let content = result["content"].as_array().expect("content");
        assert_eq!(content.len(), 4);
        assert_eq!(content[1]["type"], "audio");
        assert_eq!(content[1]["mimeType"], "audio/wav");
        assert_eq!(content[1]["data"], "UklGRg==");
        assert_eq!(content[2]["type"], "resource");
        assert_eq!(content[2]["resource"]["uri"], "test://note");
        assert_eq!(content[2]["resource"]["text"], "hello");
        assert_eq!(content[2]["resource"]["mimeType"], "text/plain");
        assert_eq!(content[3]["resource"]["uri"], "talon:media/2/report.pdf");
        assert_eq!(content[3]["resource"]["blob"], "AAE=");
    }

    #[test]
    fn media_alone_needs_no_empty_text() {
        let output = ToolOutput::text("").with_media(media("image/png", &[1], None));
        let result = serde_json::to_value(to_call_result(&output)).expect("serializes");
        assert_eq!(result["content"].as_array().map(Vec::len), Some(1));
        assert_eq!(result["content"][0]["type"], "image");
    }
}
