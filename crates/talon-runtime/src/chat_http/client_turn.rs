//! What `/v1/chat/completions` and `/v1/messages` share once each has parsed its own wire
//! format: the request checked against the agent, the conversation made ready for the loop,
//! and the answer taken apart for the reply.
//!
//! **Client tools.** A client's `tools` are offered to the model beside the agent's own. A call
//! to one ends the turn ([`TurnStop::ClientTools`]) once the agent's own calls of the same answer
//! have run; the client runs it and sends the conversation back with its result. The client's
//! copy of the conversation holds only what it was shown (the texts and its own calls), so the
//! turn's full messages (the agent's calls and their results) wait here, keyed by the id of the
//! first client call, which Talon makes random (`call_…`, `toolu_…`) so no other conversation
//! or user can name it. The follow-up's assistant message with that id is replaced by them, and
//! the model continues with everything it did. An id Talon does not hold (a restart, another
//! server) is taken as the client sent it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use talon_agent::message::ToolResult;
use talon_agent::provider::ProviderKind;
use talon_agent::{
    Message, RunEvent, Sampling, TEXT_SEPARATOR, ToolCallRequest, ToolDef, TurnOptions, TurnStop,
};

use super::{ApiError, ApiState, Turn, agent_of, finished, spawn_turn};
use crate::agent_runs::{ApiTurn, Ran, RunError, TurnEngine};
use crate::runner::Runner;

/// A client's request in neutral form (each API parses its own into this).
#[derive(Debug, Default)]
pub(super) struct ClientRequest {
    pub model: String,
    pub user: Option<String>,
    /// A stored session to continue (Talon's extension).
    pub session: Option<String>,
    /// System or developer texts, added after the agent's own system prompt.
    pub system: Vec<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    /// Offer the model no tools (`tool_choice: "none"`).
    pub no_tools: bool,
    pub max_tokens: Option<u32>,
    pub sampling: Sampling,
}

/// A request checked and ready to run.
pub(super) struct Prepared {
    turn: Turn,
    /// The agent's key and the user: whose continuations these are.
    owner: Owner,
}

/// Whose conversation a continuation belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner {
    agent: String,
    user: Option<String>,
}

impl Prepared {
    /// Runs the turn on a task of its own (see [`spawn_turn`]; dropping the guard cancels
    /// it), streaming its events to `events`; the future gives the finished turn and its answer
    /// (client calls under ids starting with `id_prefix`), or why it failed.
    pub fn spawn(
        self,
        state: &ApiState,
        id_prefix: &'static str,
        events: impl Fn(RunEvent) + Send + Sync + 'static,
    ) -> (
        impl Future<Output = Result<(Ran, Answer), ApiError>> + Send + 'static,
        tokio_util::sync::DropGuard,
    ) {
        let options = self.turn.api.options.clone();
        let (task, guard) = spawn_turn(state.runner.clone(), self.turn, events);
        let (state, owner) = (state.clone(), self.owner);
        let done = async move {
            let ran = finished(task).await?;
            if let Some(e) = ApiError::of_turn(&ran.outcome.stop) {
                return Err(e);
            }
            let answer = answer(&state, owner, &options, &ran, id_prefix);
            Ok((ran, answer))
        };
        (done, guard)
    }

    /// Who the request's log line names.
    pub fn labels(&self) -> talon_gateway::RequestLabels {
        talon_gateway::RequestLabels {
            agent: Some(self.owner.agent.clone()),
            session: self.turn.session.clone(),
        }
    }
}

/// Longest a tool name may be (OpenAI's limit; Anthropic allows more).
const MAX_TOOL_NAME: usize = 64;

