//! `talon chat`: talk to an agent from the terminal. Interactive by default (streamed output,
//! tool calls shown as they start and end, approvals asked inline, Ctrl-C cancels the turn);
//! `-p PROMPT` runs one turn and exits, printing `text`, one `json` object, or `stream-json`
//! events. Sessions live in the store: `--session KEY` continues one.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use talon_agent::{RunEvent, TurnOutcome, TurnStop};
use talon_core::permission::PermissionMode;
use talon_core::visible::{visible, visible_prose};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::usage_error;
use crate::agent_runs::{Runner, TurnRequest};
use crate::config::Config;
use crate::runtime::{self, Overrides};

/// How `-p` prints its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// The answer's text, streamed; tool activity on stderr.
    Text,
    /// One JSON object when the turn ends.
    Json,
    /// One JSON event per line as the turn runs, then the result.
    StreamJson,
}

/// `talon chat`'s arguments.
#[derive(Debug)]
pub struct ChatArgs {
    pub agent: Option<String>,
    pub session: Option<String>,
    pub prompt: Option<String>,
    pub output_format: OutputFormat,
    pub workspace: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    /// The permission mode to start in (`plan`: read-only until a plan is approved).
    pub permission_mode: Option<PermissionMode>,
}

/// A chat bound to its agent and session.
struct Chat {
    runner: Runner,
    agent_key: String,
    session_key: String,
    /// The mode the next turn runs in; an approved plan moves it on.
    mode: std::sync::Mutex<Option<PermissionMode>>,
}

pub async fn run(config: Config, args: ChatArgs) -> ExitCode {
    let rt = match runtime::build(
        config.clone(),
        Overrides {
            default_mode: PermissionMode::Default,
            agent: args.agent.clone(),
            workspace: args.workspace.clone(),
            data_dir: args.data_dir.clone(),
            prompt_on_tty: true,
            ..Overrides::default()
        },
    )
    .await
    {
        Ok(rt) => rt,
        Err(e) => return e.report(),
    };
    let runner = Runner::new(
        config,
        Arc::clone(&rt.pipeline),
        rt.template.clone(),
        rt.callers.clone(),
        rt.store.clone(),
    );
    runner.serve_tools(&rt);
    let code = match Chat::open(runner, &args).await {
        Ok(chat) => match &args.prompt {
            Some(prompt) => chat.once(prompt, args.output_format).await,
            None => chat.interactive().await,
        },
        Err(code) => code,
    };
    rt.shutdown().await;
    code
}

impl Chat {
    async fn open(runner: Runner, args: &ChatArgs) -> Result<Self, ExitCode> {
        let agent_key = match runner.context(None, None, "cli").await {
            Ok(ctx) => ctx.agent_key.unwrap_or_default(),
            Err(e) => {
                eprintln!("talon: {e}");
                return Err(ExitCode::from(1));
            }
        };
        // A missing or wrong provider is a configuration error, said before anything runs.
        if let Err(e) = runner.check_model(&agent_key).await {
            return Err(usage_error(e));
        }
        let session = args.session.clone().unwrap_or_else(|| {
            format!(
                "{}-{}",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                std::process::id()
            )
        });
        Ok(Self {
            session_key: Runner::session_key(&agent_key, "cli", None, &session),
            runner,
            agent_key,
            mode: std::sync::Mutex::new(args.permission_mode),
        })
    }

