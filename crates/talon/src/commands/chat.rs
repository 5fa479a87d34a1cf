//! `talon chat`: talk to an agent from the terminal. Interactive by default (streamed output,
//! tool calls shown as they start and end, approvals asked inline, Ctrl-C cancels the turn);
//! `-p PROMPT` runs one turn and exits, printing `text`, one `json` object, or `stream-json`
//! events. Sessions live in the store: `--session KEY` continues one.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use talon_agent::{RunEvent, TurnOutcome, TurnStop};
use talon_core::permission::PermissionMode;
use talon_core::visible::visible;

use super::chat_repl::{self, Line, Printer};
use talon_runtime::chat_session::{ChatSession, SessionModel, progress_line};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::usage_error;
use crate::agent_runs::RunError;
use crate::config::Config;
use crate::runner::Runner;
use crate::runs::announce::Announcement;
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

pub async fn run(config: Config, args: ChatArgs) -> ExitCode {
    let rt = match runtime::build(
        config.clone(),
        Overrides {
            default_mode: PermissionMode::Default,
            agent: args.agent.clone(),
            workspace: args.workspace.clone(),
            data_dir: args.data_dir.clone(),
            prompter: crate::prompt::tty_prompter(true),
            // `-p` asks at once: the MCP servers' tools must be there for it.
            wait_for_mcp_servers: args.prompt.is_some(),
            ..Overrides::default()
        },
    )
    .await
    {
        Ok(rt) => rt,
        Err(e) => return crate::commands::refused(e),
    };
    let runner = rt.runner.clone();
    let supervisor = runner.supervise();
    let code = match open(runner, &args).await {
        Ok(chat) => match args.prompt.as_deref() {
            // `-p -`: the prompt is what stdin holds.
            Some("-") => match read_stdin().await {
                Ok(prompt) => once(&chat, &prompt, args.output_format).await,
                Err(e) => usage_error(e),
            },
            Some(prompt) => once(&chat, prompt, args.output_format).await,
            None => interactive(&chat, args.session.is_some()).await,
        },
        Err(code) => code,
    };
    // Nothing renews or announces once the store closes.
    drop(supervisor);
    rt.shutdown().await;
    code
}

/// All of stdin, for `-p -`; an empty prompt is refused.
async fn read_stdin() -> Result<String, String> {
    use tokio::io::AsyncReadExt;
    let mut prompt = String::new();
    tokio::io::stdin()
        .read_to_string(&mut prompt)
        .await
        .map_err(|e| format!("-p -: cannot read the prompt from stdin: {e}"))?;
    if prompt.trim().is_empty() {
        return Err("-p -: stdin held no prompt".into());
    }
    Ok(prompt)
}

/// The chat `args` ask for; a wrong agent or model configuration is a usage error.
async fn open(runner: Runner, args: &ChatArgs) -> Result<ChatSession, ExitCode> {
    let show = args.output_format == OutputFormat::Text;
    match ChatSession::open(
        runner,
        args.agent.as_deref(),
        args.session.as_deref(),
        args.permission_mode,
    )
    .await
    {
        Ok(chat) => {
            if show {
                show_child_runs(&chat);
            }
            Ok(chat)
        }
        Err(e @ (RunError::Invalid(_) | RunError::UnknownAgent(_))) => Err(usage_error(e)),
        Err(e) => {
            eprintln!("talon: {e}");
            Err(ExitCode::from(1))
        }
    }
}

/// Ctrl-C cancels what runs until the guard is dropped.
fn cancel_on_ctrl_c() -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let cancel = CancellationToken::new();
    let watch = cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            watch.cancel();
        }
    });
    (cancel, ctrl_c)
}

/// What the next turn of the chat is.
enum Next<'a> {
    /// A person's prompt.
    Prompt(&'a str),
    /// The results of background runs, announced to the session.
    Results(Announcement),
}

