//! `talon migrate`, `talon agents`, `talon secrets`: managing state without SQL.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use talon_runtime::agents_admin as ops;
use talon_store::Store;

use super::{fail, refused, said, usage_error};
use crate::config::Config;
use crate::store;
use crate::{AgentsCommand, MigrateCommand, SecretsCommand};

pub async fn migrate(config: Config, data_dir: &Path, command: Option<MigrateCommand>) -> ExitCode {
    let store_config = store::store_config(&config, data_dir);
    if let Err(e) = store::create_data_dir(data_dir) {
        return fail(e);
    }
    let store = match Store::connect(&store_config).await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match command.unwrap_or(MigrateCommand::Status) {
        MigrateCommand::Status => match store.migration_status().await {
            Ok(status) => {
                println!(
                    "engine: {:?}\nschema version: {} (latest known: {})",
                    store.engine(),
                    status.current,
                    status.latest
                );
                if status.current > status.latest {
                    println!("the database is newer than this binary; upgrade Talon");
                    return ExitCode::from(1);
                }
                for (version, name) in &status.pending {
                    println!("pending: {version} {name}");
                }
                if status.pending.is_empty() {
                    println!("up to date");
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        MigrateCommand::Up => match store.migrate().await {
            Ok(applied) if applied.is_empty() => {
                println!("up to date");
                ExitCode::SUCCESS
            }
            Ok(applied) => {
                for version in applied {
                    println!("applied: {version}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
    }
}

pub async fn agents(config: Config, data_dir: &Path, command: AgentsCommand) -> ExitCode {
    let store = match store::open(&config, data_dir).await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match command {
        AgentsCommand::Create {
            key,
            agent_type,
            settings,
        } => said(
            ops::create(&store, &key, &agent_type, &settings).await,
            |agent_type| format!("agent {key} ({})", agent_type.as_str()),
        ),
        AgentsCommand::List { json } => match store.agents().await {
            Ok(agents) => {
                if json {
                    let items: Vec<_> = agents
                        .iter()
                        .map(|a| serde_json::json!({"key": a.key, "type": a.agent_type.as_str(), "settings": a.settings}))
                        .collect();
                    println!("{}", serde_json::Value::Array(items));
                } else {
                    for a in &agents {
                        println!("{}\t{}", a.key, a.agent_type.as_str());
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        AgentsCommand::SetFile {
            key,
            file,
            from,
            user,
        } => {
            let content = if from.as_os_str() == "-" {
                let mut s = String::new();
                if let Err(e) = std::io::stdin().read_to_string(&mut s) {
                    return fail(format!("cannot read stdin: {e}"));
                }
                s
            } else {
                match std::fs::read_to_string(&from) {
                    Ok(s) => s,
                    Err(e) => return usage_error(format!("cannot read {}: {e}", from.display())),
                }
            };
            said(
                ops::set_file(&store, &key, user.as_deref(), &file, &content).await,
                |()| {
                    format!(
                        "{file} set for agent {key}{}",
                        user.map(|u| format!(" and user {u}")).unwrap_or_default()
                    )
                },
            )
        }
        AgentsCommand::GetFile { key, file, user } => {
            match ops::file(&store, &key, user.as_deref(), &file).await {
                Ok(content) => {
                    print!("{content}");
                    ExitCode::SUCCESS
                }
                Err(e) => refused(e),
            }
        }
        AgentsCommand::ListFiles { key, user, json } => {
            match ops::files(&store, &key, user.as_deref()).await {
                Ok(files) if json => {
                    println!("{}", serde_json::json!(files));
                    ExitCode::SUCCESS
                }
                Ok(files) => {
                    for file in files {
                        println!("{file}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => refused(e),
            }
        }
        AgentsCommand::Delete { key } => said(ops::delete(&store, &config, &key).await, |()| {
            format!(
                "agent {key} and its context files deleted; its sessions and memory stay in the store"
            )
        }),
        AgentsCommand::Link {
            source,
            target,
            bidirectional,
            max_concurrent,
            allow_users,
            deny_users,
        } => {
            let settings = talon_store::LinkSettings {
                allow_users,
                deny_users,
            };
            let pair = (source.as_str(), target.as_str());
            said(
                ops::link(&store, pair, bidirectional, max_concurrent, &settings).await,
                |link| {
                    format!(
                        "{} {} {} (at most {} at once)",
                        link.source,
                        if bidirectional { "<->" } else { "->" },
                        link.target,
                        link.max_concurrent
                    )
                },
            )
        }
        AgentsCommand::Unlink { source, target } => {
            said(ops::unlink(&store, &source, &target).await, |()| {
                format!("{source} no longer delegates to {target}")
            })
        }
        AgentsCommand::Links { json } => match store.agent_links().await {
            Ok(links) if json => {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&links).unwrap_or_default()
                );
                ExitCode::SUCCESS
            }
            Ok(links) => {
                if links.is_empty() {
                    println!("no agent links; `talon agents link SOURCE TARGET` makes one");
                }
                for link in links {
                    println!(
                        "{} {} {}\tmax {}{}{}",
                        link.source,
                        if link.direction == talon_store::LinkDirection::Bidirectional {
                            "<->"
                        } else {
                            "->"
                        },
                        link.target,
                        link.max_concurrent,
                        if link.settings.allow_users.is_empty() {
                            String::new()
                        } else {
                            format!("\tallow {}", link.settings.allow_users.join(","))
                        },
                        if link.settings.deny_users.is_empty() {
                            String::new()
                        } else {
                            format!("\tdeny {}", link.settings.deny_users.join(","))
                        },
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
    }
}

pub async fn secrets(config: Config, data_dir: &Path, command: SecretsCommand) -> ExitCode {
    let mut store = match store::open(&config, data_dir).await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match command {
        SecretsCommand::Set { name } => {
            let mut value = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut value) {
                return fail(format!("cannot read the value from stdin: {e}"));
            }
            let value = value.trim_end_matches(['\n', '\r']);
            if value.is_empty() {
                return usage_error(format!(
                    "the value of {name} is empty: pipe it on stdin (printf %s \"$VALUE\" | talon secrets set {name}); `talon secrets delete {name}` removes one"
                ));
            }
            match store.set_secret(&name, value).await {
                Ok(()) => {
                    println!("secret {name} stored (encrypted)");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        SecretsCommand::List { json } => match store.secret_names().await {
            Ok(names) if json => {
                println!("{}", serde_json::json!(names));
                ExitCode::SUCCESS
            }
            Ok(names) => {
                for n in names {
                    println!("{n}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        SecretsCommand::Delete { name } => match store.delete_secret(&name).await {
            Ok(true) => {
                println!("secret {name} deleted");
                ExitCode::SUCCESS
            }
            Ok(false) => usage_error(format!(
                "no secret {name:?}; `talon secrets list` lists them"
            )),
            Err(e) => fail(e),
        },
        SecretsCommand::RotateKey => match store.rotate_key_file(data_dir).await {
            Ok(done) if done.staged => {
                println!(
                    "re-encrypted {} secrets. The new key is in {}; set {} to its contents before the next start.",
                    done.count,
                    done.key_file.display(),
                    talon_store::KEY_ENV
                );
                ExitCode::SUCCESS
            }
            Ok(done) => {
                println!(
                    "re-encrypted {} secrets; {} holds the new key",
                    done.count,
                    done.key_file.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
    }
}
