//! The one tool pipeline. Every entry point (agent loop, subagents, MCP server, HTTP invoke, CLI,
//! cron, bridged MCP tools) calls [`Pipeline::call`]; nothing else can run a tool, because a tool
//! only accepts an [`crate::tool::Authorized`] value and only this module creates one.
//!
//! Steps, in order:
//! 1. resolve the name (aliases, deferred activation);
//! 2. authorize against the caller's effective tool set (fail closed);
//! 3. validate arguments (empty-arguments guard, JSON schema); an MCP server named in an
//!    argument ([`crate::ToolSpec::mcp_server_arg`]) is authorized here by the same policy,
//!    and again when a hook rewrites the input;
//! 4. rate limit by session key (never skipped: an empty key is a key too);
//! 5. PreToolUse hooks (block, rewrite input — validated again —, add context);
//! 6. permission by mode and risk, asking the approver when needed; a shell script argument
//!    ([`crate::ToolSpec::shell_script_arg`]) is analysed here, once, and the checker, the
//!    approver and the tool all use that analysis ([`crate::script`]);
//! 7. execute with a deadline and cancellation, panics caught, output capped; hand-offs to the
//!    tool's declared delegates only as authorized here ([`crate::ToolSpec::delegates`]);
//! 8. PostToolUse, or PostToolUseFailure for *every* error result (including refusals above);
//! 9. scrub credentials from `for_llm`, Talon's own words, `for_user`, the deliverable and
//!    warnings; then fence
//!    `for_llm` as untrusted when the tool's spec says its output is written by others
//!    ([`crate::ToolSpec::untrusted_output`]), last, so nothing rewrites Talon's markers
//!    ([`crate::untrusted`]); hook notes follow the fence;
//! 10. audit record, tool events and the tracing span.

mod builder;
mod limits;
mod post;
mod servers;
mod validate;

pub use builder::PipelineBuilder;
use post::{digest, hook_input};

use std::collections::{BTreeSet, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;
use tracing::Instrument;

use crate::context::CallContext;
use crate::events::{AuditRecord, AuditSink, EventBus, ToolEvent};
use crate::hooks::{HookEvent, HookPermission, Hooks};
use crate::output::ToolOutput;
use crate::permission::{
    Approval, Approver, Decision, PermissionChecker, PermissionMode, PermissionRequest,
    mode_decision,
};
use crate::policy::{McpServerRule, PolicyEngine, PolicyRequest};
use crate::rate_limit::RateLimiter;
use crate::registry::{RegisteredTool, Registry};
use crate::script::{ScriptAnalysis, ScriptAnalyzer};
use crate::scrub::Scrubber;
use crate::wire::{WireFormat, definition};

/// Default per-call timeout when neither the tool nor the caller sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default cap on `for_llm` / `for_user` / deliverable, in bytes.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 128 * 1024;

/// A tool call as the model (or client) made it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The name used (may be an alias).
    pub name: String,
    /// The arguments: an object, `null`, or a string holding an object.
    pub arguments: Value,
    /// The provider's id for this call (`tool_use_id`); generated when absent.
    pub tool_use_id: Option<String>,
}

impl ToolCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self {
            name: name.into(),
            arguments,
            tool_use_id: None,
        }
    }
}

/// Where a call stopped, when it did not run to completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedStage {
    UnknownTool,
    Policy,
    Validation,
    RateLimit,
    Hook,
    Permission,
    Timeout,
    Cancelled,
    Panic,
    /// The tool ran and reported an error.
    Tool,
}

impl FailedStage {
    fn as_str(self) -> &'static str {
        match self {
            FailedStage::UnknownTool => "unknown_tool",
            FailedStage::Policy => "policy",
            FailedStage::Validation => "validation",
            FailedStage::RateLimit => "rate_limit",
            FailedStage::Hook => "hook",
            FailedStage::Permission => "permission",
            FailedStage::Timeout => "timeout",
            FailedStage::Cancelled => "cancelled",
            FailedStage::Panic => "panic",
            FailedStage::Tool => "tool",
        }
    }
}

