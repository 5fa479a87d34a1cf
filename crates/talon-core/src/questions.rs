//! Questions to the user from a tool (AskUserQuestion, ExitPlanMode's plan approval) when the
//! caller is an HTTP client that cannot be asked directly: the question waits here, is announced
//! on the event bus ([`ToolEvent::QuestionAsked`]), and is answered through
//! [`Questions::answer`] (the gateway's `POST /v1/questions`). Questions are MCP elicitation
//! requests (`message` and `requestedSchema`) and answers are elicitation results (`action`:
//! `accept` with `content`, `decline` or `cancel`), so every way of asking speaks one format.
//! No answer within the timeout ([`DEFAULT_TIMEOUT`]) is an error the tool reports to the model.
//! A question belongs to the user of the turn that asked it: [`Questions::pending`] and
//! [`Questions::answer`] see only that user's (several users share one `talon serve`).

pub mod form;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::context::{ClientFuture, ClientHandle, ClientRequests};
use crate::events::{EventBus, ToolEvent};
use crate::waiting::{Owned, WaitingRoom, unix_ms};

/// How long a question waits for an answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Questions waiting at once; more are refused at once.
pub const MAX_PENDING: usize = 256;

/// One waiting question, as shown to whoever answers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingQuestion {
    pub id: String,
    pub session: String,
    pub agent: Option<String>,
    /// The user of the turn (`None`: it named no user); only they see and answer it.
    pub user: Option<String>,
    /// What the user is asked.
    pub message: String,
    /// The answer's JSON Schema (an object of named fields), as MCP elicitation has it.
    #[serde(rename = "requestedSchema")]
    pub requested_schema: Value,
    /// Unix milliseconds.
    pub requested_at: u64,
    /// Unix milliseconds after which the question is given up.
    pub expires_at: u64,
    /// The run (a subagent, a delegation) whose turn asks.
    #[serde(flatten)]
    pub run: crate::events::RunRef,
}

impl Owned for PendingQuestion {
    fn owner(&self) -> Option<&str> {
        self.user.as_deref()
    }
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// Answered: `content` holds the fields of the requested schema.
    Accept {
        content: serde_json::Map<String, Value>,
    },
    /// Refused to answer.
    Decline,
    /// Dismissed.
    Cancel,
}

impl Answer {
    /// `accept`, `decline`, `cancel`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Accept { .. } => "accept",
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        }
    }

    /// As an MCP elicitation result.
    fn into_result(self) -> Value {
        match self {
            Self::Accept { content } => json!({"action": "accept", "content": content}),
            other => json!({"action": other.as_str()}),
        }
    }
}

/// Why [`Questions::answer`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error(
        "no pending question {0:?} of this user (it was answered, timed out, or never existed); list the user's pending questions for their ids"
    )]
    Unknown(String),
    #[error("the answer to {id:?} does not fit the question: {why}")]
    Invalid { id: String, why: String },
}

/// The questions broker (see the module docs).
#[derive(Debug)]
pub struct Questions {
    pending: WaitingRoom<PendingQuestion, Answer>,
    events: EventBus,
    timeout: Duration,
}

/// What is wrong with accepted `content` for `schema`: a required field missing, or a value
/// outside a field's `enum` (single or multiple choice).
fn misfit(schema: &Value, content: &serde_json::Map<String, Value>) -> Option<String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !content.contains_key(name) {
            return Some(format!("field {name:?} is required"));
        }
    }
    for (name, value) in content {
        let Some(field) = properties.and_then(|p| p.get(name)) else {
            return Some(format!("there is no field {name:?}"));
        };
        let choices = field
            .get("enum")
            .or_else(|| field.pointer("/items/enum"))
            .and_then(Value::as_array);
        let Some(choices) = choices else { continue };
        let picked: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        if let Some(bad) = picked.iter().find(|v| !choices.contains(v)) {
            return Some(format!(
                "{bad} is not a choice of {name:?}; choose from {}",
                Value::Array(choices.clone())
            ));
        }
    }
    None
}

