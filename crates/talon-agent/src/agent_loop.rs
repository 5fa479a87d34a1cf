//! The tool-calling loop: ask the model, run the tool calls it makes through the pipeline, feed
//! the results back, until it answers, the iteration cap or the token budget is reached, a loop
//! is detected, or the caller cancels.
//!
//! Every call goes through [`Pipeline::call`] with the run's [`CallContext`]: policy, grants,
//! hooks, approvals, rate limits, scrubbing and audit apply exactly as for every other entry
//! point. Every call the model makes gets exactly one result, in the model's order; a cancelled
//! turn answers the calls it did not finish with an "aborted" result, so the history stays valid
//! for the next turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use talon_core::hooks::{HookEvent, HookPermission};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, SessionEffect, ToolCall};

use crate::gate;
use crate::loop_detect::{CallKind, LoopDetector, Verdict};
use crate::message::{Image, Message, ToolCallRequest, ToolResult};
use crate::provider::{ChatRequest, Provider, Sampling, StopReason, StreamEvent, ToolDef, Usage};

/// Limits and model choice for a run.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    pub model: String,
    pub system: Option<String>,
    /// Model requests per turn (GoClaw's default: 20).
    pub max_iterations: u32,
    /// Output tokens per model response.
    pub max_tokens: u32,
    /// Input plus output tokens a turn may use; `None` for no budget.
    pub token_budget: Option<u64>,
    /// Parallel-safe calls of one batch run at most this many at once.
    pub max_parallel: usize,
    /// The model's context window in tokens; stored sessions are compacted as they near it.
    /// `None`: never compacted.
    pub context_window: Option<u64>,
    /// The share of the window at which a session is compacted (default 0.75).
    pub compact_at: f64,
    /// A small, fast model on the same provider for side questions (WebFetch's prompt over a
    /// page); `None`: such questions go back to the main model.
    pub small_model: Option<String>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            system: None,
            max_iterations: 20,
            max_tokens: 8192,
            token_budget: None,
            max_parallel: 4,
            context_window: None,
            compact_at: 0.75,
            small_model: None,
        }
    }
}

/// What a run reports as it goes (streamed output, tool calls starting and ending).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    /// A piece of the model's text.
    Text { text: String },
    /// A tool call is about to run.
    ToolStarted {
        call_id: String,
        name: String,
        arguments: String,
    },
    /// A tool call finished.
    ToolFinished {
        call_id: String,
        name: String,
        is_error: bool,
        elapsed_ms: u64,
        /// The result's first line, cut to [`SUMMARY_CHARS`] (for an error, why it failed):
        /// enough for a person watching; the model gets the whole result.
        summary: String,
    },
    /// The loop detector warned the model.
    LoopWarning { message: String },
    /// Tokens used by one model response.
    Usage { usage: Usage },
    /// The session's oldest messages were summarised to fit the context window.
    Compacted { messages: usize },
    /// The user approved the plan: the run left plan mode.
    PlanApproved { mode: PermissionMode },
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", content = "detail", rename_all = "snake_case")]
pub enum TurnStop {
    /// The model answered.
    Final,
    /// The model's answer was cut at its output limit.
    MaxTokens,
    /// The model declined.
    Refusal,
    IterationCap,
    TokenBudget,
    /// The loop detector ended the run.
    LoopDetected(String),
    /// A UserPromptSubmit hook refused the prompt (it never reached the model).
    PromptBlocked(String),
    Cancelled,
    /// The provider could not answer.
    Failed(String),
    /// The model called tools the API client brought ([`TurnOptions::client_tools`]): the
    /// turn's last messages are the assistant's calls and the results of the agent's own calls
    /// among them; the client's results continue it.
    ClientTools,
}

/// What one turn takes besides the conversation.
pub struct TurnInput<'a> {
    pub system: Option<&'a str>,
    pub history: &'a [Message],
    /// The new message; `None` continues `history` as it is (it ends in the results of tools
    /// the client ran).
    pub user: Option<Message>,
    pub options: &'a TurnOptions,
}

/// An API client's settings for one turn.
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    /// Tools the client runs itself, offered beside the agent's own; a call to one ends the turn
    /// with [`TurnStop::ClientTools`].
    pub client_tools: Vec<ToolDef>,
    /// Offer no tools at all (OpenAI's `tool_choice: "none"`).
    pub no_tools: bool,
    /// Output tokens per model response, instead of the agent's [`LoopConfig::max_tokens`].
    pub max_tokens: Option<u32>,
    pub sampling: Sampling,
    /// Where the turn's messages so far are kept, and awaited, after the model asked for tool
    /// calls (before they run) and after their results: a child run's turn, which another
    /// gateway may have to resume without making its calls again.
    pub checkpoint: Option<CheckpointSink>,
}

