//! Questions to the client in 2026-07-28 requests: `input_required` results (SEP-2322).
//!
//! A 2026-07-28 request has no channel for the server's own requests, so a tool's question
//! (`CallContext::client`, the path elicitation takes in a 2025 session) cannot be sent while
//! the call waits. Instead the question ends the round: the call is stopped, and the result is
//! `input_required` with the question and a `requestState`. The client answers and sends the
//! same call again with `inputResponses` and the state; the call then runs again from the start,
//! and its questions are answered from the state, in order, without asking the client. That is
//! the protocol's model (the server processes the retried request afresh), so a tool that asks
//! in the middle of its work does the first half again on each round.
//!
//! The client's `inputResponses` answer questions by key; the `requestState` carries the answers
//! of earlier rounds. It comes back from the client, so it is sealed (HMAC, with a per-process
//! key) and bound to the tool and its arguments: a changed or replayed state is refused with
//! `-32602` before anything runs. Keys the call does not ask for are ignored; an answer under a
//! key it asks for that is not an elicitation result is refused with `-32602`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    InputRequest, InputRequests, InputRequiredResult, InputResponses, RequestStateCodec,
    SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Where a tool may name its question (the key of `inputRequests`) in the elicitation's
/// `_meta`; without it the n-th question of a call is `q<n>`.
pub const INPUT_KEY_META: &str = "dev.talon/inputKey";

/// How long a client may take to answer before the state expires.
const STATE_TTL: Duration = Duration::from_secs(30 * 60);

/// The sealing key of this process.
pub(crate) struct Sealer(RequestStateCodec);

impl Sealer {
    pub(crate) fn new() -> Self {
        let mut key = Vec::with_capacity(32);
        key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        Self(RequestStateCodec::new_unchecked(key))
    }
}

/// What the sealed `requestState` holds.
#[derive(Serialize, Deserialize, Default)]
struct State {
    /// Answers to the call's questions so far, in the order it asked them.
    answers: Vec<Value>,
}

/// How a round ended early.
enum Stop {
    /// A question the client has not answered yet: key and elicitation parameters.
    Asked(String, Value),
    /// An answer under the question's key that is not an elicitation result.
    Invalid(String),
}

/// One round of a call: the answers it replays, and why it stopped early, if it did.
pub(crate) struct Round {
    answers: Mutex<Vec<Value>>,
    responses: InputResponses,
    asked: AtomicUsize,
    stopped: Mutex<Option<Stop>>,
    /// Cancelled when the round stops early (the call's own token).
    stop: CancellationToken,
    binding: Vec<u8>,
}

