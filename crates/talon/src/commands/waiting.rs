//! `talon approvals …` and `talon questions …`: what waits for a person on a running
//! `talon serve`, for operators without a browser.
//!
//! Both talk to the gateway (`--url`, default the configured `gateway.bind`) with the
//! configured token, over the same routes as any client (`/v1/approvals`, `/v1/questions`), so
//! they see and answer only what the named user (`--user`) may. Everything a model wrote (a
//! command, a question) is printed with control characters made visible.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use talon_core::visible::{visible, visible_lines};
use talon_gateway::client::{ClientError, GatewayClient as Gateway};

use super::{fail, usage_error};
use crate::config::Config;

/// Where the gateway is and whose items to see.
#[derive(Debug, Args)]
pub struct Target {
    /// The gateway (default: http://<gateway.bind>, http://127.0.0.1:8790).
    #[arg(long, value_name = "URL", global = true)]
    url: Option<String>,
    /// The user whose items to see and answer (default: calls that named no user).
    #[arg(long, value_name = "ID", global = true)]
    user: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The calls waiting for approval, oldest first.
    List {
        /// Print the gateway's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a waiting call.
    Allow {
        /// The request's id (`apr-…`, from `talon approvals list`).
        id: String,
        /// Also remember the answer for the same command from the same agent.
        #[arg(long)]
        always: bool,
    },
    /// Refuse a waiting call.
    Deny {
        /// The request's id (`apr-…`).
        id: String,
        /// Why, shown to the model.
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum QuestionsCommand {
    /// The questions tools asked users in turns run over HTTP, oldest first.
    List {
        /// Print the gateway's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Answer a question: one FIELD=VALUE per field of its form (see `list`).
    Answer {
        /// The question's id (`q-…`).
        id: String,
        /// The answers, e.g. `q1=PostgreSQL`.
        #[arg(value_name = "FIELD=VALUE")]
        fields: Vec<String>,
        /// Decline to answer.
        #[arg(long, conflicts_with = "fields")]
        decline: bool,
    },
}

/// A client of the gateway `target` names (default: the configured `gateway.bind`).
fn gateway(config: &Config, target: Target) -> Gateway {
    let base = target.url.unwrap_or_else(|| {
        let bind = config
            .gateway
            .bind
            .clone()
            .unwrap_or_else(|| talon_gateway::DEFAULT_BIND.to_string());
        format!("http://{bind}")
    });
    Gateway::new(&base, config.gateway.token.clone(), target.user)
}

/// Exit 0 with what the gateway said, or 1 with the failure on stderr.
fn finish(result: Result<(), ClientError>) -> ExitCode {
    result.map_or_else(fail, |()| ExitCode::SUCCESS)
}

pub async fn approvals(config: &Config, target: Target, command: ApprovalsCommand) -> ExitCode {
    let gateway = gateway(config, target);
    finish(match command {
        ApprovalsCommand::List { json } => list_approvals(&gateway, json).await,
        ApprovalsCommand::Allow { id, always } => {
            let decision = if always { "allow_always" } else { "allow_once" };
            resolve(&gateway, json!({"id": id, "decision": decision})).await
        }
        ApprovalsCommand::Deny { id, reason } => {
            resolve(
                &gateway,
                json!({"id": id, "decision": "deny", "reason": reason}),
            )
            .await
        }
    })
}

async fn list_approvals(gateway: &Gateway, json: bool) -> Result<(), ClientError> {
    let answer = gateway.send("/v1/approvals", None).await?;
    if json {
        println!("{answer}");
        return Ok(());
    }
    let pending = answer["pending"].as_array().cloned().unwrap_or_default();
    if pending.is_empty() {
        println!("no calls are waiting for approval");
    }
    for item in pending {
        let text = |key: &str| visible(item[key].as_str().unwrap_or("-"));
        println!(
            "{}  {} (agent {}, session {}): {}",
            text("id"),
            text("tool"),
            text("agent"),
            text("session"),
            text("reason")
        );
        println!(
            "{}",
            visible_lines(item["summary"].as_str().unwrap_or_default(), "    │ ")
        );
        if let Some(always) = item["always"].as_str() {
            println!("    --always would remember: {}", visible(always));
        }
    }
    Ok(())
}

async fn resolve(gateway: &Gateway, body: Value) -> Result<(), ClientError> {
    let answer = gateway.send("/v1/approvals", Some(&body)).await?;
    println!(
        "{}: {}",
        visible(body["id"].as_str().unwrap_or_default()),
        visible(answer["decision"].as_str().unwrap_or("answered"))
    );
    Ok(())
}

pub async fn questions(config: &Config, target: Target, command: QuestionsCommand) -> ExitCode {
    let gateway = gateway(config, target);
    match command {
        QuestionsCommand::List { json } => finish(list_questions(&gateway, json).await),
        QuestionsCommand::Answer {
            id,
            fields,
            decline,
        } => {
            let body = if decline {
                json!({"id": id, "action": "decline"})
            } else {
                match talon_core::questions::form::pairs(&fields) {
                    Ok(content) => json!({"id": id, "action": "accept", "content": content}),
                    Err(e) => {
                        return usage_error(format!(
                            "{e} (--decline; `talon questions list` shows the fields)"
                        ));
                    }
                }
            };
            finish(answer(&gateway, &body).await)
        }
    }
}

async fn list_questions(gateway: &Gateway, json: bool) -> Result<(), ClientError> {
    let answer = gateway.send("/v1/questions", None).await?;
    if json {
        println!("{answer}");
        return Ok(());
    }
    let pending = answer["pending"].as_array().cloned().unwrap_or_default();
    if pending.is_empty() {
        println!("no questions are waiting");
    }
    for item in pending {
        let text = |key: &str| visible(item[key].as_str().unwrap_or("-"));
        println!(
            "{}  (agent {}, session {})",
            text("id"),
            text("agent"),
            text("session")
        );
        println!(
            "{}",
            visible_lines(item["message"].as_str().unwrap_or_default(), "    │ ")
        );
        let fields = item
            .pointer("/requestedSchema/properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (name, schema) in fields {
            let title = schema["title"].as_str().unwrap_or_default();
            let choices = schema["enum"]
                .as_array()
                .map(|values| {
                    values
                        .iter()
                        .map(|v| visible(v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(" | ")
                })
                .unwrap_or_else(|| visible(schema["type"].as_str().unwrap_or("string")));
            println!("    {}={}  {}", visible(&name), choices, visible(title));
        }
    }
    Ok(())
}

async fn answer(gateway: &Gateway, body: &Value) -> Result<(), ClientError> {
    gateway.send("/v1/questions", Some(body)).await?;
    println!(
        "{}: answered",
        visible(body["id"].as_str().unwrap_or_default())
    );
    Ok(())
}
