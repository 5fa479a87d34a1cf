//! One module per command.

mod admin;
mod chat;
mod chat_repl;
pub mod cli_credentials;
pub mod cron;
pub mod custom_tools;
mod doctor;
mod exit;
mod mcp;
pub mod mcp_servers;
mod mock_provider;
pub mod runs;
pub mod sandbox_landlock;
mod serve;
pub mod setup;
pub mod skills;
pub mod teams;
mod tool;
mod tools;
pub mod waiting;

use std::process::ExitCode;

pub(crate) use exit::{USAGE, fail, refused, said, usage_error};

use crate::config::{self, ConfigError};
use crate::{Cli, Command, ConfigCommand, ToolCommand, ToolsCommand};
pub use chat::OutputFormat;

/// Who is at the terminal, recorded with what they change (a definition, a grant, a review).
pub(crate) fn operator() -> String {
    std::env::var("USER").unwrap_or_else(|_| "cli".into())
}

pub(crate) fn load(cli_config: Option<&std::path::Path>) -> Result<config::Config, ConfigError> {
    config::load(cli_config).map(|(config, _)| config)
}

pub async fn run(cli: Cli) -> ExitCode {
    // What needs no valid configuration (a broken one is what `init` and `config show` help
    // with).
    match &cli.command {
        Command::Completions { shell } => {
            return setup::completions(*shell, &mut <Cli as clap::CommandFactory>::command());
        }
        Command::Init { token: true, .. } => {
            println!("{}", setup::new_token());
            return ExitCode::SUCCESS;
        }
        Command::Init { path, force, .. } => return setup::init(path.clone(), *force),
        Command::Config {
            command: ConfigCommand::Show { json },
        } => return setup::show(cli.config.as_deref(), cli.data_dir.as_deref(), *json),
        _ => {}
    }
    let config = match load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    match cli.command {
        Command::Serve { bind, workspace } => {
            serve::run(config, bind, workspace, cli.data_dir).await
        }
        Command::Mcp {
            workspace,
            profile,
            agent,
            tty_approvals,
        } => {
            mcp::run(
                config,
                workspace,
                profile,
                agent,
                cli.data_dir,
                tty_approvals,
            )
            .await
        }
        Command::Tools {
            command:
                ToolsCommand::List {
                    profile,
                    agent,
                    provider,
                    json,
                    dialect,
                },
        } => {
            tools::list(
                config,
                profile,
                agent,
                provider,
                json,
                dialect,
                cli.data_dir,
            )
            .await
        }
        Command::Tool {
            command:
                ToolCommand::Call {
                    name,
                    args,
                    workspace,
                    agent,
                    json,
                },
        } => tool::call(config, name, args, workspace, agent, json, cli.data_dir).await,
        Command::Migrate { command } => {
            admin::migrate(config, &data_dir(&cli.data_dir), command).await
        }
        Command::Agents { command } => {
            admin::agents(config, &data_dir(&cli.data_dir), command).await
        }
        Command::Secrets { command } => {
            admin::secrets(config, &data_dir(&cli.data_dir), command).await
        }
        Command::CliCredentials { command } => {
            cli_credentials::run(config, &data_dir(&cli.data_dir), command).await
        }
        Command::McpServers { command } => {
            mcp_servers::run(config, &data_dir(&cli.data_dir), command).await
        }
        // Answered above, before the configuration is loaded.
        Command::Completions { .. } | Command::Init { .. } | Command::Config { .. } => {
            ExitCode::SUCCESS
        }
        Command::Runs { command } => runs::run(config, &data_dir(&cli.data_dir), command).await,
        Command::Cron { command } => cron::run(config, &data_dir(&cli.data_dir), command).await,
        Command::Teams { command } => teams::run(config, &data_dir(&cli.data_dir), command).await,
        Command::Skills { command } => skills::run(config, &data_dir(&cli.data_dir), command).await,
        Command::CustomTools { command } => {
            custom_tools::run(config, &data_dir(&cli.data_dir), command).await
        }
        Command::Doctor { json } => doctor::run(&config, &data_dir(&cli.data_dir), json).await,
        Command::Approvals { target, command } => {
            waiting::approvals(&config, target, command).await
        }
        Command::Questions { target, command } => {
            waiting::questions(&config, target, command).await
        }
        Command::Chat {
            agent,
            session,
            prompt,
            output_format,
            workspace,
            permission_mode,
        } => {
            chat::run(
                config,
                chat::ChatArgs {
                    agent,
                    session,
                    prompt,
                    output_format,
                    workspace,
                    data_dir: cli.data_dir,
                    permission_mode,
                },
            )
            .await
        }
        Command::MockProvider {
            script,
            listen,
            embedding_model,
        } => mock_provider::run(&script, &listen, embedding_model.as_deref()).await,
    }
}

fn data_dir(explicit: &Option<std::path::PathBuf>) -> std::path::PathBuf {
    config::data_dir(explicit.as_deref())
}