impl Round {
    /// The round for a call of `tool` with `arguments`, from the client's `requestState` and
    /// `inputResponses`. A state that fails its seal is an invalid parameter.
    pub(crate) fn open(
        sealer: &Sealer,
        tool: &str,
        arguments: Option<&serde_json::Map<String, Value>>,
        request_state: Option<&str>,
        responses: Option<&InputResponses>,
        stop: CancellationToken,
    ) -> Result<Self, ErrorData> {
        let binding = serde_json::to_vec(&json!({"tool": tool, "arguments": arguments}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let state: State = match request_state {
            None => State::default(),
            Some(sealed) => sealer.0.open_json_with(sealed, &binding).map_err(|e| {
                ErrorData::invalid_params(
                    format!("requestState is not one this server issued for this call: {e}"),
                    None,
                )
            })?,
        };
        Ok(Self {
            answers: Mutex::new(state.answers),
            responses: responses.cloned().unwrap_or_default(),
            asked: AtomicUsize::new(0),
            stopped: Mutex::new(None),
            stop,
            binding,
        })
    }

    /// The client handle the call's context carries.
    pub(crate) fn client(self: &Arc<Self>) -> talon_core::ClientHandle {
        talon_core::ClientHandle(Arc::new(RoundClient(Arc::clone(self))))
    }

    /// When the round stopped early: `input_required` for a question, or the refusal of an
    /// invalid answer.
    pub(crate) fn input_required(
        &self,
        sealer: &Sealer,
    ) -> Option<Result<InputRequiredResult, ErrorData>> {
        let stopped = self
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        Some(match stopped {
            Stop::Asked(key, params) => self.seal(sealer, key, params),
            Stop::Invalid(key) => Err(ErrorData::invalid_params(
                format!("inputResponses.{key} is not an elicitation result"),
                Some(json!({"key": key})),
            )),
        })
    }

    fn seal(
        &self,
        sealer: &Sealer,
        key: String,
        params: Value,
    ) -> Result<InputRequiredResult, ErrorData> {
        let request: InputRequest =
            serde_json::from_value(json!({"method": "elicitation/create", "params": params}))
                .map_err(|e| {
                    ErrorData::internal_error(
                        format!("the tool's question is malformed: {e}"),
                        None,
                    )
                })?;
        let state = State {
            answers: self
                .answers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        };
        let options = SealOptions::new()
            .associated_data(&self.binding)
            .ttl(STATE_TTL);
        let sealed = sealer
            .0
            .seal_json_with(&state, &options)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let requests: InputRequests = [(key, request)].into_iter().collect();
        Ok(InputRequiredResult::new(Some(requests), Some(sealed)))
    }

    /// Stops the round early, for the first reason given.
    fn stop_for(&self, why: Stop) -> talon_core::context::ClientFuture {
        let mut stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        if stopped.is_none() {
            *stopped = Some(why);
        }
        self.stop.cancel();
        // The call is stopped; the question is answered in the next round.
        Box::pin(std::future::pending())
    }
}

/// The client as a round sees it: questions already answered are answered from the state; the
/// first new one is kept and stops the call.
struct RoundClient(Arc<Round>);

impl talon_core::ClientRequests for RoundClient {
    fn elicit(&self, params: Value) -> talon_core::context::ClientFuture {
        let round = &self.0;
        let n = round.asked.fetch_add(1, Ordering::SeqCst);
        let mut answers = round.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(answer) = answers.get(n) {
            let answer = answer.clone();
            return Box::pin(async move { Ok(answer) });
        }
        let key = params
            .pointer(&format!("/_meta/{}", INPUT_KEY_META.replace('/', "~1")))
            .and_then(Value::as_str)
            .map_or_else(|| format!("q{n}"), String::from);
        let why = match round.responses.get(&key) {
            Some(answer) if answer.get("action").and_then(Value::as_str).is_some() => {
                answers.push(answer.clone());
                let answer = answer.clone();
                return Box::pin(async move { Ok(answer) });
            }
            Some(_) => Stop::Invalid(key),
            None => Stop::Asked(key, params),
        };
        drop(answers);
        round.stop_for(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(key: Option<&str>) -> Value {
        let mut params = json!({
            "message": "What is your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        });
        if let Some(key) = key {
            params["_meta"] = json!({INPUT_KEY_META: key});
        }
        params
    }

    fn round(sealer: &Sealer, state: Option<&str>, responses: Option<Value>) -> Arc<Round> {
        let responses: Option<InputResponses> =
            responses.map(|r| serde_json::from_value(r).expect("responses"));
        Arc::new(
            Round::open(
                sealer,
                "greet",
                None,
                state,
                responses.as_ref(),
                CancellationToken::new(),
            )
            .expect("opens"),
        )
    }

    #[tokio::test]
    async fn a_question_ends_the_round_and_its_answer_is_replayed_in_the_next() {
        let sealer = Sealer::new();
        let first = round(&sealer, None, None);
        let asked = first.client().0.elicit(question(Some("user_name")));
        drop(asked);
        assert!(first.stop.is_cancelled());
        let result = first
            .input_required(&sealer)
            .expect("asked")
            .expect("seals");
        let value = serde_json::to_value(&result).expect("serializes");
        assert_eq!(value["resultType"], "input_required");
        assert_eq!(
            value["inputRequests"]["user_name"]["method"],
            "elicitation/create"
        );
        let state = result.request_state.expect("state");

        let answer = json!({"action": "accept", "content": {"name": "Alice"}});
        let second = round(&sealer, Some(&state), Some(json!({"user_name": answer})));
        let replayed = second
            .client()
            .0
            .elicit(question(Some("user_name")))
            .await
            .expect("answered");
        assert_eq!(replayed, answer);
        assert!(!second.stop.is_cancelled());
        assert!(second.input_required(&sealer).is_none());
    }

    #[test]
    fn a_changed_or_foreign_state_is_refused() {
        let sealer = Sealer::new();
        let first = round(&sealer, None, None);
        drop(first.client().0.elicit(question(None)));
        let state = first
            .input_required(&sealer)
            .expect("asked")
            .expect("seals")
            .request_state
            .expect("state");
        let mut tampered = state.clone();
        tampered.insert(tampered.len() / 2, 'x');
        for bad in [tampered.as_str(), "forged"] {
            let refused = Round::open(
                &sealer,
                "greet",
                None,
                Some(bad),
                None,
                CancellationToken::new(),
            );
            assert!(refused.is_err(), "{bad}");
        }
        // Sealed for another tool's call.
        let other = Round::open(
            &sealer,
            "other",
            None,
            Some(&state),
            None,
            CancellationToken::new(),
        );
        assert!(other.is_err());
        // Another process's key.
        let stranger = Round::open(
            &Sealer::new(),
            "greet",
            None,
            Some(&state),
            None,
            CancellationToken::new(),
        );
        assert!(stranger.is_err());
    }

    #[test]
    fn an_answer_must_be_an_elicitation_result_and_other_keys_are_ignored() {
        let sealer = Sealer::new();
        let invalid = round(&sealer, None, Some(json!({"user_name": 42})));
        drop(invalid.client().0.elicit(question(Some("user_name"))));
        assert!(matches!(invalid.input_required(&sealer), Some(Err(_))));

        let extra = round(
            &sealer,
            None,
            Some(json!({
                "user_name": {"action": "accept", "content": {"name": "Alice"}},
                "unknown": 7,
            })),
        );
        drop(extra.client().0.elicit(question(Some("user_name"))));
        assert!(!extra.stop.is_cancelled());
        assert!(extra.input_required(&sealer).is_none());
    }
}
