//! `talon chat`: talk to an agent from the terminal. Interactive by default (streamed output,
//! tool calls shown as they start and end, approvals asked inline, Ctrl-C cancels the turn);
//! `-p PROMPT` runs one turn and exits, printing `text`, one `json` object, or `stream-json`
//! events. Sessions live in the store: `--session KEY` continues one.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use talon_agent::{Message, RunEvent, TurnOutcome, TurnStop};
use talon_core::permission::PermissionMode;
use talon_core::visible::visible;

use super::chat_repl::{self, Line, Printer};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::usage_error;
use crate::agent_runs::{Runner, TurnRequest};
use crate::config::Config;
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

/// A chat bound to its agent and session.
struct Chat {
    runner: Runner,
    agent_key: String,
    /// The session the next turn runs in (`/clear` starts another); shared with the task that
    /// shows its child runs.
    session_key: Arc<Mutex<String>>,
    /// The mode the next turn runs in; an approved plan moves it on.
    mode: Mutex<Option<PermissionMode>>,
    /// The last turn's messages (`/tools` shows their tool results in full).
    last_turn: Mutex<Vec<Message>>,
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
        Err(e) => return crate::commands::build_failed(e),
    };
    let runner = rt.runner.clone();
    let _supervisor = runner.supervise();
    let code = match Chat::open(runner, &args).await {
        Ok(chat) => match args.prompt.as_deref() {
            // `-p -`: the prompt is what stdin holds.
            Some("-") => match read_stdin().await {
                Ok(prompt) => chat.once(&prompt, args.output_format).await,
                Err(e) => usage_error(e),
            },
            Some(prompt) => chat.once(prompt, args.output_format).await,
            None => chat.interactive(args.session.is_some()).await,
        },
        Err(code) => code,
    };
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

