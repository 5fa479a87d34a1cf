//! `talon migrate`, `talon agents`, `talon secrets`: managing state without SQL.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use talon_store::{AgentType, EncryptionKey, Store};

use super::usage_error;
use crate::config::Config;
use crate::store;
use crate::{AgentsCommand, MigrateCommand, SecretsCommand};

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("talon: {e}");
    ExitCode::from(1)
}

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
        } => {
            let agent_type: AgentType = match agent_type.parse() {
                Ok(t) => t,
                Err(e) => return usage_error(e),
            };
            match serde_json::from_str::<serde_json::Value>(&settings) {
                Ok(parsed) => {
                    if let Err(e) = crate::runs::gates::check_agent_settings(&parsed) {
                        return usage_error(format!("--settings: {e}"));
                    }
                }
                Err(e) => return usage_error(format!("--settings is not valid JSON: {e}")),
            }
            match store.upsert_agent(&key, agent_type, &settings).await {
                Ok(()) => {
                    println!("agent {key} ({})", agent_type.as_str());
                    ExitCode::SUCCESS
                }
                Err(e @ talon_store::StoreError::Invalid { .. }) => usage_error(e),
                Err(e) => fail(e),
            }
        }
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
            let result = match &user {
                Some(user) => store.set_user_file(&key, user, &file, &content).await,
                None => store.set_agent_file(&key, &file, &content).await,
            };
            match result {
                Ok(()) => {
                    println!(
                        "{file} set for agent {key}{}",
                        user.map(|u| format!(" and user {u}")).unwrap_or_default()
                    );
                    ExitCode::SUCCESS
                }
                Err(
                    e @ (talon_store::StoreError::NotFound { .. }
                    | talon_store::StoreError::Invalid { .. }),
                ) => usage_error(e),
                Err(e) => fail(e),
            }
        }
        AgentsCommand::GetFile { key, file, user } => {
            let found = match &user {
                Some(user) => store.user_file(&key, user, &file).await,
                None => store.agent_file(&key, &file).await,
            };
            match found {
                Ok(Some(content)) => {
                    print!("{content}");
                    ExitCode::SUCCESS
                }
                Ok(None) => fail(format!(
                    "agent {key:?} has no {file}{}; `talon agents list-files {key}` lists them",
                    user.map(|u| format!(" of user {u:?}")).unwrap_or_default()
                )),
                Err(e) => fail(e),
            }
        }
        AgentsCommand::ListFiles { key, user, json } => {
            match store.agent(&key).await {
                Ok(Some(_)) => {}
                Ok(None) => return usage_error(unknown_agent(&key)),
                Err(e) => return fail(e),
            }
            let files = match &user {
                Some(user) => store.user_files(&key, user).await,
                None => store.agent_files(&key).await,
            };
            match files {
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
                Err(e) => fail(e),
            }
        }
        AgentsCommand::Delete { key } => {
            if key == config.agents.default {
                return usage_error(format!(
                    "{key:?} is the default agent ([agents] default); choose another default first"
                ));
            }
            if config.agents.entries.contains_key(&key) {
                return usage_error(format!(
                    "agent {key:?} is configured in talon.toml ([agents.{key}]), which creates it at every start: remove it there"
                ));
            }
            match store.delete_agent(&key).await {
                Ok(true) => {
                    println!(
                        "agent {key} and its context files deleted; its sessions and memory stay in the store"
                    );
                    ExitCode::SUCCESS
                }
                Ok(false) => usage_error(unknown_agent(&key)),
                Err(e) => fail(e),
            }
        }
        AgentsCommand::Link {
            source,
            target,
            bidirectional,
            max_concurrent,
            allow_users,
            deny_users,
        } => {
            let direction = if bidirectional {
                talon_store::LinkDirection::Bidirectional
            } else {
                talon_store::LinkDirection::Outbound
            };
            let settings = talon_store::LinkSettings {
                allow_users,
                deny_users,
            };
            match store
                .link_agents(&source, &target, direction, max_concurrent, &settings)
                .await
            {
                Ok(link) => {
                    println!(
                        "{} {} {} (at most {} at once)",
                        link.source,
                        if bidirectional { "<->" } else { "->" },
                        link.target,
                        link.max_concurrent
                    );
                    ExitCode::SUCCESS
                }
                Err(
                    e @ (talon_store::StoreError::Invalid { .. }
                    | talon_store::StoreError::NotFound { .. }),
                ) => usage_error(e),
                Err(e) => fail(e),
            }
        }
        AgentsCommand::Unlink { source, target } => {
            match store.unlink_agents(&source, &target).await {
                Ok(true) => {
                    println!("{source} no longer delegates to {target}");
                    ExitCode::SUCCESS
                }
                Ok(false) => usage_error(format!(
                    "there is no link from {source:?} to {target:?}; `talon agents links` lists them"
                )),
                Err(e) => fail(e),
            }
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

fn unknown_agent(key: &str) -> String {
    format!("no agent {key:?}; `talon agents list` lists them")
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
        SecretsCommand::RotateKey => {
            let key_file = data_dir.join(talon_store::KEY_FILE);
            let from_env = std::env::var(talon_store::KEY_ENV).is_ok_and(|v| !v.is_empty());
            let new = EncryptionKey::generate();
            // Write the new key first (beside the old one), so a crash never leaves secrets
            // encrypted with a key that exists nowhere.
            let staged = key_file.with_extension("key.new");
            let _ = std::fs::remove_file(&staged);
            if let Err(e) = new.write_new(&staged) {
                return fail(e);
            }
            let count = match store.rotate_key(new.clone()).await {
                Ok(n) => n,
                Err(e) => {
                    let _ = std::fs::remove_file(&staged);
                    return fail(e);
                }
            };
            if from_env {
                println!(
                    "re-encrypted {count} secrets. The new key is in {}; set {} to its contents before the next start.",
                    staged.display(),
                    talon_store::KEY_ENV
                );
            } else if let Err(e) = std::fs::rename(&staged, &key_file) {
                return fail(format!(
                    "secrets were re-encrypted but the new key could not replace {}: {e}; the new key is in {}",
                    key_file.display(),
                    staged.display()
                ));
            } else {
                println!(
                    "re-encrypted {count} secrets; {} holds the new key",
                    key_file.display()
                );
            }
            ExitCode::SUCCESS
        }
    }
}
