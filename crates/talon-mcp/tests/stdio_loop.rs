//! The stdio loop's protocol, over an in-memory pipe: the handshake and its rules, calls with
//! progress and cancellation, and a clear JSON-RPC error for every kind of bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use talon_core::caller::FixedAgents;
use talon_core::{
    Authorized, CallContext, Callers, Pipeline, ProgressUpdate, Registry, SideEffect, Tool,
    ToolOutput, ToolSpec, Workspaces,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

/// Echoes `text`.
struct Echo;

#[derive(Deserialize, JsonSchema)]
struct EchoInput {
    text: String,
}

impl Tool for Echo {
    type Input = EchoInput;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("echo", "Echoes text.", SideEffect::None)
    }
    async fn execute(&self, call: Authorized<EchoInput>) -> ToolOutput {
        ToolOutput::text(call.input().text.clone())
    }
}

/// Reports progress, then waits until the call is cancelled.
struct Stall;

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

impl Tool for Stall {
    type Input = Nothing;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("stall", "Waits to be cancelled.", SideEffect::None).reporting_progress()
    }
    async fn execute(&self, call: Authorized<Nothing>) -> ToolOutput {
        call.ctx().report_progress(ProgressUpdate {
            progress: 1.0,
            total: Some(2.0),
            message: Some("half way".into()),
        });
        call.ctx().cancel.cancelled().await;
        ToolOutput::error("cancelled")
    }
}

struct Client {
    lines: BufReader<ReadHalf<DuplexStream>>,
    input: WriteHalf<DuplexStream>,
    served: tokio::task::JoinHandle<Result<(), talon_mcp::McpError>>,
    _dir: tempfile::TempDir,
}

impl Client {
    fn start() -> Self {
        let registry = Registry::new();
        registry.register(Echo).expect("registers");
        registry.register(Stall).expect("registers");
        let pipeline = Pipeline::builder(Arc::new(registry))
            .build()
            .expect("pipeline");
        let dir = tempfile::tempdir().expect("tempdir");
        let callers = Callers::new(
            Workspaces::Shared(dir.path().to_path_buf()),
            "default",
            Arc::new(FixedAgents::of(["default"])),
        );
        let handler = talon_mcp::TalonMcp::new(
            Arc::new(pipeline),
            CallContext::new("template"),
            callers,
            "stdio",
        );
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (server_in, server_out) = tokio::io::split(theirs);
        let served = tokio::spawn(talon_mcp::stdio::serve(handler, server_in, server_out));
        let (lines, input) = tokio::io::split(ours);
        Self {
            lines: BufReader::new(lines),
            input,
            served,
            _dir: dir,
        }
    }

    async fn send_raw(&mut self, line: &str) {
        self.input
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("writes");
    }

    async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    async fn next(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(10), self.lines.read_line(&mut line))
            .await
            .expect("an answer within 10 s")
            .expect("reads");
        serde_json::from_str(&line).expect("JSON")
    }

    /// Sends a request and returns its answer, skipping the notifications before it.
    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.next().await;
            if message.get("method").is_none() {
                return message;
            }
        }
    }

    /// Closes the server's stdin and expects the loop to end cleanly.
    async fn finish(mut self) {
        self.close_input().await;
        self.served
            .await
            .expect("joins")
            .expect("ends cleanly when stdin closes");
    }

    /// Closes the server's stdin.
    async fn close_input(&mut self) {
        self.input.shutdown().await.expect("closes");
    }

    async fn initialize(&mut self, capabilities: Value) -> Value {
        let answer = self
            .request(
                0,
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                       "clientInfo": {"name": "test", "version": "1"}}),
            )
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        answer
    }
}

/// Asserts that `answer` is JSON-RPC error `code` whose message mentions `text`.
fn assert_error(answer: &Value, code: i64, text: &str) {
    assert_eq!(answer["error"]["code"], code, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(text)),
        "{answer}"
    );
}