/// A new session's name: the time and this process.
fn new_session_name() -> String {
    format!(
        "{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        std::process::id()
    )
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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
        let session = args.session.clone().unwrap_or_else(new_session_name);
        let session_key = Arc::new(Mutex::new(Runner::session_key(
            &agent_key, "cli", None, &session,
        )));
        if args.output_format == OutputFormat::Text {
            show_child_runs(&runner, Arc::clone(&session_key));
        }
        Ok(Self {
            session_key,
            runner,
            agent_key,
            mode: Mutex::new(args.permission_mode),
            last_turn: Mutex::new(Vec::new()),
        })
    }

    fn session(&self) -> String {
        lock(&self.session_key).clone()
    }

    /// Runs one turn, saved to the store when it ends; Ctrl-C cancels it.
    async fn turn(
        &self,
        prompt: &str,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<TurnOutcome, String> {
        self.turn_delivering(prompt, Vec::new(), events).await
    }

    /// Runs the turn announcing background results to the session; the claim is given back
    /// when it cannot run (another turn or gateway announces them).
    async fn announced(
        &self,
        announcement: Announcement,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<TurnOutcome, String> {
        eprintln!(
            "\n── results of {} background run(s) ──",
            announcement.deliveries.len()
        );
        let ran = self
            .turn_delivering(&announcement.prompt(), announcement.ids(), events)
            .await;
        if ran.is_err() {
            self.runner.give_back(&announcement.session).await;
        }
        ran
    }

    async fn turn_delivering(
        &self,
        prompt: &str,
        delivering: Vec<String>,
        events: &(dyn Fn(RunEvent) + Send + Sync),
    ) -> Result<TurnOutcome, String> {
        let cancel = CancellationToken::new();
        let watch = cancel.clone();
        let ctrl_c = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                watch.cancel();
            }
        });
        let mode = *lock(&self.mode);
        let ran = self
            .runner
            .run(
                TurnRequest {
                    agent: Some(&self.agent_key),
                    user: None,
                    session: Some(self.session()),
                    history: Vec::new(),
                    prompt: prompt.to_string(),
                    channel: "cli",
                    client: crate::tty_questions::TtyQuestions::detect(),
                    permission_mode: mode,
                    cancel,
                    api: Default::default(),
                    child: None,
                    delivering,
                    origin: None,
                },
                events,
            )
            .await;
        ctrl_c.abort();
        let ran = ran.map_err(|e| e.to_string())?;
        {
            let mut mode = lock(&self.mode);
            if mode.is_some() {
                *mode = Some(ran.outcome.permission_mode);
            }
        }
        *lock(&self.last_turn) = ran.outcome.messages.clone();
        if ran.previous_interrupted {
            eprintln!("talon: the previous turn of this session was interrupted and not saved");
        }
        Ok(ran.outcome)
    }

    async fn once(&self, prompt: &str, format: OutputFormat) -> ExitCode {
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
        if format == OutputFormat::Text {
            printer.start();
        }
        let mut announcements = self.runner.listen(&self.session());
        let outcome = self.turn(prompt, &show).await;
        printer.stop();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                eprintln!("talon: {}", visible(&e));
                return ExitCode::from(1);
            }
        };
        self.print_outcome(&outcome, format);
        // Background runs the turn started end before the process does: their results are
        // announced here, each in a turn of its own.
        let mut last = outcome;
        while let Some(announcement) = self.next_announcement(&mut announcements).await {
            if format == OutputFormat::Text {
                printer.start();
            }
            let outcome = self.announced(announcement, &show).await;
            printer.stop();
            match outcome {
                Ok(outcome) => {
                    self.print_outcome(&outcome, format);
                    last = outcome;
                }
                Err(e) => {
                    eprintln!("talon: {}", visible(&e));
                    return ExitCode::from(1);
                }
            }
        }
        exit_code(&last.stop)
    }

    /// The next announcement for the session, while runs it started are live or results of
    /// theirs wait; `None` when there is nothing left to wait for.
    async fn next_announcement(
        &self,
        announcements: &mut tokio::sync::mpsc::UnboundedReceiver<Announcement>,
    ) -> Option<Announcement> {
        loop {
            let session = self.session();
            let waiting = self
                .runner
                .store()
                .live_child_runs(&session)
                .await
                .is_ok_and(|runs| !runs.is_empty())
                || self
                    .runner
                    .store()
                    .pending_deliveries(&session, 1)
                    .await
                    .is_ok_and(|p| !p.is_empty());
            if !waiting {
                return None;
            }
            tokio::select! {
                a = announcements.recv() => return a,
                () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
                _ = tokio::signal::ctrl_c() => return None,
            }
        }
    }

    fn print_outcome(&self, outcome: &TurnOutcome, format: OutputFormat) {
        match format {
            OutputFormat::Text => {
                println!();
                report_stop(&outcome.stop);
            }
            OutputFormat::Json | OutputFormat::StreamJson => {
                let result = serde_json::json!({
                    "type": "result",
                    "session": self.session(),
                    "text": outcome.text,
                    "stop": outcome.stop,
                    "usage": outcome.usage,
                    "iterations": outcome.iterations,
                });
                println!("{result}");
            }
        }
    }

    async fn interactive(&self, resumed: bool) -> ExitCode {
        eprintln!(
            "talon chat — agent {}, session {} (/help: commands; /exit or Ctrl-D: quit; Ctrl-C: cancel the turn)",
            visible(&self.agent_key),
            visible(&self.session())
        );
        if resumed {
            match self.runner.history(&self.session()).await {
                Ok(messages) => chat_repl::show_history(&messages, HISTORY_SHOWN),
                Err(e) => eprintln!("talon: cannot show the session's history: {e}"),
            }
        }
        let printer = Printer::new();
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let mut listening = self.session();
        let mut announcements = self.runner.listen(&listening);
        loop {
            if self.session() != listening {
                listening = self.session();
                announcements = self.runner.listen(&listening);
            }
            eprint!("> ");
            let _ = std::io::stderr().flush();
            let line = tokio::select! {
                line = lines.next_line() => line,
                Some(announcement) = announcements.recv() => {
                    printer.start();
                    let outcome = self.announced(announcement, &|e| printer.show(&e)).await;
                    printer.stop();
                    match outcome {
                        Ok(outcome) => {
                            println!();
                            report_stop(&outcome.stop);
                        }
                        Err(e) => eprintln!("talon: {}", visible(&e)),
                    }
                    continue;
                }
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
            match chat_repl::parse(&line) {
                Line::Nothing => {}
                Line::Command("exit" | "quit", _) => return ExitCode::SUCCESS,
                Line::Command(name, argument) => self.command(name, argument).await,
                Line::Prompt(prompt) => {
                    printer.start();
                    let outcome = self.turn(prompt, &|e| printer.show(&e)).await;
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
        }
    }

    /// Runs one of the chat's slash commands.
    async fn command(&self, name: &str, argument: Option<&str>) {
        let session = self.session();
        match (name, argument) {
            ("help", _) => eprintln!("{}", chat_repl::HELP),
            ("clear", _) => {
                let key = Runner::session_key(&self.agent_key, "cli", None, &new_session_name());
                eprintln!(
                    "a new session: {} (the last one stays in the store)",
                    visible(&key)
                );
                *lock(&self.session_key) = key;
                lock(&self.last_turn).clear();
            }
            ("session", _) => eprintln!(
                "agent {}, session {} (continue it later with --session)",
                visible(&self.agent_key),
                visible(&session)
            ),
            ("model", None) => {
                let own = self
                    .runner
                    .store()
                    .session_settings(&session)
                    .await
                    .ok()
                    .and_then(|s| s.get("model").and_then(|m| m.as_str()).map(str::to_string));
                match (own, self.runner.agent_model(&self.agent_key).await) {
                    (Some(own), _) => eprintln!("model {} (this session's)", visible(&own)),
                    (None, Ok(model)) => eprintln!("model {} (the agent's)", visible(&model)),
                    (None, Err(e)) => eprintln!("talon: {e}"),
                }
            }
            ("model", Some(model)) => {
                let value = serde_json::json!(model);
                match self
                    .runner
                    .store()
                    .set_session_setting(&session, "model", &value)
                    .await
                {
                    Ok(()) => eprintln!("later turns of this session use {}", visible(model)),
                    Err(e) => eprintln!("talon: cannot set the model: {e}"),
                }
            }
            ("mode", None) => {
                let mode = *lock(&self.mode);
                eprintln!(
                    "permission mode {}",
                    mode.map_or(
                        "as configured ([tools] permission_mode)",
                        PermissionMode::as_str
                    )
                );
            }
            ("mode", Some(name)) => match chat_repl::mode(name) {
                Ok(mode) => {
                    *lock(&self.mode) = Some(mode);
                    eprintln!("permission mode {} from the next turn", mode.as_str());
                }
                Err(e) => eprintln!("talon: {e}"),
            },
            ("compact", _) => match self.runner.compact(&self.agent_key, &session).await {
                Ok(0) => eprintln!("nothing to summarise yet"),
                Ok(n) => eprintln!("the {n} oldest messages were summarised"),
                Err(e) => eprintln!("talon: {e}"),
            },
            ("cost", _) => match self.runner.store().session(&session).await {
                Ok(Some(record)) => eprintln!(
                    "{} turns, {} input and {} output tokens",
                    record.turns, record.input_tokens, record.output_tokens
                ),
                Ok(None) => eprintln!("no turn has run in this session yet"),
                Err(e) => eprintln!("talon: {e}"),
            },
            ("tools", _) => chat_repl::show_tool_results(&lock(&self.last_turn)),
            (other, _) => eprintln!(
                "talon: unknown command /{}; /help lists them (start a line with // to send it as text)",
                visible(other)
            ),
        }
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
/// and its team's board changes (the bus's `child_run_*`, `handoff` and `team` events), until
/// the process ends.
fn show_child_runs(runner: &Runner, session: Arc<Mutex<String>>) {
    let mut events = runner.pipeline().events().subscribe();
    tokio::spawn(async move {
        loop {
            let event = match events.recv().await {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if event.session_key() != lock(&session).as_str() {
                continue;
            }
            match &event {
                talon_core::events::ToolEvent::ChildRunStarted {
                    origin,
                    task,
                    background,
                    run,
                    ..
                } => eprintln!(
                    "  ↳ {} {} started{}: {}",
                    visible(origin),
                    run.run_id.as_deref().unwrap_or("-"),
                    if *background {
                        " in the background"
                    } else {
                        ""
                    },
                    visible(task)
                ),
                talon_core::events::ToolEvent::ChildRunFinished {
                    status,
                    input_tokens,
                    output_tokens,
                    run,
                    ..
                } => eprintln!(
                    "  ↳ {} {status} ({input_tokens} tokens in, {output_tokens} out)",
                    run.run_id.as_deref().unwrap_or("-"),
                ),
                talon_core::events::ToolEvent::Handoff {
                    from_agent,
                    to_agent,
                    reason,
                    ..
                } => eprintln!(
                    "  ↪ the conversation goes from {} to {}: {}",
                    visible(from_agent),
                    visible(to_agent),
                    visible(reason)
                ),
                talon_core::events::ToolEvent::Team {
                    team,
                    agent_key,
                    change,
                    task_id,
                    subject,
                    ..
                } => eprintln!(
                    "  ▣ {} {}: {} {}",
                    visible(team),
                    change.replace('_', " "),
                    if *task_id > 0 {
                        format!("#{task_id} {}", visible(subject))
                    } else {
                        format!("to {}", visible(subject))
                    },
                    visible(agent_key)
                ),
                _ => {}
            }
        }
    });
}