/// Runs one turn; Ctrl-C cancels it.
async fn turn(
    chat: &ChatSession,
    next: Next<'_>,
    events: &(dyn Fn(RunEvent) + Send + Sync),
) -> Result<TurnOutcome, String> {
    let (cancel, ctrl_c) = cancel_on_ctrl_c();
    let client = crate::tty_questions::TtyQuestions::detect();
    let ran = match next {
        Next::Prompt(prompt) => chat.turn(prompt, client, cancel, events).await,
        Next::Results(announcement) => {
            eprintln!(
                "\n── results of {} background run(s) ──",
                announcement.deliveries.len()
            );
            chat.announced(announcement, client, cancel, events).await
        }
    };
    ctrl_c.abort();
    let ran = ran.map_err(|e| e.to_string())?;
    if ran.previous_interrupted {
        eprintln!("talon: the previous turn of this session was interrupted and not saved");
    }
    Ok(ran.outcome)
}

async fn once(chat: &ChatSession, prompt: &str, format: OutputFormat) -> ExitCode {
    let printer = Printer::new();
    let show = |event: RunEvent| match format {
        OutputFormat::Text => printer.show(&event),
        OutputFormat::Json => {}
        OutputFormat::StreamJson => {
            if let Ok(line) = serde_json::to_string(&event) {
                println!("{line}");
            }
        }
    };
    let mut announcements = chat.listen();
    let mut next = Next::Prompt(prompt);
    // Background runs the turn started end before the process does: their results are
    // announced here, each in a turn of its own; the last turn's end is the exit status.
    loop {
        if format == OutputFormat::Text {
            printer.start();
        }
        let outcome = turn(chat, next, &show).await;
        printer.stop();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                eprintln!("talon: {}", visible(&e));
                return ExitCode::from(1);
            }
        };
        print_outcome(chat, &outcome, format);
        match next_announcement(chat, &mut announcements).await {
            Some(announcement) => next = Next::Results(announcement),
            None => return exit_code(&outcome.stop),
        }
    }
}

/// The next announcement for the session, while runs it started are live or results of
/// theirs wait; `None` when there is nothing left to wait for.
async fn next_announcement(
    chat: &ChatSession,
    announcements: &mut tokio::sync::mpsc::UnboundedReceiver<Announcement>,
) -> Option<Announcement> {
    while chat.awaits_results().await {
        tokio::select! {
            a = announcements.recv() => return a,
            () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
            _ = tokio::signal::ctrl_c() => return None,
        }
    }
    None
}

fn print_outcome(chat: &ChatSession, outcome: &TurnOutcome, format: OutputFormat) {
    match format {
        OutputFormat::Text => {
            println!();
            report_stop(&outcome.stop);
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let result = serde_json::json!({
                "type": "result",
                "session": chat.session(),
                "text": outcome.text,
                "stop": outcome.stop,
                "usage": outcome.usage,
                "iterations": outcome.iterations,
            });
            println!("{result}");
        }
    }
}

async fn interactive(chat: &ChatSession, resumed: bool) -> ExitCode {
    eprintln!(
        "talon chat — agent {}, session {} (/help: commands; /exit or Ctrl-D: quit; Ctrl-C: cancel the turn)",
        visible(chat.agent()),
        visible(&chat.session())
    );
    if resumed {
        match chat.history().await {
            Ok(messages) => chat_repl::show_history(&messages, HISTORY_SHOWN),
            Err(e) => eprintln!("talon: cannot show the session's history: {e}"),
        }
    }
    let printer = Printer::new();
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut listening = chat.session();
    let mut announcements = chat.listen();
    loop {
        if chat.session() != listening {
            listening = chat.session();
            announcements = chat.listen();
        }
        eprint!("> ");
        let _ = std::io::stderr().flush();
        let (line, announcement) = tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) => (line, None),
                Ok(None) => return ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("talon: cannot read the terminal: {e}");
                    return ExitCode::from(1);
                }
            },
            Some(announcement) = announcements.recv() => (String::new(), Some(announcement)),
            _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
        };
        let next = match announcement {
            Some(announcement) => Next::Results(announcement),
            None => match chat_repl::parse(&line) {
                Line::Nothing => continue,
                Line::Command("exit" | "quit", _) => return ExitCode::SUCCESS,
                Line::Command(name, argument) => {
                    command(chat, name, argument).await;
                    continue;
                }
                Line::Prompt(prompt) => Next::Prompt(prompt),
            },
        };
        printer.start();
        let outcome = turn(chat, next, &|e| printer.show(&e)).await;
        printer.stop();
        match outcome {
            Ok(outcome) => {
                println!();
                report_stop(&outcome.stop);
            }
            Err(e) => eprintln!("talon: {}", visible(&e)),
        }
    }
}