/// Checks `request` against its agent and makes its conversation ready for the loop.
pub(super) async fn prepare(
    state: &ApiState,
    request: ClientRequest,
) -> Result<Prepared, ApiError> {
    let runner = &state.runner;
    let agent = agent_of(&request.model).map(str::to_string);
    let ctx = match runner
        .engine()
        .context(agent.as_deref(), request.user.as_deref(), "http")
        .await
    {
        Ok(ctx) => ctx,
        Err(RunError::UnknownAgent(_)) => return Err(ApiError::model_not_found(&request.model)),
        Err(e) => return Err(e.into()),
    };
    let agent_key = ctx.agent_key.clone().unwrap_or_default();
    let kind: ProviderKind = runner.engine().check_model(&agent_key).await?;
    if let Some(setting) = request.sampling.unsupported_by(kind) {
        return Err(ApiError::invalid(
            Some(setting),
            format!(
                "{setting} is not supported by the provider of agent {agent_key:?} ({kind:?} API); leave it out"
            ),
        ));
    }
    check_tools(runner, &ctx, &request.tools).await?;
    let owner = Owner {
        agent: agent_key.clone(),
        user: ctx.user.clone(),
    };
    let mut messages = state.continuations.expand(&owner, request.messages)?;
    let (resume, prompt, images) = match messages.pop() {
        Some(Message::User { text, images }) => (false, text, images),
        Some(results @ Message::ToolResults { .. }) => {
            messages.push(results);
            (true, String::new(), Vec::new())
        }
        Some(Message::Assistant { .. }) => {
            return Err(ApiError::invalid(
                Some("messages"),
                "the last message is the assistant's: end with a user message or tool results",
            ));
        }
        None => {
            return Err(ApiError::invalid(
                Some("messages"),
                "messages is empty: send at least one user message",
            ));
        }
    };
    check_results(&messages)?;
    let session = match request.session {
        Some(_) if !request.tools.is_empty() || resume => {
            return Err(ApiError::invalid(
                Some("session"),
                "client tools work only without a stored session: leave out session (the client then sends the whole conversation)",
            ));
        }
        Some(chat) => {
            // The stored session holds the conversation; the client's copy is not used.
            messages.clear();
            Some(TurnEngine::session_key(
                &agent_key,
                "http",
                ctx.user.as_deref(),
                &chat,
            ))
        }
        None => None,
    };
    let system = request.system.join("\n\n");
    Ok(Prepared {
        turn: Turn {
            agent,
            user: request.user,
            session,
            history: messages,
            prompt,
            api: ApiTurn {
                system: (!system.trim().is_empty()).then_some(system),
                images,
                resume,
                options: TurnOptions {
                    client_tools: request.tools,
                    no_tools: request.no_tools,
                    max_tokens: request.max_tokens,
                    sampling: request.sampling,
                    checkpoint: None,
                },
            },
        },
        owner,
    })
}

/// Each client tool has a usable name of its own that none of the agent's tools has.
async fn check_tools(
    runner: &Runner,
    ctx: &talon_core::CallContext,
    tools: &[ToolDef],
) -> Result<(), ApiError> {
    if tools.is_empty() {
        return Ok(());
    }
    let own = runner.engine().tool_names(ctx).await;
    for (i, tool) in tools.iter().enumerate() {
        let name = &tool.name;
        let valid = !name.is_empty()
            && name.len() <= MAX_TOOL_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
        if !valid {
            return Err(ApiError::invalid(
                Some("tools"),
                format!(
                    "tools[{i}]: the name {} must be 1 to {MAX_TOOL_NAME} letters, digits, _ or -",
                    talon_core::visible::visible(name)
                ),
            ));
        }
        if tools[..i].iter().any(|t| &t.name == name) {
            return Err(ApiError::invalid(
                Some("tools"),
                format!("tools[{i}]: {name} is given twice"),
            ));
        }
        if own.iter().any(|n| n == name) {
            return Err(ApiError::invalid(
                Some("tools"),
                format!(
                    "tools[{i}]: the agent has a tool named {name} already; rename yours (the agent's runs on the server)"
                ),
            ));
        }
    }
    Ok(())
}