/// The result of [`Pipeline::call`].
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// Canonical tool name, or the requested name if it did not resolve.
    pub tool: String,
    /// The scrubbed, capped output.
    pub output: ToolOutput,
    /// `None` on success; otherwise where the call stopped.
    pub failed_stage: Option<FailedStage>,
    /// Wall time through all ten steps.
    pub elapsed: Duration,
}

/// Called when a name does not resolve, to activate a deferred tool (lazy MCP tools); returns
/// whether it registered something.
pub type DeferredActivator = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The boxed future of [`OfferFilter::retain`].
pub type OfferFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Vec<Arc<RegisteredTool>>> + Send + 'a>>;

/// Narrows what a caller is offered beyond the policy (bridged MCP tools the caller has no
/// grant for), so listings show only what the caller may call. Calls are still checked by
/// the tools themselves.
pub trait OfferFilter: Send + Sync {
    fn retain<'a>(
        &'a self,
        ctx: &'a CallContext,
        tools: Vec<Arc<RegisteredTool>>,
    ) -> OfferFuture<'a>;
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct PolicyKey {
    agent: Option<String>,
    provider: Option<String>,
    depth_class: u8,
    tool_allow: Option<Arc<[String]>>,
}

#[derive(Default)]
struct PolicyCache {
    generation: u64,
    sets: HashMap<PolicyKey, Arc<BTreeSet<String>>>,
}

const POLICY_CACHE_MAX: usize = 4096;

