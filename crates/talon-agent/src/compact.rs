//! Compaction: when a session's history nears the model's context window, its oldest turns are
//! summarised by the model and the summary stands in for them. Cuts fall only where a user
//! message begins a turn, so a tool call is never separated from its result.

use crate::agent_loop::Agent;
use crate::message::Message;
use crate::provider::ProviderError;

/// A rough token count (four characters a token), enough to decide when to compact.
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| serde_json::to_string(m).map_or(0, |s| s.len() as u64))
        .sum::<u64>()
        / 4
}

/// The index of the first message to keep so that what is kept is at most `keep_tokens`, at a
/// user message (the start of a turn). `None` when no turn can be summarised (only the last
/// turn is left, or even it is larger than `keep_tokens` and is the only one).
pub fn cut_point(messages: &[Message], keep_tokens: u64) -> Option<usize> {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::User { .. }))
        .map(|(i, _)| i)
        .collect();
    // The latest turn start whose suffix fits, but never the very first message (nothing cut);
    // if nothing fits, keep at least the last turn.
    let fitting = starts
        .iter()
        .copied()
        .filter(|&i| i > 0)
        .find(|&i| estimate_tokens(&messages[i..]) <= keep_tokens);
    fitting.or_else(|| starts.last().copied().filter(|&i| i > 0))
}

const INSTRUCTIONS: &str = "You compact conversations. Summarise the conversation below for \
your own later use: the user's goals, decisions made, facts learned (file names, values, \
results of tool calls that still matter), and what is still open. Be concise and specific; \
write it as notes, not as a reply to the user.";

/// `messages` as plain text for the summariser; long tool results are cut.
fn transcript(previous: Option<&str>, messages: &[Message]) -> String {
    let mut out = String::new();
    if let Some(previous) = previous.filter(|p| !p.trim().is_empty()) {
        out.push_str("Summary of what came before:\n");
        out.push_str(previous);
        out.push_str("\n\nThen:\n");
    }
    let cut = |s: &str| -> String {
        let mut c: String = s.chars().take(2_000).collect();
        if c.len() < s.len() {
            c.push('…');
        }
        c
    };
    for m in messages {
        match m {
            Message::User { text, .. } => out.push_str(&format!("user: {}\n", cut(text))),
            Message::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    out.push_str(&format!("assistant: {}\n", cut(text)));
                }
                for call in tool_calls {
                    out.push_str(&format!(
                        "assistant called {}({})\n",
                        call.name,
                        cut(&call.arguments)
                    ));
                }
            }
            Message::ToolResults { results } => {
                for r in results {
                    let kind = if r.is_error { "error" } else { "result" };
                    out.push_str(&format!("tool {kind}: {}\n", cut(&r.content)));
                }
            }
        }
    }
    out
}

impl Agent {
    /// The model's summary of `older` (following `previous`, an earlier summary), without tools.
    pub async fn summarize(
        &self,
        previous: Option<&str>,
        older: &[Message],
    ) -> Result<String, ProviderError> {
        self.ask_once(
            &self.config().model,
            INSTRUCTIONS,
            transcript(previous, older),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolCallRequest, ToolResult};

    fn turn(n: usize, size: usize) -> Vec<Message> {
        vec![
            Message::user(format!("q{n} {}", "x".repeat(size))),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: format!("c{n}"),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::ToolResults {
                results: vec![ToolResult {
                    call_id: format!("c{n}"),
                    content: "y".repeat(size),
                    is_error: false,
                    images: Vec::new(),
                }],
            },
            Message::Assistant {
                text: format!("a{n}"),
                tool_calls: Vec::new(),
            },
        ]
    }

    #[test]
    fn cuts_fall_on_turn_starts_and_keep_what_fits() {
        let history: Vec<Message> = (0..4).flat_map(|n| turn(n, 400)).collect();
        let per_turn = estimate_tokens(&turn(0, 400));
        // Room for two turns: the last two are kept, at a user message.
        let cut = cut_point(&history, per_turn * 2 + 10).unwrap_or_default();
        assert_eq!(cut, 8);
        assert!(matches!(history[cut], Message::User { .. }));
        // Room for less than one turn: the last turn is still kept whole.
        assert_eq!(cut_point(&history, 5), Some(12));
        // A single turn cannot be cut.
        assert_eq!(cut_point(&turn(0, 400), 5), None);
    }

    #[test]
    fn the_transcript_names_calls_and_results() {
        let text = transcript(Some("earlier notes"), &turn(1, 3));
        assert!(text.starts_with("Summary of what came before:\nearlier notes"));
        assert!(text.contains("user: q1 xxx"));
        assert!(text.contains("assistant called read_file({})"));
        assert!(text.contains("tool result: yyy"));
        assert!(text.contains("assistant: a1"));
    }
}
