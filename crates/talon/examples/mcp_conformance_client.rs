//! `mcp_conformance_client URL`: the client the official MCP conformance suite launches against
//! each of its scenario servers (`crates/talon/tests/mcp_conformance.rs`, which builds this
//! example). It is test-harness code, not part of the shipped `talon` binary: it approves OAuth
//! sign-ins by itself and accepts every question.
//!
//! It does what any of Talon's remote-server connections does, through the bridge and nothing
//! else: connect (at the protocol version the suite asks for in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION`), and when the server demands authorization, sign in with
//! the bridge's OAuth ([`talon_bridge::oauth::login`]) and connect again; then list the tools and
//! call each one with arguments made from its input schema. What a person would do is scripted:
//! approving the sign-in in a browser is a fetch of the authorization URL (the suite's
//! authorization servers approve at once and redirect to the bridge's loopback callback), and a
//! server's question to the user is accepted as shown. Tokens
//! live in memory for the run; a pre-registered client comes from `MCP_CONFORMANCE_CONTEXT`.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use talon_bridge::oauth::{self, OAuthConfig, TokenVault, VaultFuture};
use talon_bridge::{HttpConfig, Server, ServerError, Transport};

/// The server's name inside the bridge (only in messages).
const NAME: &str = "conformance";
/// A client ID metadata document URL, used where the authorization server supports them.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
/// Sign-ins and reconnections allowed in one run (a server that keeps asking is refused).
const MAX_SIGN_INS: usize = 3;
const TIMEOUT: Duration = Duration::from_secs(20);

/// Tokens kept in memory for one run.
#[derive(Default)]
struct MemoryVault(Mutex<BTreeMap<String, String>>);

impl TokenVault for MemoryVault {
    fn load<'a>(&'a self, server: &'a str) -> VaultFuture<'a, Option<String>> {
        let value = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(server)
            .cloned();
        Box::pin(async move { Ok(value) })
    }

    fn save<'a>(&'a self, server: &'a str, tokens: String) -> VaultFuture<'a, ()> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(server.to_string(), tokens);
        Box::pin(async { Ok(()) })
    }

    fn clear<'a>(&'a self, server: &'a str) -> VaultFuture<'a, ()> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(server);
        Box::pin(async { Ok(()) })
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .init();
    // The suite appends the scenario server's URL to the command it was given.
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: mcp_conformance_client URL");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(session(&url)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("talon conformance client: {e}");
            ExitCode::from(1)
        }
    }
}

fn oauth_config() -> OAuthConfig {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(String::from);
    OAuthConfig {
        client_id: text("client_id"),
        client_secret: text("client_secret"),
        client_metadata_url: Some(CLIENT_METADATA_URL.to_string()),
        scopes: Vec::new(),
        vault: Arc::new(MemoryVault::default()),
    }
}

/// "Approves" the sign-in: follows the authorization URL's redirects to the callback.
fn approve(auth_url: &str) {
    let url = auth_url.to_string();
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        if let Err(e) = client.get(&url).send().await {
            eprintln!("talon conformance client: the authorization request failed: {e}");
        }
    });
}

async fn session(url: &str) -> Result<(), ServerError> {
    let mut http = HttpConfig {
        url: url.to_string(),
        headers: BTreeMap::new(),
        bearer: None,
        oauth: None,
        protocol_version: std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").ok(),
    };
    let oauth = oauth_config();
    let mut sign_ins = 0;
    loop {
        match attempt(&http).await {
            // The server wants a token, or one with more scopes (a step-up): sign in for what
            // its challenge names, as `talon mcp-servers login` would, and start again on a
            // connection that carries the new token.
            Err(
                ServerError::NeedsAuth { challenge, .. }
                | ServerError::NeedsLogin { challenge, .. }
                | ServerError::NeedsScope { challenge, .. },
            ) if sign_ins < MAX_SIGN_INS => {
                sign_ins += 1;
                http.oauth = Some(oauth.clone());
                let challenge = challenge.as_deref();
                oauth::login_for(NAME, &http, &oauth, challenge, approve, TIMEOUT).await?;
            }
            other => return other,
        }
    }
}

/// Connects, lists the tools and makes the calls.
async fn attempt(http: &HttpConfig) -> Result<(), ServerError> {
    let server = Server::start(NAME, &Transport::Http(http.clone()), TIMEOUT).await?;
    let tools = server.tools(TIMEOUT).await?;
    for (name, arguments) in planned_calls(&tools) {
        let user = talon_core::ClientHandle(Arc::new(AcceptAsShown));
        let answer = server
            .call(&name, arguments, TIMEOUT, None, Some(user))
            .await?;
        println!("{name}: {answer}");
    }
    server.close(Duration::from_secs(2)).await;
    Ok(())
}

/// The user behind the calls: accepts every question as the form presents it, changing
/// nothing (the bridge then fills in the schema's defaults, SEP-1034).
struct AcceptAsShown;

impl talon_core::ClientRequests for AcceptAsShown {
    fn elicit(&self, _params: Value) -> talon_core::context::ClientFuture {
        Box::pin(async { Ok(json!({"action": "accept", "content": {}})) })
    }
}

/// The calls to make: those the scenario names in `MCP_CONFORMANCE_CONTEXT.toolCalls` (what a
/// model would have asked for), else each listed tool once with arguments made from its schema.
/// In the schema-preservation scenario, a tool taking a `schema` is given the input schema of
/// the other tool as Talon listed it, which shows whether it reached Talon's side unchanged.
fn planned_calls(tools: &[talon_bridge::server::ListedTool]) -> Vec<(String, Value)> {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    if let Some(calls) = context.get("toolCalls").and_then(Value::as_array) {
        return calls
            .iter()
            .filter_map(|c| {
                let name = c.get("name")?.as_str()?.to_string();
                Some((name, c.get("arguments").cloned().unwrap_or(json!({}))))
            })
            .collect();
    }
    let echo = std::env::var("MCP_CONFORMANCE_SCENARIO")
        .is_ok_and(|s| s == "json-schema-2020-12-preservation");
    let takes_schema = |t: &talon_bridge::server::ListedTool| {
        t.input_schema.pointer("/properties/schema").is_some()
    };
    let echoed = tools.iter().find(|t| !takes_schema(t));
    tools
        .iter()
        .map(|tool| {
            let arguments = match echoed {
                Some(other) if echo && takes_schema(tool) => json!({"schema": other.input_schema}),
                _ => arguments_for(&tool.input_schema),
            };
            (tool.name.clone(), arguments)
        })
        .collect()
}

/// Arguments a caller would give: a plain value of each required property's type.
fn arguments_for(schema: &Value) -> Value {
    let mut out = Map::new();
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in required.iter().filter_map(Value::as_str) {
        let kind = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match kind {
            "number" | "integer" => json!(1),
            "boolean" => json!(false),
            "array" => json!([]),
            "object" => json!({}),
            _ => json!("conformance"),
        };
        out.insert(name.to_string(), value);
    }
    Value::Object(out)
}
