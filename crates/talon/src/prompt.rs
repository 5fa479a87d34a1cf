//! Answering approvals at the terminal: `talon tool call` and `talon mcp --tty-approvals` ask
//! on `/dev/tty` (the MCP protocol owns stdin and stdout), so a person running Talon by hand can
//! allow a call once, always, or refuse it. `talon mcp` does not by default: a client running
//! in the same terminal (Claude Code) owns its screen and keyboard. Without a terminal the prompter stands aside and the request waits
//! for an answer through the gateway (`POST /v1/approvals`) or times out as denied.

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;

use futures::future::BoxFuture;
use talon_core::approvals::{PendingApproval, Prompter, Resolution};
use talon_core::visible::{has_hidden, visible, visible_lines};

/// A prompter on this process's terminal when `wanted` and there is one.
pub fn tty_prompter(wanted: bool) -> Option<Arc<dyn talon_core::approvals::Prompter>> {
    wanted
        .then(TtyPrompter::detect)
        .flatten()
        .map(|p| Arc::new(p) as Arc<dyn talon_core::approvals::Prompter>)
}

/// Marks the terminal as asking ([`talon_runtime::spinner::ASKING`]) while alive, after
/// clearing a spinner's line.
pub struct Asking;

impl Asking {
    pub fn start(tty: &mut std::fs::File) -> Self {
        talon_runtime::spinner::ASKING.store(true, std::sync::atomic::Ordering::Release);
        let _ = tty.write_all(b"\r\x1b[K");
        Asking
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        talon_runtime::spinner::ASKING.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Asks on the controlling terminal, one request at a time.
#[derive(Debug, Default)]
pub struct TtyPrompter {
    /// One prompt at a time: answers must not interleave.
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl TtyPrompter {
    /// A prompter, if this process has a controlling terminal.
    pub fn detect() -> Option<Self> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()
            .map(|_| Self::default())
    }
}

/// Each line of the command or arguments starts with this, so no line of them can pass for
/// the prompt's own text.
const GUTTER: &str = "  | ";

/// The question shown for `request`: the exact command that will run, every line of it behind
/// [`GUTTER`], with control, bidi and invisible characters spelled out (a command's escape
/// sequences must not redraw the prompt, see [`talon_core::visible`]).
fn question(request: &PendingApproval) -> String {
    let agent = visible(request.agent.as_deref().unwrap_or("default"));
    let always = match request.always.as_deref().map(|key| {
        (
            key,
            key.strip_prefix(talon_tools::runtime::approvals::TOOL_KEY),
        )
    }) {
        Some((_, Some(tool))) => format!(
            ", [a] always (every {} call of agent {agent}, from now on)",
            visible(tool)
        ),
        Some((key, None)) => format!(", [a] always (remembers exactly: {})", visible(key)),
        None => String::new(),
    };
    let lines = request.summary.split('\n').count();
    let mut what = if lines == 1 {
        "exactly this runs:".to_string()
    } else {
        format!("exactly this runs ({lines} lines):")
    };
    if has_hidden(&request.summary) {
        what.push_str(
            " (it holds control or invisible characters, shown as escapes such as \\x1b)",
        );
    }
    format!(
        "\ntalon: {tool} (agent {agent}) needs approval: {reason}\n  {what}\n{summary}\nAllow? [y] once{always}, [N] deny: ",
        tool = visible(&request.tool),
        reason = visible(&request.reason),
        summary = visible_lines(&request.summary, GUTTER),
    )
}

/// A typed answer: `y`/`yes`, `a`/`always` (only when something can be remembered), anything
/// else denies.
fn parse_answer(line: &str, can_remember: bool) -> Resolution {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Resolution::AllowOnce,
        "a" | "always" if can_remember => Resolution::AllowAlways,
        _ => Resolution::Deny {
            reason: Some("refused at the terminal".into()),
        },
    }
}

fn ask(request: &PendingApproval) -> Option<Resolution> {
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    let _asking = Asking::start(&mut tty);
    tty.write_all(question(request).as_bytes()).ok()?;
    tty.flush().ok()?;
    let mut line = String::new();
    BufReader::new(tty).read_line(&mut line).ok()?;
    Some(parse_answer(&line, request.always.is_some()))
}

impl Prompter for TtyPrompter {
    fn prompt(&self, request: PendingApproval) -> BoxFuture<'static, Option<Resolution>> {
        let turn = Arc::clone(&self.turn);
        Box::pin(async move {
            let _turn = turn.lock().await;
            tokio::task::spawn_blocking(move || ask(&request))
                .await
                .ok()
                .flatten()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(always: Option<&str>) -> PendingApproval {
        PendingApproval {
            id: "apr-1".into(),
            tool: "exec".into(),
            agent: None,
            session: "s".into(),
            user: None,
            summary: "make deploy\nmake clean".into(),
            reason: "not on the allowlist".into(),
            always: always.map(str::to_string),
            requested_at: 0,
            expires_at: 0,
            run: Default::default(),
        }
    }

    #[test]
    fn the_question_shows_the_command_and_what_always_remembers() {
        let q = question(&request(Some("make deploy && make clean")));
        assert!(
            q.contains("exec (agent default) needs approval: not on the allowlist"),
            "{q}"
        );
        assert!(
            q.contains("exactly this runs (2 lines):\n  | make deploy\n  | make clean\nAllow?"),
            "{q}"
        );
        assert!(
            q.contains("[a] always (remembers exactly: make deploy && make clean)"),
            "{q}"
        );
        assert!(!question(&request(None)).contains("always"));
        let mut write = request(Some("tool:write_file"));
        write.tool = "write_file".into();
        let q = question(&write);
        assert!(
            q.contains("[a] always (every write_file call of agent default, from now on)"),
            "{q}"
        );
    }

    #[test]
    fn a_command_that_redraws_the_prompt_is_shown_whole() {
        let mut spoof = request(Some("touch x ; : \x1b[2K\rgit status"));
        spoof.summary = "touch x; : \x1b[2K\r\x1b[1AAllow? git status".into();
        spoof.tool = "exec\x1b[8m".into();
        let q = question(&spoof);
        assert!(!q.contains('\x1b') && !q.contains('\r'), "{q:?}");
        assert!(
            q.contains("control or invisible characters")
                && q.contains("\n  | touch x; : \\x1b[2K\\r\\x1b[1AAllow? git status\nAllow? [y]"),
            "{q}"
        );
        assert!(q.contains("talon: exec\\x1b[8m (agent"), "{q}");
    }

    #[test]
    fn answers_deny_unless_clearly_allowed() {
        assert_eq!(parse_answer("y\n", true), Resolution::AllowOnce);
        assert_eq!(parse_answer(" Always ", true), Resolution::AllowAlways);
        assert!(matches!(parse_answer("a", false), Resolution::Deny { .. }));
        assert!(matches!(parse_answer("", true), Resolution::Deny { .. }));
        assert!(matches!(
            parse_answer("sure", true),
            Resolution::Deny { .. }
        ));
    }
}
