//! `talon`: the CLI that wires Talon's crates together.
//!
//! # Charter
//!
//! - **Owns:** the `talon` binary: commands, terminal prompts and forms, exit codes.
//! - **Never contains:** logic the HTTP API also needs (that is the runtime's typed operations).
//! - **A new feature goes:** a new command is a module under `commands` calling the runtime.

mod commands;
mod prompt;
mod tty_questions;

// The runtime's modules under the names the commands use.
use talon_runtime::{
    agent_runs, config, mcp_servers_config, runner, runs, runtime, spinner, store,
};

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The version `--version` prints: the package's and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TALON_COMMIT"),
    ")"
);

/// Talon: the tools system for AI agents.
#[derive(Debug, Parser)]
#[command(name = "talon", version = VERSION, about)]
struct Cli {
    /// Configuration file (default: $TALON_CONFIG, ./talon.toml, ~/.config/talon/talon.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (default: $TALON_DATA_DIR, $XDG_DATA_HOME/talon, ~/.local/share/talon).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway: the dashboard at /, MCP at /mcp, OpenAI's /v1/chat/completions and
    /// /v1/models, Anthropic's /v1/messages, /v1/sessions, /v1/tools and /v1/tools/invoke,
    /// /v1/approvals, /v1/questions, /v1/events, /v1/agents, /v1/runs, the /v1/mcp-*
    /// administration routes and /healthz.
    Serve {
        /// Listen address (default 127.0.0.1:8790, or gateway.bind).
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
        /// One workspace for every caller (default: gateway.workspace, else
        /// <data-dir>/workspaces/<agent>/<user>, one per agent and user).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Serve the effective tool set over MCP on stdin/stdout.
    Mcp {
        /// Workspace the tools work in (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Tool profile: full, coding, messaging or minimal (overrides tools.profile).
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// Agent the calls run as (default: [agents] default, "default" unless configured).
        #[arg(long, value_name = "KEY")]
        agent: Option<String>,
        /// Ask approvals on this process's terminal (/dev/tty). Off by default: an MCP client
        /// that runs in the same terminal (Claude Code) owns its screen and keyboard.
        #[arg(long)]
        tty_approvals: bool,
    },
    /// Inspect tools.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Run tools.
    Tool {
        #[command(subcommand)]
        command: ToolCommand,
    },
    /// Database schema: show the version (status, the default) or apply migrations (up).
    Migrate {
        #[command(subcommand)]
        command: Option<MigrateCommand>,
    },
    /// Manage agents and their context files (SOUL.md, USER.md, …).
    Agents {
        #[command(subcommand)]
        command: AgentsCommand,
    },
    /// Manage secrets encrypted at rest.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
    /// Register CLIs (gh, aws, …) that agents run with stored credentials, and grant them.
    CliCredentials {
        #[command(subcommand)]
        command: commands::cli_credentials::CliCredentialsCommand,
    },
    /// The MCP servers Talon bridges, who may use them, and requests for access.
    McpServers {
        #[command(subcommand)]
        command: commands::mcp_servers::McpServersCommand,
    },
    /// Agent runs (subagents): list, show, cancel.
    Runs {
        #[command(subcommand)]
        command: commands::runs::RunsCommand,
    },
    /// Scheduled jobs (at, every, cron) run as agent runs by the gateway: list, add, update,
    /// remove, run, runs.
    Cron {
        #[command(subcommand)]
        command: commands::cron::CronCommand,
    },
    /// Agent teams: create, add and remove members, show their task boards.
    Teams {
        #[command(subcommand)]
        command: commands::teams::TeamsCommand,
    },
    /// Custom tools: shell commands defined at run time, loaded by running gateways.
    CustomTools {
        #[command(subcommand)]
        command: commands::custom_tools::CustomToolsCommand,
    },
    /// Skills: list and show what every source offers, publish and remove the store's.
    Skills {
        #[command(subcommand)]
        command: commands::skills::SkillsCommand,
    },
    /// Calls waiting for approval on a running `talon serve`: list, allow, deny.
    Approvals {
        #[command(flatten)]
        target: commands::waiting::Target,
        #[command(subcommand)]
        command: commands::waiting::ApprovalsCommand,
    },
    /// Tools' questions to users waiting on a running `talon serve`: list, answer.
    Questions {
        #[command(flatten)]
        target: commands::waiting::Target,
        #[command(subcommand)]
        command: commands::waiting::QuestionsCommand,
    },
    /// Talk to an agent: interactive, or one prompt with `-p`.
    Chat {
        /// The agent (default: `[agents] default`).
        #[arg(long)]
        agent: Option<String>,
        /// Continue this session (default: a new one).
        #[arg(long)]
        session: Option<String>,
        /// Run one prompt non-interactively and exit.
        #[arg(short = 'p', long = "print", value_name = "PROMPT")]
        prompt: Option<String>,
        /// How `-p` prints: text (streamed), json (one object), stream-json (events, then the
        /// result).
        #[arg(long, value_enum, default_value = "text")]
        output_format: commands::OutputFormat,
        /// One workspace for the agent's tools (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Start in this permission mode: default, acceptEdits, bypassPermissions, plan (only
        /// read-only tools until the user approves a plan), dontAsk.
        #[arg(long, value_name = "MODE")]
        permission_mode: Option<talon_core::permission::PermissionMode>,
    },
    /// A scripted OpenAI- and Anthropic-compatible model server for offline demos and tests.
    MockProvider {
        /// The script: a JSON file with the turns to answer, in order.
        #[arg(long, value_name = "FILE")]
        script: PathBuf,
        /// Listen address.
        #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
        listen: String,
        /// Answer `/v1/embeddings` with this local sentence model (a directory with
        /// config.json, tokenizer.json, model.safetensors) instead of hashed words.
        #[arg(long, value_name = "DIR")]
        embedding_model: Option<PathBuf>,
    },
    /// Write a commented talon.toml (default: $TALON_CONFIG, else ~/.config/talon/talon.toml).
    Init {
        /// Where to write it.
        #[arg(long, value_name = "FILE")]
        path: Option<PathBuf>,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
        /// Print a new random gateway token (for `gateway.token`) and write nothing.
        #[arg(long, conflicts_with_all = ["path", "force"])]
        token: bool,
    },
    /// The effective configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// A shell completion script on stdout (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Which sandbox backends work on this host, which one is active, and how to fix the others.
    /// Exit 0 when the configured backend works, 1 otherwise.
    Doctor {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Every value set (by the file or a TALON_* variable) and where it came from; secrets masked.
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum MigrateCommand {
    /// Show the schema version and pending migrations.
    Status,
    /// Apply pending migrations.
    Up,
}

#[derive(Debug, Subcommand)]
enum AgentsCommand {
    /// Create an agent, or update its type and settings.
    Create {
        /// The agent's key (letters, digits, `-`, `_`).
        key: String,
        /// open (context files per user) or predefined (shared files; only USER.md per user).
        #[arg(long = "type", default_value = "open")]
        agent_type: String,
        /// Settings as JSON.
        #[arg(long, default_value = "{}")]
        settings: String,
    },
    /// List agents.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set a context file (e.g. SOUL.md) from a file, or from stdin with `--from -`.
    SetFile {
        /// The agent.
        key: String,
        /// File name, e.g. SOUL.md.
        file: String,
        /// Where the content comes from: a file, or `-` for stdin.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
        /// Set the user's own copy instead of the agent's.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
    },
    /// Print a context file: the agent's own, or with --user that user's copy.
    GetFile {
        /// The agent.
        key: String,
        /// File name, e.g. SOUL.md.
        file: String,
        /// The user whose own copy to print.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
    },
    /// List an agent's context files (with --user: that user's own copies).
    ListFiles {
        /// The agent.
        key: String,
        /// The user whose own copies to list.
        #[arg(long, value_name = "ID")]
        user: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete an agent and its context files (its sessions and memory stay in the store).
    Delete {
        /// The agent.
        key: String,
    },
    /// Let SOURCE delegate to TARGET (an agent link; replaces an existing one).
    Link {
        /// The agent that delegates.
        source: String,
        /// The agent it delegates to.
        target: String,
        /// TARGET may delegate to SOURCE as well.
        #[arg(long)]
        bidirectional: bool,
        /// Live delegations over the link at most.
        #[arg(long, default_value_t = 3)]
        max_concurrent: i64,
        /// Only these users may delegate over the link (repeat for several).
        #[arg(long = "allow-user", value_name = "ID")]
        allow_users: Vec<String>,
        /// These users may not (repeat for several).
        #[arg(long = "deny-user", value_name = "ID")]
        deny_users: Vec<String>,
    },
    /// Remove the link from SOURCE to TARGET.
    Unlink {
        /// The agent that delegates.
        source: String,
        /// The agent it delegates to.
        target: String,
    },
    /// List agent links.
    Links {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum SecretsCommand {
    /// Store a secret; the value is read from stdin (an empty value is refused).
    Set {
        /// The secret's name.
        name: String,
    },
    /// List secret names (never values).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a secret.
    Delete {
        /// The secret's name.
        name: String,
    },
    /// Generate a new key and re-encrypt every secret with it.
    RotateKey,
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// The effective tool set after policy.
    List {
        /// Tool profile: full, coding, messaging or minimal (overrides tools.profile).
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// The agent whose tool set to show (default: [agents] default).
        #[arg(long, value_name = "KEY")]
        agent: Option<String>,
        /// Provider whose overrides apply.
        #[arg(long, value_name = "NAME")]
        provider: Option<String>,
        /// Print JSON (name, description, risk, groups, schema) instead of a table.
        #[arg(long)]
        json: bool,
        /// The tool names to show where both dialects have a tool for the job when the
        /// configuration names no [tools] dialect: goclaw (the default: what MCP clients and the
        /// tools API see), claude_code, or both.
        #[arg(long, value_name = "DIALECT", value_parser = dialect)]
        dialect: Option<talon_core::policy::Dialect>,
    },
}

fn dialect(name: &str) -> Result<talon_core::policy::Dialect, String> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|_| format!("{name:?}: use goclaw, claude_code or both"))
}

#[derive(Debug, Subcommand)]
enum ToolCommand {
    /// One call through the pipeline. Exit 0: ok; 1: the tool failed or was refused; 2: usage error.
    Call {
        /// Tool name (aliases work).
        name: String,
        /// Arguments as a JSON object; `-` reads it from stdin.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// Workspace the tool works in (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// The agent the call runs as (default: [agents] default).
        #[arg(long, value_name = "KEY")]
        agent: Option<String>,
        /// Print the whole outcome as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TALON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Logs go to stderr: stdout is the MCP transport for `talon mcp`.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn main() -> ExitCode {
    // Inside a proxy-mode sandbox: the network bridge that runs the command (internal, see
    // talon_exec::sandbox::network; no configuration exists in there to read).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == talon_exec::sandbox::HELPER_SUBCOMMAND)
    {
        return ExitCode::from(talon_exec::sandbox::helper_main(
            args.get(2..).unwrap_or_default(),
        ));
    }
    // The Landlock backend's wrapper: confines itself, then executes the command (internal,
    // see talon_exec::sandbox::landlock; before the CLI, the configuration and any thread).
    if args
        .get(1)
        .is_some_and(|a| talon_exec::sandbox::landlock::is_helper(a))
    {
        return commands::sandbox_landlock::run(args.get(2..).unwrap_or_default());
    }
    // Inside a session sandbox: the init that runs the session's commands (internal; never
    // typed by a person, so it bypasses the CLI and the async runtime).
    if args
        .get(1)
        .is_some_and(|a| a == talon_exec::session::INIT_SUBCOMMAND)
    {
        return match talon_exec::session::init::serve(args.get(2..).unwrap_or_default()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("talon sandbox init: {e}");
                ExitCode::from(1)
            }
        };
    }
    // A parser of untrusted bytes (a PDF a tool reads), bounded and confined before it reads
    // anything (internal, see talon_tools::untrusted_parse).
    if args
        .get(1)
        .is_some_and(|a| a == talon_tools::untrusted_parse::SUBCOMMAND)
    {
        return ExitCode::from(talon_tools::untrusted_parse::helper_main(
            args.get(2..).unwrap_or_default(),
        ));
    }
    let cli = Cli::parse();
    // rmcp logs its sessions' internals (debug dumps of every message and error) at info
    // and above; Talon reports what matters itself, so rmcp speaks only when TALON_LOG asks.
    init_logging(if matches!(cli.command, Command::Serve { .. }) {
        "info,rmcp=off"
    } else {
        "warn,rmcp=off"
    });
    // Only the gateway serves many clients at once. Everything else (`talon mcp` serving one
    // client over stdio, one message at a time; one-shot commands such as `talon tool call`)
    // runs on a single-threaded runtime: no cross-thread hand-off per call and no worker
    // threads to start. Tools that need parallelism (search) use their own threads.
    let mut builder = if matches!(cli.command, Command::Serve { .. }) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("talon: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(commands::run(cli))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Issue 23: every argument and subcommand says what it is in `--help`.
    #[test]
    fn every_argument_has_help() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                if sub.get_about().is_none() && sub.get_long_about().is_none() {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "talon", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }
}