/// Every assistant tool call has its result in the message after it (providers refuse the
/// conversation otherwise, with an error the client could not act on).
fn check_results(messages: &[Message]) -> Result<(), ApiError> {
    for (i, message) in messages.iter().enumerate() {
        let Message::Assistant { tool_calls, .. } = message else {
            continue;
        };
        let answered: Vec<&str> = match messages.get(i + 1) {
            Some(Message::ToolResults { results }) => {
                results.iter().map(|r| r.call_id.as_str()).collect()
            }
            _ => Vec::new(),
        };
        if let Some(call) = tool_calls
            .iter()
            .find(|c| !answered.contains(&c.id.as_str()))
        {
            return Err(ApiError::invalid(
                Some("messages"),
                format!(
                    "the tool call {} ({}) has no result: send one tool result per call, right after the assistant message that made it",
                    talon_core::visible::visible(&call.id),
                    talon_core::visible::visible(&call.name)
                ),
            ));
        }
    }
    Ok(())
}

/// A finished turn taken apart for the reply.
pub(super) struct Answer {
    /// Each model response's text, in order (the reply separates them).
    pub texts: Vec<String>,
    /// The client's tool calls, under the ids the client sees.
    pub client_calls: Vec<ToolCallRequest>,
    /// The agent's own tool calls and their results.
    pub activity: Vec<Value>,
}

impl Answer {
    /// The turn's texts as one.
    pub fn text(&self) -> String {
        self.texts.join(TEXT_SEPARATOR)
    }
}

/// Takes `ran` apart; client calls get fresh ids (`id_prefix` and a random part) and the turn
/// waits in `state` for their results.
fn answer(
    state: &ApiState,
    owner: Owner,
    options: &TurnOptions,
    ran: &Ran,
    id_prefix: &str,
) -> Answer {
    let messages = &ran.outcome.messages;
    let mut texts = Vec::new();
    let mut activity = Vec::new();
    let mut last_calls: &[ToolCallRequest] = &[];
    for message in messages {
        match message {
            Message::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    texts.push(text.clone());
                }
                last_calls = tool_calls;
            }
            Message::ToolResults { results } => {
                for result in results {
                    let call = last_calls.iter().find(|c| c.id == result.call_id);
                    activity.push(json!({
                        "id": result.call_id,
                        "name": call.map(|c| c.name.as_str()),
                        "arguments": call.map(|c| c.arguments.as_str()),
                        "result": result.content,
                        "is_error": result.is_error,
                    }));
                }
            }
            Message::User { .. } => {}
        }
    }
    let mut client_calls = Vec::new();
    if ran.outcome.stop == TurnStop::ClientTools {
        let mut ids = Vec::new();
        for call in last_calls
            .iter()
            .filter(|c| options.is_client_tool(&c.name))
        {
            let public = format!("{id_prefix}{}", uuid::Uuid::new_v4().simple());
            ids.push((public.clone(), call.id.clone()));
            client_calls.push(ToolCallRequest {
                id: public,
                ..call.clone()
            });
        }
        let skip = usize::from(matches!(messages.first(), Some(Message::User { .. })));
        state
            .continuations
            .keep(owner, messages[skip..].to_vec(), ids);
    }
    Answer {
        texts,
        client_calls,
        activity,
    }
}

/// How long a turn waits for its client's tool results.
const CONTINUATION_TTL: Duration = Duration::from_secs(3600);
/// How many turns wait at once; the oldest goes first.
const MAX_CONTINUATIONS: usize = 256;
/// How many bytes of messages wait at once, all turns together.
const MAX_CONTINUATION_BYTES: usize = 64 << 20;

/// Turns waiting for their client's tool results (see the module docs).
#[derive(Default)]
pub(super) struct Continuations {
    waiting: Mutex<HashMap<String, Continuation>>,
}

