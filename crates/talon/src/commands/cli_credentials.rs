//! `talon cli-credentials`: register CLIs (`gh`, `aws`, …) that agents run with stored
//! credentials (credentialed exec), and grant them to agents. Values are read from the command
//! line or stdin, stored encrypted, and never printed.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use talon_runtime::cli_credentials::{self as ops, Registration};
use talon_store::{CliCredential, Store};

use super::{fail, refused, usage_error};
use crate::config::Config;
use crate::store;

/// Values shorter than this are not redacted from output (they would redact ordinary words).
const MIN_SCRUBBED_LEN: usize = talon_core::context::ScrubBag::MIN_LEN;

/// `talon cli-credentials …`
#[derive(Debug, Subcommand)]
pub enum CliCredentialsCommand {
    /// Register a CLI with its credentials (env values are stored encrypted and never shown).
    Add(AddArgs),
    /// List registered CLIs: path, variable names (never values), grants and rules.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a CLI with its credentials and grants.
    Remove {
        /// The registered CLI.
        name: String,
    },
    /// Let agents use a registered CLI.
    Grant {
        /// The registered CLI.
        name: String,
        /// The agents to grant it to.
        #[arg(required = true)]
        agents: Vec<String>,
    },
    /// Withdraw agents' use of a registered CLI.
    Revoke {
        /// The registered CLI.
        name: String,
        /// The agents to take it from.
        #[arg(required = true)]
        agents: Vec<String>,
    },
}

/// `talon cli-credentials add …`
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The program: a bare name (found on PATH) or an absolute path.
    name: String,
    /// Defaults (timeout, denied arguments) from a preset: gh, gcloud, aws, kubectl, terraform,
    /// git, psql. Applied by default when NAME is one of them.
    #[arg(long, value_name = "PRESET", conflicts_with = "no_preset")]
    preset: Option<String>,
    /// Do not apply the preset named like the program.
    #[arg(long)]
    no_preset: bool,
    /// Absolute path of the program (default: NAME if absolute, else found on PATH).
    #[arg(long, value_name = "PATH")]
    path: Option<PathBuf>,
    /// A credential variable; repeatable. Values here show up in shell history and `ps`:
    /// prefer --env-from-stdin.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Read NAME=VALUE lines from stdin (blank lines and lines starting with # are skipped).
    #[arg(long)]
    env_from_stdin: bool,
    /// A regex over the arguments (joined by spaces) that refuses a command; repeatable.
    #[arg(long = "deny-arg", value_name = "REGEX")]
    deny_args: Vec<String>,
    /// A regex matched at the start of each argument that refuses it; repeatable.
    #[arg(long = "deny-verbose", value_name = "REGEX")]
    deny_verbose: Vec<String>,
    /// Seconds before a command is killed (default: the preset's, else 30).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// What the program is for, shown to the model.
    #[arg(long, value_name = "TEXT")]
    tips: Option<String>,
    /// Where its credentials may be sent: HOST, HOST:PORT, HOST/PATH or *.DOMAIN; repeatable.
    /// A command naming any other destination is refused (default: the preset's, such as
    /// github.com for gh, or psql's PGHOST).
    #[arg(long = "destination", value_name = "HOST")]
    destinations: Vec<String>,
    /// Grant it to this agent; repeatable.
    #[arg(long = "grant", value_name = "AGENT")]
    grants: Vec<String>,
    /// Replace an existing registration (its env values stay unless new ones are given).
    #[arg(long)]
    replace: bool,
}