#[tokio::test]
async fn handshake_lists_and_calls() {
    let mut client = Client::start();
    let early = client.request(9, "tools/list", json!({})).await;
    assert_error(&early, -32600, "send `initialize` before `tools/list`");
    assert_eq!(
        client.request(8, "ping", json!({})).await["result"],
        json!({})
    );

    let hello = client.initialize(json!({})).await;
    assert_eq!(hello["id"], 0);
    assert_eq!(hello["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(hello["result"]["serverInfo"]["name"], "talon");
    assert_eq!(
        hello["result"]["capabilities"]["tools"]["listChanged"],
        true
    );
    let again = client
        .request(1, "initialize", json!({"protocolVersion": "2025-06-18"}))
        .await;
    assert_error(&again, -32600, "already initialized");

    let tools = client.request(2, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"stall"),
        "{names:?}"
    );

    let echoed = client
        .request(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .await;
    assert_eq!(echoed["id"], 3);
    assert_eq!(echoed["result"]["content"][0]["text"], "hi");
    assert_eq!(echoed["result"]["isError"], false);

    let wrong = client
        .request(4, "tools/call", json!({"name": "echo", "arguments": {}}))
        .await;
    assert_eq!(
        wrong["result"]["isError"], true,
        "a tool's refusal is a result: {wrong}"
    );
    assert_eq!(
        client.request(5, "resources/list", json!({})).await["result"]["resources"],
        json!([])
    );

    client.finish().await;
}

#[tokio::test]
async fn a_new_client_is_offered_the_newest_version_it_did_not_name() {
    let mut client = Client::start();
    let hello = client
        .request(
            0,
            "initialize",
            json!({"protocolVersion": "1999-01-01", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}),
        )
        .await;
    assert_eq!(hello["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn bad_input_gets_errors_that_say_what_was_wrong() {
    let mut client = Client::start();
    client.initialize(json!({})).await;
    client.send_raw("{this is not json").await;
    let garbage = client.next().await;
    assert_eq!(garbage["id"], Value::Null);
    assert_eq!(garbage["error"]["code"], -32700);

    client
        .send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .await;
    let batch = client.next().await;
    assert_eq!(batch["error"]["code"], -32600);

    let unknown = client.request(2, "sampling/whatever", json!({})).await;
    assert_error(&unknown, -32601, "sampling/whatever");

    let nameless = client
        .request(3, "tools/call", json!({"arguments": {}}))
        .await;
    assert_error(&nameless, -32602, "missing field `name`");

    let level = client
        .request(4, "logging/setLevel", json!({"level": "loud"}))
        .await;
    assert_eq!(level["error"]["code"], -32602);
    // The session goes on after each of them.
    assert_eq!(
        client.request(5, "ping", json!({})).await["result"],
        json!({})
    );
}

#[tokio::test]
async fn progress_reaches_the_client_and_cancellation_stops_the_call() {
    let mut client = Client::start();
    client.initialize(json!({})).await;
    client
        .send(
            json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                     "params": {"name": "stall", "arguments": {},
                                "_meta": {"progressToken": "p1"}}}),
        )
        .await;
    let progress = client.next().await;
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    assert_eq!(progress["params"]["progressToken"], "p1");
    assert_eq!(progress["params"]["message"], "half way");

    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": "slow", "reason": "changed my mind"}}),
        )
        .await;
    // The cancelled call sends no answer: the next message is the answer to the next request.
    let after = client.request(7, "ping", json!({})).await;
    assert_eq!(after["id"], 7, "{after}");
}

#[tokio::test]
async fn a_second_call_under_a_running_calls_id_is_refused() {
    let mut client = Client::start();
    client.initialize(json!({})).await;
    let stall = json!({"jsonrpc": "2.0", "id": "same", "method": "tools/call",
                       "params": {"name": "stall", "arguments": {},
                                  "_meta": {"progressToken": "p1"}}});
    client.send(stall.clone()).await;
    let progress = client.next().await;
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    client.send(stall).await;
    let refused = client.next().await;
    assert_eq!(refused["id"], "same", "{refused}");
    assert_error(&refused, -32600, "already in use by a running tools/call");
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": "same"}}),
        )
        .await;
    let after = client.request(8, "ping", json!({})).await;
    assert_eq!(after["id"], 8, "{after}");
    client.finish().await;
}

#[tokio::test]
async fn closing_stdin_cancels_calls_that_outlive_the_grace() {
    let mut client = Client::start();
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "stall", "arguments": {}}}))
        .await;
    client.close_input().await;
    tokio::time::timeout(Duration::from_secs(30), client.served)
        .await
        .expect("the loop ends after the grace")
        .expect("joins")
        .expect("a clean end");
}

/// A 2026-07-28 client opens with `server/discover` and names the protocol in each request's
/// `_meta`; the loop hands such a session to rmcp, with what it has read, and rmcp serves it.
#[tokio::test]
async fn a_client_without_initialize_is_served_by_the_newer_protocol() {
    let mut client = Client::start();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    // Two requests in one write: the second is already buffered when the first hands over.
    client
        .send_raw(&format!(
            "{}\n{}",
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                   "params": {"_meta": meta}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "modern"}, "_meta": meta}})
        ))
        .await;
    let discovered = client.next().await;
    assert_eq!(discovered["id"], 1, "{discovered}");
    let versions = discovered["result"]["supportedVersions"].to_string();
    assert!(versions.contains("2026-07-28"), "{discovered}");
    let echoed = client.next().await;
    assert_eq!(echoed["id"], 2, "{echoed}");
    assert_eq!(echoed["result"]["content"][0]["text"], "modern", "{echoed}");
    client.finish().await;
}