/// Keeps a turn's messages so far (see [`TurnOptions::checkpoint`]); the loop waits for it
/// before it runs the calls it just recorded.
#[derive(Clone)]
pub struct CheckpointSink(pub std::sync::Arc<dyn Fn(Vec<Message>) -> Checkpointed + Send + Sync>);

/// A checkpoint being kept (see [`CheckpointSink`]).
pub type Checkpointed = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl std::fmt::Debug for CheckpointSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CheckpointSink")
    }
}

impl TurnOptions {
    /// Whether `name` is one of the client's tools.
    pub fn is_client_tool(&self, name: &str) -> bool {
        self.client_tools.iter().any(|t| t.name == name)
    }
}

/// The result of one turn.
#[derive(Debug, Clone, Serialize)]
pub struct TurnOutcome {
    pub stop: TurnStop,
    /// The last answer's text.
    pub text: String,
    /// The turn's messages (the user's first), to append to the session.
    pub messages: Vec<Message>,
    pub usage: Usage,
    /// Model requests made.
    pub iterations: u32,
    /// The permission mode the turn ended in (it leaves plan mode when a plan is approved).
    pub permission_mode: PermissionMode,
    /// The mode an approved plan would return to ([`CallContext::mode_after_plan`] at the end),
    /// for the entry point to keep while the session stays in plan mode.
    pub mode_after_plan: PermissionMode,
}

/// A model with the pipeline it calls tools through. It holds no per-turn state, so one agent
/// (cached per agent key) serves every session and user at once.
pub struct Agent {
    pipeline: Arc<Pipeline>,
    provider: Arc<dyn Provider>,
    config: LoopConfig,
}

/// Where a run's events go.
pub type RunSink<'a> = &'a (dyn Fn(RunEvent) + Send + Sync);

impl Agent {
    pub fn new(pipeline: Arc<Pipeline>, provider: Arc<dyn Provider>, config: LoopConfig) -> Self {
        Self {
            pipeline,
            provider,
            config,
        }
    }

    pub fn config(&self) -> &LoopConfig {
        &self.config
    }

    /// The provider the model is served by.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The configured name of the provider this agent's model is served by.
    pub fn provider_name(&self) -> &str {
        self.provider.name()
    }

    /// Fires the SessionStart hooks for a session's first turn — SubagentStart for a child
    /// run's — and returns the context they add, to put before the first prompt.
    pub async fn session_start(&self, ctx: &CallContext) -> Option<String> {
        let hooks = self.pipeline.hooks();
        match ctx.run.run_id.as_deref() {
            Some(run) => {
                hooks
                    .fire_run(HookEvent::SubagentStart, ctx, "", |i| {
                        i.agent_id = Some(run.to_string());
                        i.agent_type = ctx.agent_key.clone();
                    })
                    .await
                    .additional_context
            }
            None => {
                hooks
                    .fire_run(HookEvent::SessionStart, ctx, "startup", |i| {
                        i.source = Some("startup".into());
                    })
                    .await
                    .additional_context
            }
        }
    }

    /// The tools offered to `ctx` (policy, then grants), in neutral form.
    pub async fn tools(&self, ctx: &CallContext) -> Vec<ToolDef> {
        self.pipeline
            .offered_to(ctx)
            .await
            .iter()
            .map(|t| ToolDef {
                name: t.spec().name.clone(),
                description: t.spec().description.clone(),
                schema: t.schema().clone(),
            })
            .collect()
    }

    /// Runs one turn: `user` after `history`, with the configured system prompt. Cancel it
    /// with `ctx.cancel`.
    pub async fn run_turn(
        &self,
        ctx: Arc<CallContext>,
        history: &[Message],
        user: Message,
        events: RunSink<'_>,
    ) -> TurnOutcome {
        let input = TurnInput {
            system: self.config.system.as_deref(),
            history,
            user: Some(user),
            options: &TurnOptions::default(),
        };
        self.run_turn_with(input, ctx, events).await
    }

