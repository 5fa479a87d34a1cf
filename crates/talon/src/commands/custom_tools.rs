//! `talon custom-tools add|list|show|update|remove`: shell tools defined at run time, stored
//! (variables encrypted) and loaded by every running gateway within seconds. Definitions go
//! through the same check as the HTTP API's (`talon_runtime::custom_tools::define`). What a
//! definition says is printed with control characters made visible.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use talon_core::visible::visible;
use talon_runtime::custom_tools::{CustomToolPatch, DefineError, define, parameter_schema, update};
use talon_store::{CustomToolSpec, StoredCustomTool};

use super::cli_credentials::read_pairs;
use super::{fail, operator, refused, said};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub enum CustomToolsCommand {
    /// Define a tool: a shell command with {{.name}} placeholders for its parameters.
    Add(AddArgs),
    /// Every custom tool (variable names, never values).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One tool's definition.
    Show {
        /// The tool's name.
        name: String,
    },
    /// Change some of a tool's fields.
    Update(UpdateArgs),
    /// Remove a tool and its variables.
    Remove {
        /// The tool's name.
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The tool's name (lowercase letters, digits, _ and -; no built-in tool's name).
    name: String,
    /// What the tool does and when to use it (the model reads this).
    #[arg(long)]
    description: String,
    /// The shell command, e.g. 'wc -l {{.path}}' (each value is passed shell-quoted).
    #[arg(long)]
    command: String,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The tool's name.
    name: String,
    /// A new description.
    #[arg(long)]
    description: Option<String>,
    /// A new command.
    #[arg(long)]
    command: Option<String>,
    /// Enable the tool.
    #[arg(long, conflicts_with = "disable")]
    enable: bool,
    /// Disable the tool (it stays stored, no agent sees it).
    #[arg(long)]
    disable: bool,
    /// Remove every variable.
    #[arg(long, conflicts_with_all = ["env", "env_from_stdin"])]
    clear_env: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct CommonArgs {
    /// A parameter, NAME:TYPE (string, number, integer, boolean), optionally :required and
    /// :DESCRIPTION after it; repeatable. Replaces --parameters.
    #[arg(long = "param", value_name = "NAME:TYPE[:required][:DESCRIPTION]")]
    params: Vec<String>,
    /// The parameters as a JSON object schema.
    #[arg(long, conflicts_with = "params")]
    parameters: Option<String>,
    /// Where it runs, relative to the workspace (default: the workspace).
    #[arg(long)]
    working_dir: Option<String>,
    /// Seconds before the command is killed (default 60, at most 3600).
    #[arg(long)]
    timeout: Option<u64>,
    /// Only this agent has the tool (default: every agent; "" on update: every agent again).
    #[arg(long)]
    agent: Option<String>,
    /// NAME=VALUE added to the command's environment (stored encrypted); repeatable (prefer
    /// --env-from-stdin: arguments are visible to other users of the host).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Read NAME=VALUE lines for the environment from stdin.
    #[arg(long)]
    env_from_stdin: bool,
}

/// The parameter schema `--param` entries or `--parameters` describe, if any.
fn parameters(common: &CommonArgs) -> Result<Option<serde_json::Value>, DefineError> {
    parameter_schema(common.parameters.as_deref(), &common.params)
}

fn env(common: &CommonArgs) -> Result<Option<BTreeMap<String, String>>, ExitCode> {
    if common.env.is_empty() && !common.env_from_stdin {
        return Ok(None);
    }
    read_pairs("an --env entry", &common.env, common.env_from_stdin).map(Some)
}

fn print(t: &StoredCustomTool) {
    println!("name:        {}", visible(&t.spec.name));
    let agent = if t.spec.agent.is_empty() {
        "every agent".to_string()
    } else {
        visible(&t.spec.agent).to_string()
    };
    println!("agent:       {agent}");
    println!("enabled:     {}", t.spec.enabled);
    println!("description: {}", visible(&t.spec.description));
    println!("command:     {}", visible(&t.spec.command));
    println!("parameters:  {}", visible(&t.spec.parameters.to_string()));
    if !t.spec.working_dir.is_empty() {
        println!("working dir: {}", visible(&t.spec.working_dir));
    }
    println!("timeout:     {}s", t.spec.timeout_secs);
    if !t.env_names.is_empty() {
        println!("env:         {} (values encrypted)", t.env_names.join(", "));
    }
    println!("created by:  {}", visible(&t.created_by));
}

pub async fn run(config: Config, data_dir: &Path, command: CustomToolsCommand) -> ExitCode {
    let store = match crate::store::open(&config, data_dir).await {
        Ok(store) => store,
        Err(e) => return fail(e),
    };
    match command {
        CustomToolsCommand::Add(args) => {
            let mut spec = CustomToolSpec::new(args.name, args.description, args.command);
            match parameters(&args.common) {
                Ok(Some(p)) => spec.parameters = p,
                Ok(None) => {}
                Err(e) => return refused(e),
            }
            spec.working_dir = args.common.working_dir.clone().unwrap_or_default();
            spec.timeout_secs = args.common.timeout.unwrap_or(spec.timeout_secs);
            spec.agent = args.common.agent.clone().unwrap_or_default();
            let env = match env(&args.common) {
                Ok(env) => env.unwrap_or_default(),
                Err(code) => return code,
            };
            said(
                define(&store, None, &spec, Some(&env), false, &operator()).await,
                |()| {
                    format!(
                        "custom tool {} defined; running gateways load it within seconds",
                        spec.name
                    )
                },
            )
        }
        CustomToolsCommand::List { json } => {
            let tools = match store.custom_tools().await {
                Ok(t) => t,
                Err(e) => return fail(e),
            };
            if json {
                let list: Vec<_> = tools
                    .iter()
                    .map(talon_runtime::custom_tools_http::tool_json)
                    .collect();
                println!("{}", serde_json::json!({ "tools": list }));
            } else if tools.is_empty() {
                println!("no custom tools; define one with talon custom-tools add");
            } else {
                for t in &tools {
                    let scope = if t.spec.agent.is_empty() {
                        "every agent".to_string()
                    } else {
                        format!("agent {}", visible(&t.spec.agent))
                    };
                    let state = if t.spec.enabled { "" } else { " (disabled)" };
                    println!(
                        "{}  [{scope}]{state}  {}",
                        visible(&t.spec.name),
                        visible(&t.spec.description)
                    );
                }
            }
            ExitCode::SUCCESS
        }
        CustomToolsCommand::Show { name } => match store.custom_tool(&name).await {
            Ok(Some(t)) => {
                print(&t);
                ExitCode::SUCCESS
            }
            Ok(None) => refused(DefineError::NotFound(name)),
            Err(e) => fail(e),
        },
        CustomToolsCommand::Update(args) => {
            let env = if args.clear_env {
                Some(BTreeMap::new())
            } else {
                match env(&args.common) {
                    Ok(env) => env,
                    Err(code) => return code,
                }
            };
            let patch = CustomToolPatch {
                description: args.description,
                command: args.command,
                parameters: match parameters(&args.common) {
                    Ok(p) => p,
                    Err(e) => return refused(e),
                },
                working_dir: args.common.working_dir,
                timeout_secs: args.common.timeout,
                agent: args.common.agent,
                enabled: (args.enable || args.disable).then_some(args.enable),
                env,
            };
            match update(&store, None, &args.name, patch, &operator()).await {
                Ok(t) => {
                    print(&t);
                    ExitCode::SUCCESS
                }
                Err(e) => refused(e),
            }
        }
        CustomToolsCommand::Remove { name } => match store.remove_custom_tool(&name).await {
            Ok(true) => {
                println!("custom tool {name} removed");
                ExitCode::SUCCESS
            }
            Ok(false) => refused(DefineError::NotFound(name)),
            Err(e) => fail(e),
        },
    }
}