/// Runs one `talon cli-credentials` subcommand against the store.
pub async fn run(config: Config, data_dir: &Path, command: CliCredentialsCommand) -> ExitCode {
    let store = match store::open(&config, data_dir).await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match command {
        CliCredentialsCommand::Add(args) => match add(&store, &args).await {
            Ok(binary) => grant(&store, &binary, &args.grants).await,
            Err(code) => code,
        },
        CliCredentialsCommand::List { json } => match store.cli_credentials().await {
            Ok(list) => {
                print_list(&list, json);
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        CliCredentialsCommand::Remove { name } => {
            let name = match binary_name(&name) {
                Ok(n) => n,
                Err(code) => return code,
            };
            match store.remove_cli_credential(&name).await {
                Ok(true) => {
                    println!("removed {name} with its credentials and grants");
                    ExitCode::SUCCESS
                }
                Ok(false) => usage_error(format!("{name} is not registered")),
                Err(e) => fail(e),
            }
        }
        CliCredentialsCommand::Grant { name, agents } => match binary_name(&name) {
            Ok(name) => grant(&store, &name, &agents).await,
            Err(code) => code,
        },
        CliCredentialsCommand::Revoke { name, agents } => {
            let name = match binary_name(&name) {
                Ok(n) => n,
                Err(code) => return code,
            };
            for agent in &agents {
                match store.revoke_cli_credential(&name, agent).await {
                    Ok(true) => println!("{name}: revoked from {agent}"),
                    Ok(false) => println!("{name}: {agent} had no grant"),
                    Err(e) => return fail(e),
                }
            }
            ExitCode::SUCCESS
        }
    }
}

fn binary_name(name: &str) -> Result<String, ExitCode> {
    ops::binary_name(name).map_err(usage_error)
}

async fn grant(store: &Store, binary: &str, agents: &[String]) -> ExitCode {
    for agent in agents {
        if let Err(e) = store.grant_cli_credential(binary, agent).await {
            return refused(e);
        }
        let known = matches!(store.agent(agent).await, Ok(Some(_)));
        println!(
            "{binary}: granted to {agent}{}",
            if known {
                ""
            } else {
                " (no such agent yet; the grant applies once it exists)"
            }
        );
    }
    ExitCode::SUCCESS
}

/// Registers (or with `--replace` updates) the binary; returns its normalised name.
async fn add(store: &Store, r: &AddArgs) -> Result<String, ExitCode> {
    let env = read_pairs("an environment entry", &r.env, r.env_from_stdin)?;
    let registration = Registration {
        name: r.name.clone(),
        preset: r.preset.clone(),
        no_preset: r.no_preset,
        path: r.path.clone(),
        deny_args: r.deny_args.clone(),
        deny_verbose: r.deny_verbose.clone(),
        destinations: r.destinations.clone(),
        timeout: r.timeout,
        tips: r.tips.clone(),
        replace: r.replace,
    };
    let done = ops::register(store, &registration, &env)
        .await
        .map_err(refused)?;
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    let env_shown = match (names.is_empty(), done.updated) {
        (false, _) => names.join(", "),
        (true, true) => "unchanged".to_string(),
        (true, false) => "none".to_string(),
    };
    println!(
        "{} {} ({}): env {env_shown}; {}; timeout {}s",
        if done.updated {
            "updated"
        } else {
            "registered"
        },
        done.spec.binary_name,
        done.spec.binary_path,
        done.preset
            .map_or("no preset".to_string(), |p| format!("preset {}", p.name)),
        done.spec.timeout_seconds
    );
    let short: Vec<&str> = env
        .iter()
        .filter(|(_, v)| v.len() < MIN_SCRUBBED_LEN)
        .map(|(k, _)| k.as_str())
        .collect();
    if !short.is_empty() {
        eprintln!(
            "talon: warning: the values of {} are shorter than {MIN_SCRUBBED_LEN} characters and are not redacted from command output",
            short.join(", ")
        );
    }
    if let Some(p) = done.preset
        && env.is_empty()
        && !done.updated
        && !p.env_hint.is_empty()
    {
        eprintln!(
            "talon: note: no credentials given; {} usually reads {}",
            p.name,
            p.env_hint.join(", ")
        );
    }
    Ok(done.spec.binary_name)
}

/// `NAME=VALUE` entries from the command line and, with `from_stdin`, stdin's lines (blank
/// lines and `#` comments skipped). Entries are never echoed: they may hold secrets.
pub(crate) fn read_pairs(
    what: &str,
    pairs: &[String],
    from_stdin: bool,
) -> Result<BTreeMap<String, String>, ExitCode> {
    let mut text = String::new();
    if from_stdin {
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| fail(format!("cannot read stdin: {e}")))?;
    }
    let stdin_lines = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    ops::parse_pairs(what, pairs.iter().map(String::as_str).chain(stdin_lines)).map_err(refused)
}

fn print_list(list: &[CliCredential], json: bool) {
    if json {
        let items: Vec<_> = list
            .iter()
            .map(|c| {
                serde_json::json!({
                    "name": c.spec.binary_name,
                    "path": c.spec.binary_path,
                    "env": c.env_names,
                    "grants": c.grants,
                    "preset": ops::preset_of(c),
                    "timeout_seconds": c.spec.timeout_seconds,
                    "deny_args": c.spec.deny_args,
                    "deny_verbose": c.spec.deny_verbose,
                    "destinations": c.spec.destinations,
                    "tips": c.spec.tips,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(items));
        return;
    }
    if list.is_empty() {
        println!("no CLIs registered; add one with `talon cli-credentials add NAME`");
    }
    let or_none = |items: &[String]| {
        if items.is_empty() {
            "none".to_string()
        } else {
            items.join(", ")
        }
    };
    for c in list {
        println!("{}\t{}", c.spec.binary_name, c.spec.binary_path);
        println!("  env: {}", or_none(&c.env_names));
        println!("  granted to: {}", or_none(&c.grants));
        println!(
            "  preset: {}; timeout {}s",
            ops::preset_of(c).unwrap_or("none"),
            c.spec.timeout_seconds
        );
        println!("  deny args: {}", or_none(&c.spec.deny_args));
        println!("  deny verbose: {}", or_none(&c.spec.deny_verbose));
        println!("  destinations: {}", or_none(&c.spec.destinations));
    }
}
