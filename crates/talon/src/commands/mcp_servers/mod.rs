//! `talon mcp-servers`: the MCP servers Talon bridges (from `talon.toml` and the store), who may
//! use them, and requests for access. Changes reach running gateways without a restart.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use talon_store::{GrantSpec, RequestStatus, Store, SubjectKind};

mod connect;

use connect::{login, logout, test};

use super::cli_credentials::read_pairs;
use super::{fail, operator, refused, said, usage_error};
use crate::config::Config;
use crate::mcp_servers_config::McpServerSection;
use crate::store;
use talon_runtime::mcp_admin::{McpAdmin, grant_json, request_json};

/// `talon mcp-servers …`
#[derive(Debug, Subcommand)]
pub enum McpServersCommand {
    /// Add a server (stored; header and env values encrypted). Running gateways connect it.
    Add(Box<AddArgs>),
    /// List the servers of talon.toml and of the store.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a stored server with its grants; running gateways disconnect it.
    Remove {
        /// The server.
        name: String,
    },
    /// Connect to a server now and list its tools (exit 1 when it cannot be used).
    Test {
        /// The server.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sign in to a server with OAuth: opens the browser ($BROWSER) and waits for the callback.
    Login {
        /// The server.
        name: String,
        /// Print the URL instead of opening a browser.
        #[arg(long)]
        no_browser: bool,
    },
    /// Delete a server's OAuth tokens.
    Logout {
        /// The server.
        name: String,
    },
    /// Grant a server to an agent or a user (replacing their grant).
    Grant(GrantArgs),
    /// Withdraw an agent's or a user's grant.
    Revoke(SubjectArgs),
    /// List grants (of one server, or all).
    Grants {
        /// Only this server's grants.
        server: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask for access to a server (an administrator approves or rejects it).
    Request(RequestArgs),
    /// List access requests.
    Requests {
        /// pending, approved or rejected (default: all).
        #[arg(long)]
        status: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending request: creates the grant it asks for.
    Approve(ReviewArgs),
    /// Reject a pending request.
    Reject(ReviewArgs),
}

/// `talon mcp-servers add …`
#[derive(Debug, Args)]
pub struct AddArgs {
    /// Letters, digits, _ and -.
    name: String,
    /// A stdio server: the program (its arguments follow `--`).
    #[arg(long, conflicts_with = "url")]
    command: Option<String>,
    /// A remote server: its URL (streamable HTTP unless --transport sse).
    #[arg(long)]
    url: Option<String>,
    /// stdio, http or sse (default: from --command or --url).
    #[arg(long)]
    transport: Option<String>,
    /// NAME=VALUE added to a stdio server's environment; repeatable (prefer --secrets-from-stdin).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// NAME=VALUE header sent to a remote server; repeatable (prefer --secrets-from-stdin).
    #[arg(long = "header", value_name = "NAME=VALUE")]
    headers: Vec<String>,
    /// Read env (stdio) or header (http, sse) NAME=VALUE lines from stdin.
    #[arg(long)]
    secrets_from_stdin: bool,
    /// A stdio server's working directory.
    #[arg(long)]
    cwd: Option<String>,
    /// GoClaw dialect: the tool-name prefix replacing mcp_<server>.
    #[arg(long)]
    prefix: Option<String>,
    /// Seconds the server has to start and answer the handshake (default 30).
    #[arg(long, value_name = "SECONDS")]
    startup_timeout: Option<u64>,
    /// Seconds a tool call may take (default 60).
    #[arg(long, value_name = "SECONDS")]
    tool_timeout: Option<u64>,
    /// Characters of a tool's result kept for the model (longer results are cut).
    #[arg(long, value_name = "CHARS")]
    max_output_chars: Option<u64>,
    /// Gateways do not start without it.
    #[arg(long)]
    required: bool,
    /// Only agents and users with a grant may use it.
    #[arg(long)]
    require_grant: bool,
    /// Sign in with OAuth 2.1 (then `talon mcp-servers login NAME`).
    #[arg(long)]
    oauth: bool,
    /// OAuth: a client registered beforehand (default: dynamic registration).
    #[arg(long, requires = "oauth")]
    oauth_client_id: Option<String>,
    /// OAuth: Talon's client metadata document URL (HTTPS).
    #[arg(long, requires = "oauth")]
    oauth_client_metadata_url: Option<String>,
    /// OAuth: a scope to ask for; repeatable.
    #[arg(long = "oauth-scope", requires = "oauth")]
    oauth_scopes: Vec<String>,
    /// Streamable HTTP: the MCP protocol version to speak (default auto: server/discover, then initialize if refused).
    #[arg(long, value_name = "VERSION")]
    protocol_version: Option<String>,
    /// Store it without connecting it.
    #[arg(long)]
    disabled: bool,
    /// Replace a stored server of this name (its secrets stay unless new ones are given).
    #[arg(long)]
    replace: bool,
    /// The stdio server's arguments.
    #[arg(last = true)]
    args: Vec<String>,
}

/// Whom a grant is for.
#[derive(Debug, Args)]
pub struct SubjectArgs {
    /// The server.
    server: String,
    /// The agent the grant is for.
    #[arg(long, conflicts_with = "user", required_unless_present = "user")]
    agent: Option<String>,
    /// The user the grant is for.
    #[arg(long)]
    user: Option<String>,
}

impl SubjectArgs {
    fn subject(&self) -> Result<(SubjectKind, String), ExitCode> {
        SubjectKind::of(self.agent.clone(), self.user.clone()).map_err(usage_error)
    }
}

/// `talon mcp-servers grant …`
#[derive(Debug, Args)]
pub struct GrantArgs {
    #[command(flatten)]
    who: SubjectArgs,
    /// Tools allowed (the server's own names, comma-separated); default every tool.
    #[arg(long, value_delimiter = ',')]
    allow: Vec<String>,
    /// Tools refused even when allowed (comma-separated).
    #[arg(long, value_delimiter = ',')]
    deny: Vec<String>,
    /// Record a grant that refuses the server outright.
    #[arg(long)]
    disabled: bool,
}

/// `talon mcp-servers request …`
#[derive(Debug, Args)]
pub struct RequestArgs {
    #[command(flatten)]
    who: SubjectArgs,
    /// Tools asked for (comma-separated); default every tool.
    #[arg(long, value_delimiter = ',')]
    tools: Vec<String>,
    /// Why the access is needed, for whoever reviews the request.
    #[arg(long, default_value = "")]
    reason: String,
}

/// `talon mcp-servers approve|reject …`
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The request's id (from `talon mcp-servers requests`).
    id: i64,
    /// A note recorded with the decision.
    #[arg(long, default_value = "")]
    note: String,
}

/// Runs one `talon mcp-servers` subcommand.
pub async fn run(config: Config, data_dir: &Path, command: McpServersCommand) -> ExitCode {
    let store = match store::open(&config, data_dir).await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let configured: Vec<String> = config.mcp_servers.keys().cloned().collect();
    let admin = McpAdmin {
        store: &store,
        configured: &configured,
    };
    match command {
        McpServersCommand::Add(args) => add(&admin, *args).await,
        McpServersCommand::List { json } => list(&config, &store, json).await,
        McpServersCommand::Remove { name } => said(admin.remove_server(&name).await, |()| {
            format!("removed {name} with its grants")
        }),
        McpServersCommand::Test { name, json } => test(&config, &store, &name, json).await,
        McpServersCommand::Login { name, no_browser } => {
            login(&config, &store, &name, no_browser).await
        }
        McpServersCommand::Logout { name } => logout(&config, &store, &name).await,
        McpServersCommand::Grant(args) => {
            let (kind, subject) = match args.who.subject() {
                Ok(s) => s,
                Err(code) => return code,
            };
            let grant = GrantSpec {
                server: args.who.server.clone(),
                kind,
                subject,
                enabled: !args.disabled,
                tool_allow: args.allow,
                tool_deny: args.deny,
                granted_by: operator(),
            };
            said(admin.put_grant(&grant).await, |()| {
                format!(
                    "{}: granted to {} {}",
                    grant.server,
                    grant.kind.as_str(),
                    grant.subject
                )
            })
        }
        McpServersCommand::Revoke(who) => {
            let (kind, subject) = match who.subject() {
                Ok(s) => s,
                Err(code) => return code,
            };
            said(
                admin.remove_grant(&who.server, kind, &subject).await,
                |()| format!("{}: revoked from {} {subject}", who.server, kind.as_str()),
            )
        }
        McpServersCommand::Grants { server, json } => {
            match store.mcp_grants(server.as_deref()).await {
                Ok(grants) => {
                    let rows: Vec<_> = grants.iter().map(grant_json).collect();
                    print_rows(&rows, json, |r| {
                        format!(
                            "{}\t{} {}\t{}\tallow={}\tdeny={}",
                            r["server"].as_str().unwrap_or_default(),
                            r["kind"].as_str().unwrap_or_default(),
                            r["subject"].as_str().unwrap_or_default(),
                            if r["enabled"].as_bool() == Some(true) {
                                "enabled"
                            } else {
                                "disabled"
                            },
                            list_or_all(&r["allow"]),
                            list_or_all(&r["deny"]),
                        )
                    });
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        McpServersCommand::Request(args) => {
            let (kind, subject) = match args.who.subject() {
                Ok(s) => s,
                Err(code) => return code,
            };
            said(
                admin
                    .request_access(
                        &args.who.server,
                        (kind, &subject),
                        &args.tools,
                        &args.reason,
                        &operator(),
                    )
                    .await,
                |id| {
                    format!(
                        "request {id} filed; an administrator approves it with `talon mcp-servers approve {id}`"
                    )
                },
            )
        }
        McpServersCommand::Requests { status, json } => {
            let status = match status.as_deref().map(RequestStatus::parse).transpose() {
                Ok(s) => s,
                Err(e) => return usage_error(e),
            };
            match store.mcp_access_requests(status).await {
                Ok(requests) => {
                    let rows: Vec<_> = requests.iter().map(request_json).collect();
                    print_rows(&rows, json, |r| {
                        format!(
                            "{}\t{}\t{}\t{} {}\ttools={}\t{}",
                            r["id"],
                            r["status"].as_str().unwrap_or_default(),
                            r["server"].as_str().unwrap_or_default(),
                            r["kind"].as_str().unwrap_or_default(),
                            r["subject"].as_str().unwrap_or_default(),
                            list_or_all(&r["tools"]),
                            r["reason"].as_str().unwrap_or_default(),
                        )
                    });
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        McpServersCommand::Approve(args) => review(&store, args, true).await,
        McpServersCommand::Reject(args) => review(&store, args, false).await,
    }
}

fn list_or_all(v: &serde_json::Value) -> String {
    match v.as_array() {
        Some(items) if !items.is_empty() => items
            .iter()
            .filter_map(|i| i.as_str())
            .collect::<Vec<_>>()
            .join(","),
        _ => "*".into(),
    }
}

fn print_rows(rows: &[serde_json::Value], json: bool, line: impl Fn(&serde_json::Value) -> String) {
    if json {
        println!("{}", serde_json::Value::Array(rows.to_vec()));
    } else if rows.is_empty() {
        println!("(none)");
    } else {
        // Requests carry their requester's words.
        for row in rows {
            println!("{}", talon_core::visible::visible(&line(row)));
        }
    }
}

async fn review(store: &Store, args: ReviewArgs, approve: bool) -> ExitCode {
    match store
        .review_mcp_access(args.id, approve, &operator(), &args.note)
        .await
    {
        Ok(r) if approve => {
            println!(
                "request {} approved: {} {} may use {}",
                r.id,
                r.kind.as_str(),
                r.subject,
                r.server
            );
            ExitCode::SUCCESS
        }
        Ok(r) => {
            println!("request {} rejected", r.id);
            ExitCode::SUCCESS
        }
        Err(e) => refused(e),
    }
}

async fn add(admin: &McpAdmin<'_>, args: AddArgs) -> ExitCode {
    // The arguments are a server section like talon.toml's, turned into a record by its rule.
    let stdio = args.url.is_none() && args.transport.as_deref().is_none_or(|t| t == "stdio");
    let stdin_target = if stdio { "env" } else { "header" };
    let from_stdin = args.secrets_from_stdin;
    let env = match read_pairs("an --env entry", &args.env, from_stdin && stdio) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let headers = match read_pairs("a --header entry", &args.headers, from_stdin && !stdio) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if (stdio && !headers.is_empty()) || (!stdio && !env.is_empty()) {
        return usage_error(format!(
            "a {} server takes --{stdin_target} entries only",
            if stdio { "stdio" } else { "remote" }
        ));
    }
    let given = !env.is_empty() || !headers.is_empty() || !args.replace;
    let section = McpServerSection {
        transport: args.transport,
        command: args.command,
        args: args.args,
        env: env.into_iter().collect(),
        cwd: args.cwd.map(PathBuf::from),
        url: args.url,
        headers,
        bearer_token_env: None,
        prefix: args.prefix,
        startup_timeout_secs: args.startup_timeout,
        tool_timeout_secs: args.tool_timeout,
        max_output_chars: args.max_output_chars,
        required: args.required,
        require_grant: args.require_grant,
        oauth: args.oauth,
        oauth_client_id: args.oauth_client_id,
        oauth_client_secret_env: None,
        oauth_client_metadata_url: args.oauth_client_metadata_url,
        oauth_scopes: args.oauth_scopes,
        protocol_version: args.protocol_version,
        enabled: !args.disabled,
    };
    said(
        admin
            .add_server(&args.name, section, args.replace, given)
            .await,
        |spec| {
            format!(
                "{} {} ({}); running gateways connect it within seconds",
                if args.replace { "changed" } else { "added" },
                spec.name,
                spec.transport
            )
        },
    )
}

async fn list(config: &Config, store: &Store, json: bool) -> ExitCode {
    let rows = match talon_runtime::mcp_admin::listed_servers(config, store).await {
        Ok(rows) => rows,
        Err(e) => return refused(e),
    };
    print_rows(&rows, json, |r| {
        let mut flags = Vec::new();
        if let Some(state) = r["oauth"].as_str() {
            flags.push(if state == "needs login" {
                "OAuth: needs login (talon mcp-servers login NAME)"
            } else {
                "OAuth: signed in"
            });
        }
        if r["enabled"].as_bool() != Some(true) {
            flags.push("disabled");
        }
        if r["required"].as_bool() == Some(true) {
            flags.push("required");
        }
        if r["require_grant"].as_bool() == Some(true) {
            flags.push("grant required");
        }
        format!(
            "{}\t{}\t{}\t{}\t{}",
            r["name"].as_str().unwrap_or_default(),
            r["transport"].as_str().unwrap_or_default(),
            r["target"].as_str().unwrap_or_default(),
            r["source"].as_str().unwrap_or_default(),
            flags.join(", ")
        )
    });
    ExitCode::SUCCESS
}