    /// Runs one turn as `input` says (an agent's prompt is built per turn from its context
    /// files, which can change between turns and differ per user; an API client brings tools
    /// and sampling settings of its own).
    pub async fn run_turn_with(
        &self,
        input: TurnInput<'_>,
        mut ctx: Arc<CallContext>,
        events: RunSink<'_>,
    ) -> TurnOutcome {
        let TurnInput {
            system,
            history,
            user,
            options,
        } = input;
        let hooks = self.pipeline.hooks();
        let user = match user {
            Some(Message::User { text, images }) => {
                let verdict = hooks
                    .fire_run(HookEvent::UserPromptSubmit, &ctx, "", |i| {
                        i.prompt = Some(text.clone());
                    })
                    .await;
                if verdict.permission == Some(HookPermission::Deny) {
                    return TurnOutcome {
                        stop: TurnStop::PromptBlocked(
                            verdict
                                .reason
                                .unwrap_or_else(|| "refused by a UserPromptSubmit hook".into()),
                        ),
                        text: String::new(),
                        messages: Vec::new(),
                        usage: Usage::default(),
                        iterations: 0,
                        permission_mode: ctx.permission_mode,
                        mode_after_plan: ctx.mode_after_plan,
                    };
                }
                Some(Message::User {
                    text: match verdict.additional_context {
                        Some(context) => format!("{text}\n\n{context}"),
                        None => text,
                    },
                    images,
                })
            }
            other => other,
        };
        let mut conversation: Vec<Message> = history.to_vec();
        let start = conversation.len();
        conversation.extend(user);
        let mut stop_hook_active = false;
        let mut usage = Usage::default();
        let mut detector = LoopDetector::default();
        let mut iterations = 0;
        let stop = loop {
            if iterations >= self.config.max_iterations {
                break TurnStop::IterationCap;
            }
            iterations += 1;
            // The tool set can change between iterations (MCP servers, activation).
            let mut tools = if options.no_tools {
                Vec::new()
            } else {
                self.tools(&ctx).await
            };
            tools.extend(options.client_tools.iter().cloned());
            let answer = match self
                .ask(&ctx, system, &conversation, &tools, options, events)
                .await
            {
                Asked::Answer(answer) => answer,
                Asked::Cancelled(text) => {
                    if !text.is_empty() {
                        conversation.push(Message::Assistant {
                            text,
                            tool_calls: Vec::new(),
                        });
                    }
                    break TurnStop::Cancelled;
                }
                Asked::Failed(message) => break TurnStop::Failed(message),
            };
            usage.input_tokens += answer.usage.input_tokens;
            usage.output_tokens += answer.usage.output_tokens;
            let calls = answer.tool_calls.clone();
            conversation.push(Message::Assistant {
                text: answer.text,
                tool_calls: answer.tool_calls,
            });
            if calls.is_empty() && answer.stop == StopReason::EndTurn {
                // A Stop hook may send the model back to work, with its reason as the instruction.
                // A child run's end is SubagentStop's (Claude Code fires it instead of Stop).
                let child = ctx.run.run_id.is_some();
                let event = if child {
                    HookEvent::SubagentStop
                } else {
                    HookEvent::Stop
                };
                let verdict = hooks
                    .fire_run(event, &ctx, "", |i| {
                        i.stop_hook_active = Some(stop_hook_active);
                        if child {
                            i.agent_id = ctx.run.run_id.as_deref().map(str::to_string);
                            i.agent_type = ctx.agent_key.clone();
                        }
                    })
                    .await;
                if verdict.permission == Some(HookPermission::Deny) {
                    stop_hook_active = true;
                    conversation.push(Message::user(
                        verdict
                            .reason
                            .unwrap_or_else(|| "A Stop hook asked you to continue.".into()),
                    ));
                    continue;
                }
            }
            if calls.is_empty() {
                break match answer.stop {
                    StopReason::MaxTokens => TurnStop::MaxTokens,
                    StopReason::Refusal => TurnStop::Refusal,
                    // A paused turn continues with the conversation as it is.
                    StopReason::PauseTurn => continue,
                    _ => TurnStop::Final,
                };
            }
            // The client's own tools are the client's to run: the turn stops with their calls
            // once the agent's calls of the same answer have run.
            let (client_calls, calls): (Vec<_>, Vec<_>) = calls
                .into_iter()
                .partition(|call| options.is_client_tool(&call.name));
            if let Some(sink) = &options.checkpoint {
                (sink.0)(conversation[start..].to_vec()).await;
            }
            let (results, verdict, effects) =
                self.run_calls(&ctx, &calls, &mut detector, events).await;
            // What the calls declared they change about the turn (a plan approved, a stricter
            // mode), applied in the model's order; never looser than the person allowed.
            for effect in effects {
                let mut next = (*ctx).clone();
                match effect {
                    SessionEffect::LeavePlanMode if ctx.permission_mode == PermissionMode::Plan => {
                        // Back to the mode before plan mode, which the entry point bounded by
                        // the configured one: approving a plan never loosens what the operator
                        // set.
                        next.permission_mode = ctx.mode_after_plan;
                        ctx = Arc::new(next);
                        events(RunEvent::PlanApproved {
                            mode: ctx.permission_mode,
                        });
                    }
                    SessionEffect::PermissionMode(mode)
                        if mode.is_no_looser_than(ctx.permission_mode) =>
                    {
                        if mode == PermissionMode::Plan
                            && ctx.permission_mode != PermissionMode::Plan
                        {
                            next.mode_after_plan =
                                ctx.permission_mode.stricter(ctx.mode_after_plan);
                        }
                        next.permission_mode = mode;
                        ctx = Arc::new(next);
                    }
                    _ => {}
                }
            }
            if !results.is_empty() {
                conversation.push(Message::ToolResults { results });
                if let Some(sink) = &options.checkpoint {
                    (sink.0)(conversation[start..].to_vec()).await;
                }
            }
            if !client_calls.is_empty() {
                break TurnStop::ClientTools;
            }
            if ctx.cancel.is_cancelled() {
                break TurnStop::Cancelled;
            }
            if let Some(reason) = verdict {
                break TurnStop::LoopDetected(reason);
            }
            if let Some(budget) = self.config.token_budget
                && usage.input_tokens + usage.output_tokens >= budget
            {
                break TurnStop::TokenBudget;
            }
        };
        let messages = conversation.split_off(start);
        let text = messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant { text, .. } if !text.is_empty() => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        TurnOutcome {
            stop,
            text,
            messages,
            usage,
            iterations,
            permission_mode: ctx.permission_mode,
            mode_after_plan: ctx.mode_after_plan,
        }
    }