    /// Runs one turn, saved to the store when it ends; Ctrl-C cancels it.
    async fn turn(
        &self,
        prompt: &str,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<TurnOutcome, String> {
        let cancel = CancellationToken::new();
        let watch = cancel.clone();
        let ctrl_c = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                watch.cancel();
            }
        });
        let mode = *self
            .mode
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let ran = self
            .runner
            .run(
                TurnRequest {
                    agent: Some(&self.agent_key),
                    user: None,
                    session: Some(self.session_key.clone()),
                    history: Vec::new(),
                    prompt: prompt.to_string(),
                    channel: "cli",
                    client: crate::tty_questions::TtyQuestions::detect(),
                    permission_mode: mode,
                    cancel,
                    api: Default::default(),
                },
                events,
            )
            .await;
        ctrl_c.abort();
        let ran = ran.map_err(|e| e.to_string())?;
        if let Ok(mut mode) = self.mode.lock()
            && mode.is_some()
        {
            *mode = Some(ran.outcome.permission_mode);
        }
        if ran.previous_interrupted {
            eprintln!("talon: the previous turn of this session was interrupted and not saved");
        }
        Ok(ran.outcome)
    }

    async fn once(&self, prompt: &str, format: OutputFormat) -> ExitCode {
        let printer = move |event: RunEvent| match format {
            OutputFormat::Text => print_for_person(&event),
            OutputFormat::Json => {}
            OutputFormat::StreamJson => {
                if let Ok(line) = serde_json::to_string(&event) {
                    println!("{line}");
                }
            }
        };
        let outcome = match self.turn(prompt, &printer).await {
            Ok(outcome) => outcome,
            Err(e) => {
                eprintln!("talon: {}", visible(&e));
                return ExitCode::from(1);
            }
        };
        match format {
            OutputFormat::Text => {
                println!();
                report_stop(&outcome.stop);
            }
            OutputFormat::Json | OutputFormat::StreamJson => {
                let result = serde_json::json!({
                    "type": "result",
                    "session": self.session_key,
                    "text": outcome.text,
                    "stop": outcome.stop,
                    "usage": outcome.usage,
                    "iterations": outcome.iterations,
                });
                println!("{result}");
            }
        }
        exit_code(&outcome.stop)
    }

    async fn interactive(&self) -> ExitCode {
        eprintln!(
            "talon chat — agent {}, session {} (empty line: nothing; /exit or Ctrl-D: quit; Ctrl-C: cancel the turn)",
            self.agent_key, self.session_key
        );
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        loop {
            eprint!("> ");
            let _ = std::io::stderr().flush();
            let line = tokio::select! {
                line = lines.next_line() => line,
                _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
            };
            let line = match line {
                Ok(Some(line)) => line,
                Ok(None) => return ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("talon: cannot read the terminal: {e}");
                    return ExitCode::from(1);
                }
            };
            let prompt = line.trim();
            if prompt.is_empty() {
                continue;
            }
            if prompt == "/exit" {
                return ExitCode::SUCCESS;
            }
            match self.turn(prompt, &|e| print_for_person(&e)).await {
                Ok(outcome) => {
                    println!();
                    report_stop(&outcome.stop);
                }
                Err(e) => eprintln!("talon: {}", visible(&e)),
            }
        }
    }
}

/// Streams text to stdout and tool activity to stderr.
fn print_for_person(event: &RunEvent) {
    match event {
        RunEvent::Text { text } => {
            print!("{}", visible_prose(text));
            let _ = std::io::stdout().flush();
        }
        RunEvent::ToolStarted {
            name, arguments, ..
        } => {
            let arguments = visible(arguments);
            let mut shown: String = arguments.chars().take(120).collect();
            if shown.len() < arguments.len() {
                shown.push('…');
            }
            eprintln!("\n→ {} {shown}", visible(name));
        }
        RunEvent::ToolFinished {
            name,
            is_error,
            elapsed_ms,
            ..
        } => {
            let mark = if *is_error { "✗" } else { "✓" };
            eprintln!("  {mark} {} ({elapsed_ms} ms)", visible(name));
        }
        RunEvent::LoopWarning { message } => eprintln!("  ! {}", visible(message)),
        RunEvent::Compacted { messages } => {
            eprintln!(
                "  (the {messages} oldest messages were summarised to fit the context window)"
            );
        }
        RunEvent::Usage { .. } => {}
        RunEvent::PlanApproved { mode } => {
            eprintln!("  plan approved: continuing in {} mode", mode.as_str());
        }
    }
}

/// Says why a turn ended, when it was not a plain answer.
fn report_stop(stop: &TurnStop) {
    let note = match stop {
        TurnStop::Final => return,
        TurnStop::MaxTokens => "the answer was cut at the model's output limit".to_string(),
        TurnStop::Refusal => "the model declined".to_string(),
        TurnStop::IterationCap => "stopped: the turn reached [chat] max_iterations".to_string(),
        TurnStop::TokenBudget => "stopped: the turn used its [chat] token_budget".to_string(),
        TurnStop::LoopDetected(why) => format!("stopped: {why}"),
        TurnStop::PromptBlocked(why) => format!("the prompt was refused by a hook: {why}"),
        TurnStop::Cancelled => "cancelled".to_string(),
        TurnStop::Failed(why) => format!("failed: {why}"),
        // `talon chat` brings no tools of its own.
        TurnStop::ClientTools => "stopped: the model called a tool no one runs".to_string(),
    };
    eprintln!("talon: {}", visible(&note));
}

fn exit_code(stop: &TurnStop) -> ExitCode {
    match stop {
        TurnStop::Final | TurnStop::MaxTokens | TurnStop::Refusal | TurnStop::TokenBudget => {
            ExitCode::SUCCESS
        }
        TurnStop::Cancelled => ExitCode::from(130),
        TurnStop::IterationCap
        | TurnStop::LoopDetected(_)
        | TurnStop::PromptBlocked(_)
        | TurnStop::Failed(_)
        | TurnStop::ClientTools => ExitCode::from(1),
    }
}
