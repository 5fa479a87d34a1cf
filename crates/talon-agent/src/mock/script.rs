//! The script format of the mock provider: the turns it answers with, read from JSON.
//!
//! Parsing is strict (unknown fields are rejected and each turn is checked on its own) so that a
//! typo in a test or demo script is reported with the turn it is in instead of silently changing
//! what the mock answers.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::MockError;

/// The whole script of a mock provider: one [`Turn`] per request, in order.
///
/// Exists so tests and offline demos can say exactly what "the model" answers without a network
/// or an API key. Deserialized from JSON such as
/// `{"turns": [{"text": "hi"}, {"tool_calls": [{"name": "read", "arguments": {"path": "a"}}]}]}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "RawScript")]
pub struct Script {
    /// The answers, consumed one per request across both APIs. Never empty.
    pub turns: Vec<Turn>,
    /// When the turns run out, keep answering with the last one instead of failing with HTTP 500.
    pub repeat_last: bool,
    /// The answer to every request whose last message carries tool results, instead of the next
    /// turn (which is then not used up). With it, many concurrent conversations can share one
    /// script: `turns` answers each prompt (with tool calls), this answers their results.
    pub after_tool_results: Option<Turn>,
    /// Scripts of their own for conversations told apart by their first user message (a parent
    /// and the children it starts ask at once, in no fixed order): a request whose first user
    /// message contains a conversation's `when` is answered by that conversation's next turn,
    /// the first matching conversation winning; other requests by `turns`.
    pub conversations: Vec<Conversation>,
}

/// A conversation's own script (see [`Script::conversations`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// Text the conversation's first user message contains (with `last`: its last one).
    pub when: String,
    /// Match the request's last user message instead of its first (a message that comes in
    /// the middle of conversations, such as an announcement of results).
    pub last: bool,
    /// Its answers, in order; when they run out, the last one again.
    pub turns: Vec<Turn>,
}

/// One scripted answer of the mock provider.
///
/// Either a successful assistant message (text and/or tool calls, streamed or not as the client
/// asked) or, when [`Turn::status`] is set, an HTTP error in the requested API's error format.
/// The timing and breakage knobs exist to exercise a client's retry, idle-timeout and
/// truncated-stream handling.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Turn {
    /// Assistant text. `None` or an empty string means the answer has no text.
    pub text: Option<String>,
    /// Tool calls the assistant makes, in order.
    pub tool_calls: Vec<ScriptedCall>,
    /// Milliseconds to wait before the response starts.
    pub delay_ms: u64,
    /// Milliseconds to wait between streamed (SSE) events.
    pub chunk_delay_ms: u64,
    /// Answer with this HTTP status (400-599) and an error body, never a stream.
    pub status: Option<u16>,
    /// Seconds sent as the `Retry-After` header of an error answer.
    pub retry_after: Option<u64>,
    /// The message of an error answer; "scripted error" when unset.
    pub error: Option<String>,
    /// Overrides the finish/stop reason. Written in either API's words ("max_tokens" or
    /// "length", "end_turn" or "stop", "tool_use" or "tool_calls"); each endpoint translates
    /// the well-known ones into its own and passes any other value through.
    pub stop: Option<String>,
    /// Token usage reported; small defaults when unset.
    pub usage: Option<Usage>,
    /// Stream about half of the events, then end the body without the terminal event.
    pub cut_stream: bool,
    /// Milliseconds to stall once, after the first streamed event.
    pub stall_ms: u64,
}

/// A tool call made by a scripted turn.
///
/// Exists separately from any provider type so scripts name calls the same way for both APIs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// The call id; `call_mock_<turn>_<i>` (OpenAI) or `toolu_mock_<turn>_<i>` (Anthropic) when
    /// unset, where `<turn>` is the 0-based number of the answer and `<i>` the call's position.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The call's arguments, `{}` when unset. A JSON *string* is sent verbatim as the serialized
    /// arguments, which lets a script send malformed arguments (e.g. `"{\"path\": "`).
    /// `{{last_run_id}}` anywhere in them stands for the last agent run id (`run-…`) in the
    /// request (what an earlier call returned).
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