    /// One model request, streamed to `events`, abandoned on cancellation.
    async fn ask(
        &self,
        ctx: &CallContext,
        system: Option<&str>,
        conversation: &[Message],
        tools: &[ToolDef],
        options: &TurnOptions,
        events: RunSink<'_>,
    ) -> Asked {
        let request = ChatRequest {
            model: &self.config.model,
            system,
            messages: conversation,
            tools,
            max_tokens: options.max_tokens.unwrap_or(self.config.max_tokens),
            sampling: &options.sampling,
        };
        let mut answer = Answer::default();
        let result = {
            let mut sink = |event: StreamEvent| match event {
                StreamEvent::TextDelta(text) => {
                    answer.text.push_str(&text);
                    events(RunEvent::Text { text });
                }
                StreamEvent::ToolCallStarted { .. } => {}
                StreamEvent::ToolCall(call) => answer.tool_calls.push(call),
                StreamEvent::Usage(usage) => {
                    answer.usage = usage;
                    events(RunEvent::Usage { usage });
                }
                StreamEvent::Finished(stop) => answer.stop = stop,
            };
            tokio::select! {
                result = self.provider.stream(&request, &mut sink) => Some(result),
                () = ctx.cancel.cancelled() => None,
            }
        };
        let Some(result) = result else {
            return Asked::Cancelled(answer.text);
        };
        match result {
            Ok(()) => Asked::Answer(answer),
            Err(e) => Asked::Failed(e.to_string()),
        }
    }

    /// Runs one batch of calls through the turn's gate (nothing shared with other turns: sessions
    /// never wait on one another, a nested turn never on its caller); the results in the
    /// model's order, and the reason to stop if the loop detector says so.
    async fn run_calls(
        &self,
        ctx: &Arc<CallContext>,
        calls: &[ToolCallRequest],
        detector: &mut LoopDetector,
        events: RunSink<'_>,
    ) -> (Vec<ToolResult>, Option<String>, Vec<SessionEffect>) {
        let registry = self.pipeline.registry();
        let batch: Vec<(bool, _)> = calls
            .iter()
            .map(|call| {
                let parallel = registry
                    .resolve(&call.name)
                    .is_some_and(|t| t.spec().parallel_safe);
                (parallel, self.run_call(ctx, call, events))
            })
            .collect();
        let finished = gate::run_batch(batch, self.config.max_parallel).await;
        let mut results = Vec::with_capacity(finished.len());
        let mut effects = Vec::new();
        let mut stop = None;
        for (call, (mut result, kind, effect)) in calls.iter().zip(finished) {
            effects.extend(effect);
            if stop.is_none() {
                match detector.record(&call.name, kind, &call.arguments, &result.content) {
                    Verdict::Fine => {}
                    Verdict::Warn(message) => {
                        events(RunEvent::LoopWarning {
                            message: message.clone(),
                        });
                        result.content.push_str("\n\n[Talon] ");
                        result.content.push_str(&message);
                    }
                    Verdict::Stop(message) => stop = Some(message),
                }
            }
            results.push(result);
        }
        (results, stop, effects)
    }

