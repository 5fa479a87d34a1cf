//! `talon __mcp-conformance-client URL` (hidden): the client the official MCP conformance suite
//! launches against each of its scenario servers (`crates/talon/tests/mcp_conformance.rs`).
//!
//! It does what any of Talon's remote-server connections does, through the bridge and nothing
//! else: connect (at the protocol version the suite asks for in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION`), and when the server demands authorization, sign in with
//! the bridge's OAuth ([`talon_bridge::oauth::login`]) and connect again; then list the tools and
//! call each one with arguments made from its input schema. The one thing a person would do,
//! approving the sign-in in a browser, is done by fetching the authorization URL: the suite's
//! authorization servers approve at once and redirect to the bridge's loopback callback. Tokens
//! live in memory for the run; a pre-registered client comes from `MCP_CONFORMANCE_CONTEXT`.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use talon_bridge::oauth::{OAuthConfig, TokenVault, VaultFuture};
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

pub async fn run(args: &[String]) -> ExitCode {
    let Some(url) = args.last() else {
        eprintln!("usage: talon __mcp-conformance-client URL");
        return ExitCode::from(super::USAGE);
    };
    match session(url).await {
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
    };
    let oauth = oauth_config();
    let mut sign_ins = 0;
    let server = loop {
        match Server::start(NAME, &Transport::Http(http.clone()), TIMEOUT).await {
            Ok(server) => break server,
            Err(
                ServerError::NeedsAuth { .. }
                | ServerError::NeedsLogin { .. }
                | ServerError::NeedsScope { .. },
            ) if sign_ins < MAX_SIGN_INS => {
                sign_ins += 1;
                http.oauth = Some(oauth.clone());
                talon_bridge::oauth::login(NAME, &http, &oauth, approve, TIMEOUT).await?;
            }
            Err(e) => return Err(e),
        }
    };
    let tools = server.tools(TIMEOUT).await?;
    for tool in &tools {
        let arguments = arguments_for(&tool.input_schema);
        let mut answer = server
            .call(&tool.name, arguments.clone(), TIMEOUT, None, None)
            .await;
        while let Err(ServerError::NeedsScope { .. } | ServerError::NeedsLogin { .. }) = answer {
            if sign_ins >= MAX_SIGN_INS {
                break;
            }
            sign_ins += 1;
            talon_bridge::oauth::login(NAME, &http, &oauth, approve, TIMEOUT).await?;
            answer = server
                .call(&tool.name, arguments.clone(), TIMEOUT, None, None)
                .await;
        }
        let answer = answer?;
        println!("{}: {answer}", tool.name);
    }
    server.close(Duration::from_secs(2)).await;
    Ok(())
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