/// Token counts a turn reports, in Anthropic's terms (OpenAI's `prompt_tokens` and
/// `completion_tokens` are derived from them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Usage {
    /// Tokens of the prompt.
    pub input_tokens: u64,
    /// Tokens of the answer.
    pub output_tokens: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 10,
            output_tokens: 5,
        }
    }
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The script as written, before each turn is read and checked with its number.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScript {
    #[serde(default)]
    turns: Vec<Value>,
    #[serde(default)]
    conversations: Vec<RawConversation>,
    #[serde(default)]
    repeat_last: bool,
    #[serde(default)]
    after_tool_results: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConversation {
    when: String,
    #[serde(default)]
    last: bool,
    turns: Vec<Value>,
}

/// Reads and checks `turns`, naming each by `place` and its number.
fn read_turns(turns: Vec<Value>, place: &str) -> Result<Vec<Turn>, String> {
    turns
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let turn = Turn::deserialize(value).map_err(|e| format!("{place}{}: {e}", i + 1))?;
            turn.check().map_err(|e| format!("{place}{}: {e}", i + 1))?;
            Ok(turn)
        })
        .collect()
}

impl TryFrom<RawScript> for Script {
    type Error = String;

    fn try_from(raw: RawScript) -> Result<Self, Self::Error> {
        if raw.turns.is_empty() && raw.conversations.is_empty() {
            return Err(
                "the script has no turns; `turns` (or `conversations`) needs at least one turn"
                    .to_owned(),
            );
        }
        let turns = read_turns(raw.turns, "turn ")?;
        let conversations = raw
            .conversations
            .into_iter()
            .enumerate()
            .map(|(c, conversation)| {
                if conversation.when.is_empty() || conversation.turns.is_empty() {
                    return Err(format!(
                        "conversations[{c}]: `when` and `turns` must not be empty"
                    ));
                }
                Ok(Conversation {
                    when: conversation.when,
                    last: conversation.last,
                    turns: read_turns(conversation.turns, &format!("conversations[{c}] turn "))?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let after_tool_results = raw
            .after_tool_results
            .map(|value| {
                let turn =
                    Turn::deserialize(value).map_err(|e| format!("after_tool_results: {e}"))?;
                turn.check()
                    .map_err(|e| format!("after_tool_results: {e}"))?;
                Ok::<_, String>(turn)
            })
            .transpose()?;
        Ok(Script {
            turns,
            repeat_last: raw.repeat_last,
            after_tool_results,
            conversations,
        })
    }
}

impl Script {
    /// Reads a script from JSON text, naming the turn and field at fault when it is invalid.
    pub fn from_json(text: &str) -> Result<Script, MockError> {
        serde_json::from_str(text).map_err(|e| MockError::InvalidScript(e.to_string()))
    }

    /// Reads a script from a JSON file (what `talon mock-provider --script FILE` loads).
    pub fn from_file(path: &Path) -> Result<Script, MockError> {
        let text = std::fs::read_to_string(path).map_err(|source| MockError::ReadScript {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| MockError::InvalidScriptFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}

impl Turn {
    /// Rejects combinations that cannot mean what the author intended.
    fn check(&self) -> Result<(), String> {
        match self.status {
            Some(status) if !(400..=599).contains(&status) => {
                return Err(format!(
                    "`status` {status} is not an HTTP error status (expected 400-599)"
                ));
            }
            Some(_) if self.has_text() || !self.tool_calls.is_empty() => {
                return Err(
                    "a turn with `status` answers with an error, so it cannot also have `text` or `tool_calls`"
                        .to_owned(),
                );
            }
            Some(_) => {}
            None if self.retry_after.is_some() => {
                return Err(
                    "`retry_after` only applies to error turns; set `status` too".to_owned(),
                );
            }
            None if self.error.is_some() => {
                return Err("`error` only applies to error turns; set `status` too".to_owned());
            }
            None => {}
        }
        for (i, call) in self.tool_calls.iter().enumerate() {
            if call.name.trim().is_empty() {
                return Err(format!("tool_calls[{i}]: `name` is empty"));
            }
        }
        Ok(())
    }

    /// The text of the answer, `None` when it has none (unset or empty).
    pub(crate) fn text(&self) -> Option<&str> {
        self.text.as_deref().filter(|t| !t.is_empty())
    }

    fn has_text(&self) -> bool {
        self.text().is_some()
    }

    /// The reported usage: the scripted one or the defaults.
    pub(crate) fn usage(&self) -> Usage {
        self.usage.unwrap_or_default()
    }
}

impl ScriptedCall {
    /// The arguments as the serialized JSON text sent on the wire.
    pub(crate) fn arguments_text(&self) -> String {
        match &self.arguments {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        }
    }

    /// The arguments as a JSON value (Anthropic's `input`); verbatim text that does not parse is
    /// kept as a JSON string.
    pub(crate) fn arguments_value(&self) -> Value {
        match &self.arguments {
            Value::String(raw) => {
                serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
            }
            other => other.clone(),
        }
    }
}
