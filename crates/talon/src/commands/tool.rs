//! `talon tool call NAME --args JSON`: one call through the pipeline, its questions to the user
//! asked at the terminal.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Value, json};
use talon_core::{FailedStage, RunKind, ToolCall};

use super::{USAGE, usage_error};
use crate::config::Config;
use crate::runtime::{self, Overrides};

pub async fn call(
    config: Config,
    name: String,
    args: String,
    workspace: Option<PathBuf>,
    agent: Option<String>,
    as_json: bool,
    data_dir: Option<PathBuf>,
) -> ExitCode {
    // `--args -` reads the object from stdin: large contents exceed the 128 KiB limit of one
    // command-line argument.
    let args = if args == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
            return usage_error(format!("--args -: cannot read stdin: {e}"));
        }
        text
    } else {
        args
    };
    let arguments: Value = match serde_json::from_str(&args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return usage_error(
                "--args must be a JSON object, for example --args '{\"timezone\":\"UTC\"}'",
            );
        }
        Err(e) => return usage_error(format!("--args is not valid JSON: {e}")),
    };
    let rt = match runtime::build(
        config,
        Overrides {
            default_mode: talon_core::permission::PermissionMode::BypassPermissions,
            agent,
            workspace,
            data_dir,
            prompter: crate::prompt::tty_prompter(true),
            one_shot: true,
            ..Overrides::default()
        },
    )
    .await
    {
        Ok(rt) => rt,
        Err(e) => return crate::commands::refused(e),
    };
    let mut ctx = rt.template.clone();
    ctx.session_key = format!("cli:{}", std::process::id());
    ctx.channel_type = Some("cli".into());
    ctx.run_kind = RunKind::Api;
    // A tool's or an MCP server's questions to the user are asked at this terminal, if any.
    ctx.client = crate::tty_questions::TtyQuestions::detect();
    if let Err(e) = rt.callers.bind(&mut ctx, None, None).await {
        eprintln!("talon: {e}");
        return ExitCode::from(1);
    }
    let outcome = rt
        .pipeline
        .call(Arc::new(ctx), ToolCall::new(name, arguments))
        .await;
    rt.shutdown().await;
    if as_json {
        println!(
            "{}",
            json!({
                "tool": outcome.tool,
                "result": outcome.output,
                "failed_stage": outcome.failed_stage,
                "elapsed_ms": outcome.elapsed.as_secs_f64() * 1000.0,
            })
        );
    } else {
        // A tool's output can be a server's or a command's words: shown with control
        // characters spelled out (`--json` has it as it is).
        let shown = talon_core::visible::visible_prose(&outcome.output.for_llm);
        if outcome.output.is_error {
            eprintln!("{shown}");
        } else {
            println!("{shown}");
        }
    }
    match outcome.failed_stage {
        None => ExitCode::SUCCESS,
        Some(FailedStage::UnknownTool | FailedStage::Validation) => ExitCode::from(USAGE),
        Some(_) => ExitCode::from(1),
    }
}