/// Runs one of the chat's slash commands.
async fn command(chat: &ChatSession, name: &str, argument: Option<&str>) {
    match (name, argument) {
        ("help", _) => eprintln!("{}", chat_repl::HELP),
        ("clear", _) => eprintln!(
            "a new session: {} (the last one stays in the store)",
            visible(&chat.clear())
        ),
        ("session", _) => eprintln!(
            "agent {}, session {} (continue it later with --session)",
            visible(chat.agent()),
            visible(&chat.session())
        ),
        ("model", None) => match chat.model().await {
            Ok(SessionModel::Own(own)) => eprintln!("model {} (this session's)", visible(&own)),
            Ok(SessionModel::Agent(model)) => eprintln!("model {} (the agent's)", visible(&model)),
            Err(e) => eprintln!("talon: {e}"),
        },
        ("model", Some(model)) => match chat.set_model(model).await {
            Ok(()) => eprintln!("later turns of this session use {}", visible(model)),
            Err(e) => eprintln!("talon: {e}"),
        },
        ("mode", None) => eprintln!(
            "permission mode {}",
            chat.mode().map_or(
                "as configured ([tools] permission_mode)",
                PermissionMode::as_str
            )
        ),
        ("mode", Some(name)) => match chat_repl::mode(name) {
            Ok(mode) => {
                chat.set_mode(mode);
                eprintln!("permission mode {} from the next turn", mode.as_str());
            }
            Err(e) => eprintln!("talon: {e}"),
        },
        ("compact", _) => match chat.compact().await {
            Ok(0) => eprintln!("nothing to summarise yet"),
            Ok(n) => eprintln!("the {n} oldest messages were summarised"),
            Err(e) => eprintln!("talon: {e}"),
        },
        ("cost", _) => match chat.usage().await {
            Ok(Some(record)) => eprintln!(
                "{} turns, {} input and {} output tokens",
                record.turns, record.input_tokens, record.output_tokens
            ),
            Ok(None) => eprintln!("no turn has run in this session yet"),
            Err(e) => eprintln!("talon: {e}"),
        },
        ("tools", _) => chat_repl::show_tool_results(&chat.last_turn()),
        (other, _) => eprintln!(
            "talon: unknown command /{}; /help lists them (start a line with // to send it as text)",
            visible(other)
        ),
    }
}

/// How many of a resumed session's last messages are shown.
const HISTORY_SHOWN: usize = 10;

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

/// Shows, on stderr, the child runs of the chat's session starting and ending and its handoffs
/// and its team's board changes, until the process ends.
fn show_child_runs(chat: &ChatSession) {
    let session = chat.session_handle();
    let mut events = chat.runner().pipeline().events().subscribe();
    tokio::spawn(async move {
        loop {
            let event = match events.recv().await {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            let ours = session
                .lock()
                .is_ok_and(|session| event.session_key() == session.as_str());
            if let Some(line) = progress_line(&event).filter(|_| ours) {
                eprintln!("{line}");
            }
        }
    });
}