impl Questions {
    /// A broker announcing on `events`, with the default timeout.
    pub fn new(events: EventBus) -> Self {
        Self {
            pending: WaitingRoom::new(MAX_PENDING),
            events,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// How long questions wait.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The questions of `user`'s turns waiting now, oldest first (`None`: of turns naming no
    /// user).
    pub fn pending(&self, user: Option<&str>) -> Vec<PendingQuestion> {
        let mut list = self.pending.requests(user);
        list.sort_by_key(|q| q.requested_at);
        list
    }

    /// Answers `user`'s question `id` (another user's is [`AnswerError::Unknown`]); an accepted
    /// answer must fit the question's schema.
    pub fn answer(
        &self,
        id: &str,
        user: Option<&str>,
        answer: Answer,
    ) -> Result<PendingQuestion, AnswerError> {
        let kind = answer.as_str();
        let checked = match &answer {
            Answer::Accept { content } => Some(content.clone()),
            _ => None,
        };
        let question = self
            .pending
            .answer(id, user, answer, |q| {
                match checked
                    .as_ref()
                    .and_then(|c| misfit(&q.requested_schema, c))
                {
                    Some(why) => Err(AnswerError::Invalid {
                        id: id.to_string(),
                        why,
                    }),
                    None => Ok(()),
                }
            })?
            .ok_or_else(|| AnswerError::Unknown(id.to_string()))?;
        self.events.publish(ToolEvent::QuestionAnswered {
            id: id.into(),
            session_key: question.session.as_str().into(),
            agent_key: question.agent.as_deref().map(Into::into),
            user: question.user.as_deref().map(Into::into),
            action: kind,
            run: question.run.clone(),
        });
        Ok(question)
    }

    /// A client handle asking through this broker for `session` of `agent`, on behalf of
    /// `user` (who alone sees and answers its questions).
    pub fn client(
        self: &Arc<Self>,
        session: &str,
        agent: Option<&str>,
        user: Option<&str>,
    ) -> ClientHandle {
        self.client_in_run(session, agent, user, &crate::events::RunRef::default())
    }

    /// [`Questions::client`] for a turn of the stored run `run`: its questions name the run.
    pub fn client_in_run(
        self: &Arc<Self>,
        session: &str,
        agent: Option<&str>,
        user: Option<&str>,
        run: &crate::events::RunRef,
    ) -> ClientHandle {
        ClientHandle(Arc::new(Asker {
            broker: Arc::clone(self),
            asker: Whose {
                session: session.to_string(),
                agent: agent.map(str::to_string),
                user: user.map(str::to_string),
                run: run.clone(),
            },
        }))
    }

    async fn ask(&self, params: Value, whose: Whose) -> Result<Value, String> {
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .ok_or("an elicitation request needs a message")?
            .to_string();
        let requested_schema = params
            .get("requestedSchema")
            .cloned()
            .ok_or("an elicitation request needs a requestedSchema")?;
        let now = SystemTime::now();
        let id = format!("q-{}", uuid::Uuid::new_v4().simple());
        let question = PendingQuestion {
            id: id.clone(),
            session: whose.session,
            agent: whose.agent,
            user: whose.user,
            message,
            requested_schema,
            requested_at: unix_ms(now),
            expires_at: unix_ms(now + self.timeout),
            run: whose.run,
        };
        let Some(ticket) = self.pending.admit(id.clone(), question.clone()) else {
            return Err(format!(
                "{MAX_PENDING} questions are already waiting for an answer; try again later"
            ));
        };
        self.events.publish(ToolEvent::QuestionAsked {
            request: Arc::new(question),
        });
        match ticket.wait(self.timeout, std::future::pending()).await {
            Some(answer) => Ok(answer.into_result()),
            None => Err(format!(
                "nobody answered within {}s",
                self.timeout.as_secs()
            )),
        }
    }
}

/// Whose questions an [`Asker`] asks: the session, its agent and its user.
#[derive(Debug, Clone)]
struct Whose {
    session: String,
    agent: Option<String>,
    user: Option<String>,
    run: crate::events::RunRef,
}

/// [`ClientRequests`] for one session, through a [`Questions`] broker.
struct Asker {
    broker: Arc<Questions>,
    asker: Whose,
}

impl ClientRequests for Asker {
    fn elicit(&self, params: Value) -> ClientFuture {
        let (broker, whose) = (Arc::clone(&self.broker), self.asker.clone());
        Box::pin(async move { broker.ask(params, whose).await })
    }
}

#[cfg(test)]
mod tests;