struct Continuation {
    owner: Owner,
    /// The turn's messages after its user message, up to the assistant message with the
    /// client's calls, and the results of the agent's calls of that message, if any.
    messages: Vec<Message>,
    /// The client's ids and the model's, of each client call.
    ids: Vec<(String, String)>,
    bytes: usize,
    at: Instant,
}

impl Continuations {
    fn keep(&self, owner: Owner, messages: Vec<Message>, ids: Vec<(String, String)>) {
        let Some((key, _)) = ids.first() else {
            return;
        };
        let key = key.clone();
        let bytes = messages.iter().map(message_bytes).sum();
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.retain(|_, c| c.at.elapsed() < CONTINUATION_TTL);
        let mut total: usize = waiting.values().map(|c| c.bytes).sum::<usize>() + bytes;
        while !waiting.is_empty()
            && (waiting.len() >= MAX_CONTINUATIONS || total > MAX_CONTINUATION_BYTES)
        {
            let Some(oldest) = waiting
                .iter()
                .min_by_key(|(_, c)| c.at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(gone) = waiting.remove(&oldest) {
                total -= gone.bytes;
            }
        }
        if bytes <= MAX_CONTINUATION_BYTES {
            waiting.insert(
                key,
                Continuation {
                    owner,
                    messages,
                    ids,
                    bytes,
                    at: Instant::now(),
                },
            );
        }
    }

    /// `messages` with each assistant message whose calls wait here replaced by the turn's
    /// full messages, and the client's results merged with the agent's (in call order, under
    /// the model's ids).
    fn expand(&self, owner: &Owner, messages: Vec<Message>) -> Result<Vec<Message>, ApiError> {
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::with_capacity(messages.len());
        let mut messages = messages.into_iter().peekable();
        while let Some(message) = messages.next() {
            let found = match &message {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .first()
                    .and_then(|c| waiting.get(&c.id))
                    .filter(|c| &c.owner == owner && c.at.elapsed() < CONTINUATION_TTL),
                _ => None,
            };
            let Some(continuation) = found else {
                out.push(message);
                continue;
            };
            let client_results =
                match messages.next_if(|m| matches!(m, Message::ToolResults { .. })) {
                    Some(Message::ToolResults { results }) => results,
                    _ => Vec::new(),
                };
            out.extend(continuation.merged(client_results)?);
        }
        Ok(out)
    }
}

impl Continuation {
    /// The stored messages, ending in one result per call of the last assistant message.
    fn merged(&self, client_results: Vec<ToolResult>) -> Result<Vec<Message>, ApiError> {
        let mut messages = self.messages.clone();
        let own = match messages.last() {
            Some(Message::ToolResults { .. }) => match messages.pop() {
                Some(Message::ToolResults { results }) => results,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        let Some(Message::Assistant { tool_calls, .. }) = messages.last() else {
            return Ok(messages);
        };
        let mut results = Vec::with_capacity(tool_calls.len());
        for call in tool_calls {
            if let Some(result) = own.iter().find(|r| r.call_id == call.id) {
                results.push(result.clone());
                continue;
            }
            let public = self
                .ids
                .iter()
                .find(|(_, model)| *model == call.id)
                .map_or(call.id.as_str(), |(public, _)| public.as_str());
            let Some(result) = client_results.iter().find(|r| r.call_id == public) else {
                return Err(ApiError::invalid(
                    Some("messages"),
                    format!(
                        "the tool call {public} ({}) has no result: send one tool result per call, right after the assistant message that made it",
                        call.name
                    ),
                ));
            };
            results.push(ToolResult {
                call_id: call.id.clone(),
                ..result.clone()
            });
        }
        messages.push(Message::ToolResults { results });
        Ok(messages)
    }
}

/// About how many bytes `message` holds.
fn message_bytes(message: &Message) -> usize {
    match message {
        Message::User { text, images } => {
            text.len() + images.iter().map(|i| i.data.len()).sum::<usize>()
        }
        Message::Assistant { text, tool_calls } => {
            text.len()
                + tool_calls
                    .iter()
                    .map(|c| c.arguments.len() + c.name.len())
                    .sum::<usize>()
        }
        Message::ToolResults { results } => results
            .iter()
            .map(|r| r.content.len() + r.images.iter().map(|i| i.data.len()).sum::<usize>())
            .sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(user: &str) -> Owner {
        Owner {
            agent: "default".into(),
            user: Some(user.into()),
        }
    }

    fn call(id: &str, name: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }
    }

    fn result(id: &str, content: &str) -> ToolResult {
        ToolResult {
            call_id: id.into(),
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    /// A turn that stopped at a client call, as `answer` keeps it: the agent's call `m0` ran,
    /// the client's `m1` is shown to the client as `call_pub`.
    fn waiting() -> Continuations {
        let continuations = Continuations::default();
        continuations.keep(
            owner("alice"),
            vec![
                Message::Assistant {
                    text: "checking".into(),
                    tool_calls: vec![call("m0", "datetime"), call("m1", "get_weather")],
                },
                Message::ToolResults {
                    results: vec![result("m0", "noon")],
                },
            ],
            vec![("call_pub".into(), "m1".into())],
        );
        continuations
    }

    fn client_copy() -> Vec<Message> {
        vec![
            Message::user("weather?"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("call_pub", "get_weather")],
            },
            Message::ToolResults {
                results: vec![result("call_pub", "sunny")],
            },
        ]
    }

    #[test]
    fn the_follow_up_gets_the_agents_calls_back_and_the_models_ids() {
        let expanded = waiting()
            .expand(&owner("alice"), client_copy())
            .expect("expands");
        assert_eq!(expanded.len(), 3);
        let Message::ToolResults { results } = &expanded[2] else {
            panic!("results last: {expanded:?}");
        };
        let got: Vec<(&str, &str)> = results
            .iter()
            .map(|r| (r.call_id.as_str(), r.content.as_str()))
            .collect();
        assert_eq!(got, [("m0", "noon"), ("m1", "sunny")]);
        check_results(&expanded).expect("every call answered");
    }

    /// Another user (or agent) naming the same call id gets nothing of Alice's turn.
    #[test]
    fn another_users_follow_up_is_taken_as_sent() {
        let continuations = waiting();
        let bob = continuations
            .expand(&owner("bob"), client_copy())
            .expect("taken as sent");
        assert_eq!(bob, client_copy());
        let other_agent = Owner {
            agent: "other".into(),
            user: Some("alice".into()),
        };
        assert_eq!(
            continuations
                .expand(&other_agent, client_copy())
                .expect("taken as sent"),
            client_copy()
        );
    }

    #[test]
    fn a_missing_client_result_is_named() {
        let mut copy = client_copy();
        copy.pop();
        copy.push(Message::ToolResults {
            results: vec![result("call_other", "x")],
        });
        let e = waiting()
            .expand(&owner("alice"), copy)
            .expect_err("refused");
        assert!(e.message.contains("call_pub"), "{}", e.message);
    }

    #[test]
    fn texts_of_two_responses_are_kept_apart_in_a_stream() {
        use talon_agent::RunEvent;
        let mut joiner = talon_agent::TextJoiner::default();
        let text = |t: &str| RunEvent::Text { text: t.into() };
        let tool = RunEvent::ToolStarted {
            call_id: "1".into(),
            name: "datetime".into(),
            arguments: "{}".into(),
        };
        let out: Vec<Option<String>> = [text("Let me "), text("look."), tool, text("Noon.")]
            .iter()
            .map(|e| joiner.text(e))
            .collect();
        assert_eq!(
            out,
            [
                Some("Let me ".into()),
                Some("look.".into()),
                None,
                Some("\n\nNoon.".into())
            ]
        );
    }
}