    /// One call through the pipeline, or an "aborted" result if the turn was cancelled first.
    async fn run_call(
        &self,
        ctx: &Arc<CallContext>,
        call: &ToolCallRequest,
        events: RunSink<'_>,
    ) -> (ToolResult, CallKind, Option<SessionEffect>) {
        let kind = self
            .pipeline
            .registry()
            .resolve(&call.name)
            .map_or(CallKind::Neutral, |t| CallKind::of(t.spec().side_effect));
        if ctx.cancel.is_cancelled() {
            return (aborted(call, Duration::ZERO), kind, None);
        }
        events(RunEvent::ToolStarted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let started = Instant::now();
        let tool_call = ToolCall {
            name: call.name.clone(),
            arguments: Value::String(call.arguments.clone()),
            tool_use_id: Some(call.id.clone()),
        };
        let outcome = self.pipeline.call(Arc::clone(ctx), tool_call).await;
        let elapsed = started.elapsed();
        events(RunEvent::ToolFinished {
            call_id: call.id.clone(),
            name: call.name.clone(),
            is_error: outcome.output.is_error,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            summary: summary_of(&outcome.output.for_llm),
        });
        if ctx.cancel.is_cancelled() && outcome.failed_stage.is_some() {
            return (aborted(call, elapsed), kind, None);
        }
        // Only a call that succeeded changes its turn.
        let effect = outcome
            .output
            .session_effect
            .filter(|_| !outcome.output.is_error);
        let images = outcome
            .output
            .media
            .iter()
            .filter(|m| m.mime_type.starts_with("image/"))
            .map(|m| Image {
                mime_type: m.mime_type.clone(),
                data: base64::engine::general_purpose::STANDARD.encode(&m.data),
            })
            .collect();
        (
            ToolResult {
                call_id: call.id.clone(),
                content: outcome.output.for_llm,
                is_error: outcome.output.is_error,
                images,
            },
            kind,
            effect,
        )
    }
}

/// How many characters of a result [`RunEvent::ToolFinished`] shows.
pub const SUMMARY_CHARS: usize = 200;

/// A result's first non-empty line, cut to [`SUMMARY_CHARS`] (`…` when cut or when more lines
/// follow).
fn summary_of(result: &str) -> String {
    let mut lines = result.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    let mut summary: String = first.chars().take(SUMMARY_CHARS).collect();
    if summary.len() < first.len() || lines.next().is_some() {
        summary.push('…');
    }
    summary
}

/// Separates the texts of two model responses of one turn, wherever a turn's texts are joined
/// (an API's answer, a terminal).
pub const TEXT_SEPARATOR: &str = "\n\n";

/// Puts [`TEXT_SEPARATOR`] between the streamed texts of two model responses: a tool call
/// between them means a new response.
#[derive(Debug, Default)]
pub struct TextJoiner {
    wrote: bool,
    apart: bool,
}

impl TextJoiner {
    /// The text to show for `event`, if any.
    pub fn text(&mut self, event: &RunEvent) -> Option<String> {
        match event {
            RunEvent::Text { text } if !text.is_empty() => {
                let out = if self.wrote && self.apart {
                    format!("{TEXT_SEPARATOR}{text}")
                } else {
                    text.clone()
                };
                self.wrote = true;
                self.apart = false;
                Some(out)
            }
            RunEvent::ToolStarted { .. } | RunEvent::ToolFinished { .. } => {
                self.apart = true;
                None
            }
            _ => None,
        }
    }
}

/// The result of a call the turn's cancellation stopped or never started.
fn aborted(call: &ToolCallRequest, after: Duration) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        content: format!("aborted by the user after {:.1}s", after.as_secs_f64()),
        is_error: true,
        images: Vec::new(),
    }
}

#[derive(Debug)]
struct Answer {
    text: String,
    tool_calls: Vec<ToolCallRequest>,
    usage: Usage,
    stop: StopReason,
}

impl Default for Answer {
    fn default() -> Self {
        Self {
            text: String::new(),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            stop: StopReason::EndTurn,
        }
    }
}

enum Asked {
    Answer(Answer),
    /// Cancelled while the model was answering; the text so far.
    Cancelled(String),
    Failed(String),
}

#[cfg(test)]
mod tests;
