//! What a person sees in `talon chat`: the answer streamed (the texts of a turn's model
//! responses kept apart), a spinner on a terminal while the model thinks, each tool call with
//! the first line of its result, and the slash commands of an interactive chat.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use talon_agent::{Message, RunEvent, TextJoiner};
use talon_core::permission::PermissionMode;
use talon_core::visible::{visible, visible_prose};

use crate::spinner::Spinner;

/// The interactive chat's commands, for `/help`.
pub const HELP: &str = "\
/help            these commands
/clear           start a new session (the old one stays in the store)
/session         this chat's agent and session
/model [NAME]    the model this session uses, or use NAME from now on
/mode [MODE]     the permission mode, or switch: default, acceptEdits, plan, dontAsk, bypassPermissions
/compact         summarise the session's older messages now
/cost            tokens this session used so far
/tools           the last turn's tool calls with their whole results
/exit            quit (also Ctrl-D); Ctrl-C cancels a running turn";

/// A typed line: a prompt for the model, or one of the chat's commands.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    Prompt(&'a str),
    Command(&'a str, Option<&'a str>),
    Nothing,
}

/// Reads a typed line: `/word [argument]` is a command (never sent to the model); `//text`
/// sends `/text`.
pub fn parse(line: &str) -> Line<'_> {
    let line = line.trim();
    if line.is_empty() {
        return Line::Nothing;
    }
    if let Some(escaped) = line.strip_prefix("//") {
        return Line::Prompt(&line[line.len() - escaped.len() - 1..]);
    }
    match line.strip_prefix('/') {
        Some(command) => {
            let (name, argument) = match command.split_once(char::is_whitespace) {
                Some((name, rest)) => (name, Some(rest.trim()).filter(|r| !r.is_empty())),
                None => (command, None),
            };
            Line::Command(name, argument)
        }
        None => Line::Prompt(line),
    }
}

/// Shows a turn's events to a person: text on stdout, tool calls on stderr.
pub struct Printer {
    joiner: Mutex<TextJoiner>,
    spinner: Spinner,
}

impl Printer {
    pub fn new() -> Self {
        Self {
            joiner: Mutex::new(TextJoiner::default()),
            spinner: Spinner::new("thinking…"),
        }
    }

    /// A turn starts: the model is thinking.
    pub fn start(&self) {
        *self.joiner.lock().unwrap_or_else(PoisonError::into_inner) = TextJoiner::default();
        self.spinner.set(true);
    }

    /// The turn ended.
    pub fn stop(&self) {
        self.spinner.set(false);
    }

    pub fn show(&self, event: &RunEvent) {
        let text = self
            .joiner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .text(event);
        if let Some(text) = text {
            self.spinner.set(false);
            print!("{}", visible_prose(&text));
            let _ = std::io::stdout().flush();
            return;
        }
        match event {
            RunEvent::ToolStarted {
                name, arguments, ..
            } => {
                self.spinner.set(false);
                let shown = cut(&visible(arguments), 120);
                self.spinner
                    .write(|| eprintln!("\n→ {} {shown}", visible(name)));
            }
            RunEvent::ToolFinished {
                name,
                is_error,
                elapsed_ms,
                summary,
                ..
            } => {
                let mark = if *is_error { "✗" } else { "✓" };
                self.spinner.write(|| {
                    eprintln!(
                        "  {mark} {} ({elapsed_ms} ms): {}",
                        visible(name),
                        visible(summary)
                    );
                });
                // The model reads the result and thinks again.
                self.spinner.set(true);
            }
            RunEvent::LoopWarning { message } => {
                self.spinner.write(|| eprintln!("  ! {}", visible(message)));
            }
            RunEvent::Compacted { messages } => self.spinner.write(|| {
                eprintln!(
                    "  (the {messages} oldest messages were summarised to fit the context window)"
                );
            }),
            RunEvent::PlanApproved { mode } => self.spinner.write(|| {
                eprintln!("  plan approved: continuing in {} mode", mode.as_str());
            }),
            RunEvent::Text { .. } | RunEvent::Usage { .. } => {}
        }
    }
}

/// `text` cut to `max` characters, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    let mut shown: String = text.chars().take(max).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

/// The end of a session's history, shown when a chat resumes it: the last `count` messages,
/// each cut to a few lines.
pub fn show_history(messages: &[Message], count: usize) {
    let shown = &messages[messages.len().saturating_sub(count)..];
    if shown.is_empty() {
        return;
    }
    if shown.len() < messages.len() {
        eprintln!("… {} earlier messages", messages.len() - shown.len());
    }
    for message in shown {
        match message {
            Message::User { text, .. } => eprintln!("you: {}", cut(&visible_prose(text), 300)),
            Message::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    eprintln!("agent: {}", cut(&visible_prose(text), 300));
                }
                for call in tool_calls {
                    eprintln!(
                        "  → {} {}",
                        visible(&call.name),
                        cut(&visible(&call.arguments), 80)
                    );
                }
            }
            Message::ToolResults { results } => {
                for result in results {
                    let mark = if result.is_error { "✗" } else { "✓" };
                    eprintln!("  {mark} {}", cut(&visible(&result.content), 120));
                }
            }
        }
    }
    eprintln!("— continuing the session —");
}

/// The last turn's tool calls with their whole results (`/tools`).
pub fn show_tool_results(messages: &[Message]) {
    let mut calls = std::collections::HashMap::new();
    let mut any = false;
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    calls.insert(call.id.clone(), call);
                }
            }
            Message::ToolResults { results } => {
                for result in results {
                    any = true;
                    let call = calls.get(&result.call_id);
                    let name = call.map_or("?", |c| c.name.as_str());
                    let arguments = call.map_or("", |c| c.arguments.as_str());
                    let mark = if result.is_error { "✗" } else { "✓" };
                    eprintln!("{mark} {} {}", visible(name), visible(arguments));
                    eprintln!(
                        "{}",
                        talon_core::visible::visible_lines(&result.content, "  │ ")
                    );
                }
            }
            Message::User { .. } => {}
        }
    }
    if !any {
        eprintln!("the last turn called no tools");
    }
}

/// A permission mode typed after `/mode`.
pub fn mode(name: &str) -> Result<PermissionMode, String> {
    name.parse::<PermissionMode>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_words_are_commands_and_never_prompts() {
        assert_eq!(parse("/help"), Line::Command("help", None));
        assert_eq!(
            parse(" /model  gpt-5 "),
            Line::Command("model", Some("gpt-5"))
        );
        assert_eq!(parse("/nonsense"), Line::Command("nonsense", None));
        assert_eq!(
            parse("//etc/hosts is a path"),
            Line::Prompt("/etc/hosts is a path")
        );
        assert_eq!(parse("hello"), Line::Prompt("hello"));
        assert_eq!(parse("   "), Line::Nothing);
    }

    #[test]
    fn long_text_is_cut_with_a_mark() {
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