/// The pipeline. Share it (`Arc<Pipeline>`) across every entry point.
pub struct Pipeline {
    registry: Arc<Registry>,
    policy: PolicyEngine,
    policy_cache: Mutex<PolicyCache>,
    rate_limiter: Option<RateLimiter>,
    hooks: Hooks,
    checker: Option<Arc<dyn PermissionChecker>>,
    script_analyzer: Option<Arc<dyn ScriptAnalyzer>>,
    approver: Arc<dyn Approver>,
    auto_allow: BTreeSet<String>,
    scrubber: Arc<Scrubber>,
    scrub_enabled: bool,
    max_output_bytes: usize,
    default_timeout: Duration,
    audit: Option<Arc<dyn AuditSink>>,
    events: EventBus,
    deferred: Option<DeferredActivator>,
    offer_filter: Option<Arc<dyn OfferFilter>>,
    next_call_id: AtomicU64,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

/// State carried from the pre-execution steps to the finishing steps.
struct Progress {
    tool: Option<Arc<RegisteredTool>>,
    args: Value,
    context: Option<String>,
    /// The origin to name in the untrusted-content fence, when the tool's output gets one.
    fence: Option<String>,
}

impl Pipeline {
    /// A builder over `registry`.
    pub fn builder(registry: Arc<Registry>) -> PipelineBuilder {
        PipelineBuilder::new(registry)
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub fn policy(&self) -> &PolicyEngine {
        &self.policy
    }

    pub fn scrubber(&self) -> &Arc<Scrubber> {
        &self.scrubber
    }

    pub fn events(&self) -> &EventBus {
        &self.events
    }

    /// The hooks, for entry points that fire the run events (the agent loop).
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    /// The canonical names of the tools `ctx` may see and call (cached per registry generation).
    pub fn effective_tools(&self, ctx: &CallContext) -> Arc<BTreeSet<String>> {
        let max = self.policy.config().subagents.max_spawn_depth;
        let depth_class = match ctx.spawn_depth {
            0 => 0,
            d if d >= max => 2,
            _ => 1,
        };
        let key = PolicyKey {
            agent: ctx.agent_key.clone(),
            provider: ctx.provider.clone(),
            depth_class,
            tool_allow: ctx.tool_allow.clone(),
        };
        let generation = self.registry.generation();
        if let Ok(cache) = self.policy_cache.lock()
            && cache.generation == generation
            && let Some(set) = cache.sets.get(&key)
        {
            return Arc::clone(set);
        }
        let set = Arc::new(
            self.policy
                .effective(&self.registry, &PolicyRequest::for_call(ctx)),
        );
        if let Ok(mut cache) = self.policy_cache.lock() {
            if cache.generation != generation || cache.sets.len() >= POLICY_CACHE_MAX {
                cache.sets.clear();
                cache.generation = generation;
            }
            cache.sets.insert(key, Arc::clone(&set));
        }
        set
    }

    /// The tools offered to `ctx`, sorted by name: the effective set, one tool per job in the
    /// caller's dialect ([`crate::policy::one_tool_per_job`]).
    pub fn offered(&self, ctx: &CallContext) -> Vec<Arc<RegisteredTool>> {
        let allowed = self.effective_tools(ctx);
        let mut tools: Vec<_> = self
            .registry
            .tools()
            .into_iter()
            .filter(|t| allowed.contains(t.spec().name.as_str()))
            .collect();
        let dialect = self.policy.dialect(&PolicyRequest::for_call(ctx));
        crate::policy::one_tool_per_job(dialect, &mut tools);
        tools
    }

    /// Definitions of the offered tools in a wire format, sorted by name.
    pub fn definitions(&self, ctx: &CallContext, format: WireFormat) -> Vec<Value> {
        self.offered(ctx)
            .iter()
            .map(|t| definition(format, t.spec(), t.schema()))
            .collect()
    }

    /// What entry points list: [`Pipeline::offered`], narrowed by the offer filter (grants).
    pub async fn offered_to(&self, ctx: &CallContext) -> Vec<Arc<RegisteredTool>> {
        let offered = self.offered(ctx);
        match &self.offer_filter {
            Some(filter) => filter.retain(ctx, offered).await,
            None => offered,
        }
    }

    /// Definitions of [`Pipeline::offered_to`] in a wire format, sorted by name.
    pub async fn definitions_for(&self, ctx: &CallContext, format: WireFormat) -> Vec<Value> {
        self.offered_to(ctx)
            .await
            .iter()
            .map(|t| definition(format, t.spec(), t.schema()))
            .collect()
    }

    /// Runs one call through all ten steps.
    pub async fn call(&self, ctx: Arc<CallContext>, call: ToolCall) -> CallOutcome {
        let started = Instant::now();
        let call_id = self.next_call_id.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!(
            "tool.call",
            tool = %call.name,
            session = %ctx.session_key,
            agent = ctx.agent_key.as_deref().unwrap_or(""),
            is_error = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let ToolCall {
            name,
            arguments,
            tool_use_id,
        } = call;
        let tool_use_id = tool_use_id.unwrap_or_else(|| format!("talon_{call_id}"));
        async move {
            let mut progress = Progress {
                tool: None,
                args: arguments,
                context: None,
                fence: None,
            };
            let result = self
                .run(&ctx, &name, &tool_use_id, call_id, &mut progress)
                .await;
            let (mut output, stage) = match result {
                Ok(output) if output.is_error => (output, Some(FailedStage::Tool)),
                Ok(output) => (output, None),
                Err((stage, message)) => (ToolOutput::error(message), Some(stage)),
            };
            let tool_name: Arc<str> = progress
                .tool
                .as_ref()
                .map_or_else(|| Arc::from(name.as_str()), |t| Arc::clone(t.name()));

            // Step 8: post hooks; their notes follow the fence, outside it.
            let mut notes = self
                .post_hooks(
                    &ctx,
                    &tool_name,
                    &name,
                    &tool_use_id,
                    &progress,
                    stage,
                    started,
                    &mut output,
                )
                .await;

            // Step 9: scrub everything the model or user will see, then fence untrusted
            // output: the scrubber never sees Talon's markers, so it cannot rewrite their id.
            let mut fence = progress
                .fence
                .take()
                .map(|origin| (tool_name.to_string(), origin));
            if self.scrub_enabled {
                let bag = &ctx.scrub_bag;
                let fence_parts = fence.iter_mut().flat_map(|(s, o)| [s, o]);
                let texts = std::iter::once(&mut output.for_llm)
                    .chain(output.own_words.as_mut())
                    .chain(output.for_user.as_mut())
                    .chain(output.deliverable.as_mut())
                    .chain(output.warnings.iter_mut())
                    .chain(notes.as_mut())
                    .chain(fence_parts);
                for text in texts {
                    self.scrubber.scrub_string(text, bag);
                }
            }
            // Only others' text is fenced; Talon's own words go before the fence.
            if let Some((source, origin)) = &fence
                && !(output.own_words.is_some() && output.for_llm.is_empty())
            {
                output.for_llm = crate::untrusted::wrap(source, origin, &output.for_llm);
            }
            if let Some(own) = output.own_words.take() {
                output.for_llm = if output.for_llm.is_empty() {
                    own
                } else {
                    format!("{own}\n{}", output.for_llm)
                };
            }
            if let Some(notes) = notes {
                output.for_llm.push_str("\n\n");
                output.for_llm.push_str(&notes);
            }

            // Step 10: audit, events, span.
            let elapsed = started.elapsed();
            let span = tracing::Span::current();
            span.record("is_error", output.is_error);
            span.record("duration_ms", elapsed.as_secs_f64() * 1000.0);
            tracing::debug!(stage = stage.map(FailedStage::as_str), "tool call finished");
            let publish = self.events.has_subscribers();
            // Shared copies of the keys are made only when someone receives them.
            if self.audit.is_some() || publish {
                let session_key: Arc<str> = Arc::from(ctx.session_key.as_str());
                let agent_key: Option<Arc<str>> = ctx.agent_key.as_deref().map(Arc::from);
                if let Some(audit) = &self.audit {
                    audit.record(AuditRecord {
                        tool: Arc::clone(&tool_name),
                        session_key: Arc::clone(&session_key),
                        agent_key: agent_key.clone(),
                        user: ctx.user.clone(),
                        args_digest: digest(&progress.args),
                        is_error: output.is_error,
                        duration: elapsed,
                        stage: stage.map(FailedStage::as_str),
                    });
                }
                if publish {
                    self.events.publish(ToolEvent::Finished {
                        call_id,
                        tool: Arc::clone(&tool_name),
                        session_key,
                        agent_key,
                        user: ctx.user.as_deref().map(Arc::from),
                        is_error: output.is_error,
                        elapsed,
                        run: ctx.run.clone(),
                    });
                }
            }
            CallOutcome {
                tool: tool_name.to_string(),
                output,
                failed_stage: stage,
                elapsed,
            }
        }
        .instrument(span)
        .await
    }

    /// Steps 1–7. `Err` carries the stage that refused and the message for the model.
    async fn run(
        &self,
        ctx: &Arc<CallContext>,
        name: &str,
        tool_use_id: &str,
        call_id: u64,
        progress: &mut Progress,
    ) -> Result<ToolOutput, (FailedStage, String)> {
        // Step 1: resolve.
        let mut resolved = self.registry.resolve(name);
        if resolved.is_none()
            && let Some(activate) = &self.deferred
            && activate(name)
        {
            resolved = self.registry.resolve(name);
        }
        let allowed = self.effective_tools(ctx);
        let Some(tool) = resolved else {
            // Suggestions come from what the caller is offered (grants included), so a
            // misspelt name never reveals a tool the caller may not see.
            let offered: Vec<String> = self
                .offered_to(ctx)
                .await
                .iter()
                .map(|t| t.spec().name.clone())
                .collect();
            return Err((
                FailedStage::UnknownTool,
                validate::unknown_tool_message(name, offered.iter()),
            ));
        };
        progress.tool = Some(Arc::clone(&tool));
        let spec = tool.spec();

        // Step 2: authorize (fail closed).
        if !allowed.contains(spec.name.as_str()) {
            return Err((
                FailedStage::Policy,
                format!(
                    "tool not allowed by policy: {}. It is not in this agent's tool set (profile, allow and deny lists); \
                     use one of the tools you were offered.",
                    spec.name
                ),
            ));
        }

        // Step 3: validate.
        let args = std::mem::take(&mut progress.args);
        progress.args = validate::normalize_args(&spec.name, args)
            .map(|args| validate::drop_null_optionals(tool.schema(), args))
            .map_err(|m| (FailedStage::Validation, m))?;
        if let Some(message) = validate::empty_args_guard(&spec.name, tool.schema(), &progress.args)
        {
            return Err((FailedStage::Validation, message));
        }
        validate::check_schema(&spec.name, tool.validator(), &progress.args)
            .map_err(|m| (FailedStage::Validation, m))?;
        // The MCP server an argument names is authorized like the server's own tools.
        let mut servers = self.mcp_servers(ctx, spec, &progress.args)?;

        // Step 4: rate limit.
        if let Some(limiter) = &self.rate_limiter {
            limiter
                .check(&ctx.session_key)
                .map_err(|e| (FailedStage::RateLimit, e.to_string()))?;
        }

        // Step 5: PreToolUse hooks.
        let mut hook_permission = None;
        if !self.hooks.is_empty(HookEvent::PreToolUse) {
            let mut input = hook_input(ctx, &spec.name, tool_use_id, &progress.args);
            let outcome = self
                .hooks
                .fire(
                    HookEvent::PreToolUse,
                    ctx.agent_key.as_deref(),
                    &spec.name,
                    name,
                    &mut input,
                )
                .await;
            if outcome.permission == Some(HookPermission::Deny) {
                let reason = outcome.reason.unwrap_or_else(|| "no reason given".into());
                return Err((
                    FailedStage::Hook,
                    format!("PreToolUse hook blocked {}: {reason}", spec.name),
                ));
            }
            if let Some(updated) = outcome.updated_input {
                let updated = validate::normalize_args(&spec.name, updated)
                    .map_err(|m| (FailedStage::Validation, m))?;
                validate::check_schema(&spec.name, tool.validator(), &updated).map_err(|m| {
                    (
                        FailedStage::Validation,
                        format!("a PreToolUse hook rewrote the input: {m}"),
                    )
                })?;
                progress.args = updated;
                servers = self.mcp_servers(ctx, spec, &progress.args)?;
            }
            progress.context = outcome.additional_context;
            hook_permission = outcome.permission;
        }

        // Step 6: permission, on the one analysis of a shell script argument.
        let script = self.analyze_script(spec, &progress.args)?;
        self.authorize_permission(ctx, &tool, &progress.args, script.as_ref(), hook_permission)
            .await?;

        // Step 7: execute.
        if self.events.has_subscribers() {
            self.events.publish(ToolEvent::Started {
                call_id,
                tool: Arc::clone(tool.name()),
                session_key: Arc::from(ctx.session_key.as_str()),
                agent_key: ctx.agent_key.as_deref().map(Arc::from),
                user: ctx.user.as_deref().map(Arc::from),
                run: ctx.run.clone(),
            });
        }
        let delegations = self.delegations(ctx, spec, &allowed, &progress.args);
        let mut output = self
            .execute(
                ctx,
                &tool,
                progress.args.clone(),
                delegations,
                script,
                servers,
            )
            .await?;
        limits::cap(&mut output.for_llm, self.max_output_bytes);
        if let Some(text) = output.for_user.as_mut() {
            limits::cap(text, self.max_output_bytes);
        }
        if let Some(text) = output.deliverable.as_mut() {
            limits::cap(text, self.max_output_bytes);
        }
        // Fenced in step 9, after the cap (so the end marker is never cut off) and after
        // scrubbing (so the scrubber never rewrites a marker).
        if spec.untrusted_output {
            progress.fence = Some(output.origin.take().unwrap_or_else(|| spec.name.clone()));
        }
        Ok(output)
    }

    /// The analysis of the call's shell script, when an analyzer is set and the tool declares
    /// one: the command its template makes of the arguments
    /// ([`crate::ToolSpec::script_template`]; a value that cannot be passed to a shell fails the
    /// call here), or its script argument ([`crate::ToolSpec::shell_script_arg`]) when that holds
    /// a string.
    fn analyze_script(
        &self,
        spec: &crate::ToolSpec,
        args: &Value,
    ) -> Result<Option<ScriptAnalysis>, (FailedStage, String)> {
        let rendered;
        let script = match (&spec.script_template, spec.shell_script_arg.as_deref()) {
            (Some(template), _) => {
                rendered = crate::script_template::render(template, args)
                    .map_err(|m| (FailedStage::Validation, m))?;
                rendered.as_str()
            }
            (None, Some(arg)) => match args.get(arg).and_then(Value::as_str) {
                Some(script) => script,
                None => return Ok(None),
            },
            (None, None) => return Ok(None),
        };
        Ok(self
            .script_analyzer
            .as_deref()
            .map(|analyzer| ScriptAnalysis::new(analyzer, script)))
    }

    async fn authorize_permission(
        &self,
        ctx: &CallContext,
        tool: &RegisteredTool,
        args: &Value,
        script: Option<&ScriptAnalysis>,
        hook_permission: Option<HookPermission>,
    ) -> Result<(), (FailedStage, String)> {
        let spec = tool.spec();
        let request = PermissionRequest {
            spec,
            input: args,
            ctx,
            script,
        };
        let mode = ctx.permission_mode;
        let checked = self.checker.as_ref().and_then(|c| c.check(&request));
        // A checker's deny (a deny rule, a deny group) holds in every mode, bypassPermissions
        // and a hook's allow included: those waive asking, not refusals.
        if let Some(Decision::Deny(message)) = checked {
            return Err((FailedStage::Permission, message));
        }
        let mut decision = match hook_permission {
            Some(HookPermission::Allow) => Decision::Allow,
            _ => match mode {
                PermissionMode::BypassPermissions | PermissionMode::Plan => {
                    mode_decision(mode, spec, false)
                }
                _ => checked.unwrap_or_else(|| {
                    match mode_decision(mode, spec, self.auto_allow.contains(&spec.name)) {
                        // The mode asks for the tool's risk alone, and the caller's client
                        // asked its user before sending the call.
                        Decision::Ask(_) if ctx.ask_via.client_confirmed() => Decision::Allow,
                        decision => decision,
                    }
                }),
            },
        };
        if hook_permission == Some(HookPermission::Ask)
            && decision == Decision::Allow
            && mode != PermissionMode::BypassPermissions
        {
            decision = Decision::Ask("a PreToolUse hook asked for confirmation".into());
        }
        match decision {
            Decision::Allow => Ok(()),
            Decision::Deny(message) => Err((FailedStage::Permission, message)),
            Decision::Ask(_) if mode == PermissionMode::DontAsk => Err((
                FailedStage::Permission,
                format!(
                    "{} was denied: dontAsk mode never asks for permission",
                    spec.name
                ),
            )),
            Decision::Ask(reason) => match self.approver.approve(&request, &reason).await {
                Approval::Allow => Ok(()),
                Approval::Deny(message) => Err((FailedStage::Permission, message)),
            },
        }
    }

    /// The declared delegates of a call's tool ([`crate::ToolSpec::delegates`]) that `ctx` may
    /// use: each must be in the caller's tool set (step 2, for the delegate) and not refused by
    /// the permission checker for the same arguments (step 6's deny, which holds in every mode).
    fn delegations(
        &self,
        ctx: &CallContext,
        spec: &crate::ToolSpec,
        allowed: &BTreeSet<String>,
        args: &Value,
    ) -> Arc<[String]> {
        spec.delegates
            .iter()
            .filter(|name| {
                let Some(delegate) = self.registry.resolve(name) else {
                    return false;
                };
                let delegate = delegate.spec();
                if !allowed.contains(delegate.name.as_str()) {
                    return false;
                }
                // The delegate's own arguments are not a shell script of the tool called.
                let request = PermissionRequest {
                    spec: delegate,
                    input: args,
                    ctx,
                    script: None,
                };
                !matches!(
                    self.checker.as_ref().and_then(|c| c.check(&request)),
                    Some(Decision::Deny(_))
                )
            })
            .cloned()
            .collect()
    }

    /// A context whose log messages are scrubbed like the output before they reach the caller
    /// (step 9 covers what a tool returns; this covers what it says while it runs).
    fn with_scrubbed_log(&self, ctx: Arc<CallContext>) -> Arc<CallContext> {
        let Some(onward) = ctx.log.clone() else {
            return ctx;
        };
        if !self.scrub_enabled {
            return ctx;
        }
        let scrubber = Arc::clone(&self.scrubber);
        let bag = ctx.scrub_bag.clone();
        let mut wrapped = CallContext::clone(&ctx);
        wrapped.log = Some(crate::context::LogSink(Arc::new(move |mut message| {
            scrub_json(&scrubber, &bag, &mut message.data);
            (onward.0)(message);
        })));
        Arc::new(wrapped)
    }

    /// For a tool that reports progress, a context whose reports also become events.
    fn with_progress_events(
        &self,
        ctx: &Arc<CallContext>,
        tool: &RegisteredTool,
    ) -> Arc<CallContext> {
        if !tool.spec().reports_progress {
            return Arc::clone(ctx);
        }
        let events = self.events.clone();
        let onward = ctx.progress.clone();
        let tool_name = Arc::clone(tool.name());
        let session_key: Arc<str> = Arc::from(ctx.session_key.as_str());
        let agent_key: Option<Arc<str>> = ctx.agent_key.as_deref().map(Arc::from);
        let user: Option<Arc<str>> = ctx.user.as_deref().map(Arc::from);
        let run = ctx.run.clone();
        let mut wrapped = CallContext::clone(ctx);
        wrapped.progress = Some(crate::context::ProgressSink(Arc::new(move |update| {
            if let Some(onward) = &onward {
                (onward.0)(update.clone());
            }
            if events.has_subscribers() {
                events.publish(ToolEvent::Progress {
                    tool: Arc::clone(&tool_name),
                    session_key: Arc::clone(&session_key),
                    agent_key: agent_key.clone(),
                    user: user.clone(),
                    update,
                    run: run.clone(),
                });
            }
        })));
        Arc::new(wrapped)
    }

    async fn execute(
        &self,
        ctx: &Arc<CallContext>,
        tool: &RegisteredTool,
        args: Value,
        delegations: Arc<[String]>,
        script: Option<ScriptAnalysis>,
        servers: Option<Arc<McpServerRule>>,
    ) -> Result<ToolOutput, (FailedStage, String)> {
        let name = &tool.spec().name;
        let timeout = tool.spec().timeout.unwrap_or(self.default_timeout);
        let start = Instant::now();
        let mut deadline = start + timeout;
        if let Some(caller) = ctx.deadline {
            deadline = deadline.min(caller);
        }
        let budget = deadline.saturating_duration_since(start);
        let ctx = self.with_progress_events(ctx, tool);
        let ctx = self.with_scrubbed_log(ctx);
        let run =
            AssertUnwindSafe(
                tool.exec
                    .run(Arc::clone(&ctx), args, delegations, script, servers),
            )
            .catch_unwind();
        let result = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => {
                return Err((FailedStage::Cancelled, format!("{name} was cancelled before it finished")));
            }
            r = tokio::time::timeout_at(deadline.into(), run) => r,
        };
        match result {
            Err(_) => Err((
                FailedStage::Timeout,
                format!(
                    "{name} timed out after {:.1}s and was stopped. Try a smaller request, or run long work in the background.",
                    budget.as_secs_f64()
                ),
            )),
            Ok(Err(panic)) => {
                let detail = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                tracing::error!(tool = %name, %detail, "tool panicked");
                Err((
                    FailedStage::Panic,
                    format!(
                        "tool {name:?} panicked: {detail}. This is a bug in the tool, not in your call; try another approach."
                    ),
                ))
            }
            Ok(Ok(Err(message))) => Err((
                FailedStage::Validation,
                format!("invalid arguments for {name}: {message}"),
            )),
            Ok(Ok(Ok(output))) => Ok(output),
        }
    }
}

#[cfg(test)]
mod tests;

/// Scrubs every string in `value`, keys included.
fn scrub_json(scrubber: &Scrubber, bag: &crate::context::ScrubBag, value: &mut Value) {
    match value {
        Value::String(text) => scrubber.scrub_string(text, bag),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| scrub_json(scrubber, bag, item)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (mut key, mut item) in entries {
                scrubber.scrub_string(&mut key, bag);
                scrub_json(scrubber, bag, &mut item);
                map.insert(key, item);
            }
        }
        _ => {}
    }
}
