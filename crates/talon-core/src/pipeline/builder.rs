//! [`PipelineBuilder`]: every pipeline setting, each with a safe default.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT, DeferredActivator, OfferFilter, Pipeline,
    PolicyCache,
};
use crate::events::{AuditSink, EventBus};
use crate::hooks::Hooks;
use crate::permission::{Approver, DEFAULT_AUTO_ALLOW, DenyApprover, PermissionChecker};
use crate::policy::PolicyEngine;
use crate::rate_limit::RateLimiter;
use crate::registry::Registry;
use crate::script::ScriptAnalyzer;
use crate::scrub::{ScrubError, Scrubber};

/// Builds a [`Pipeline`]; every setting has a safe default.
pub struct PipelineBuilder {
    registry: Arc<Registry>,
    policy: PolicyEngine,
    rate_limiter: Option<RateLimiter>,
    hooks: Hooks,
    checker: Option<Arc<dyn PermissionChecker>>,
    script_analyzer: Option<Arc<dyn ScriptAnalyzer>>,
    approver: Arc<dyn Approver>,
    auto_allow: BTreeSet<String>,
    scrubber: Option<Arc<Scrubber>>,
    scrub_enabled: bool,
    max_output_bytes: usize,
    default_timeout: Duration,
    audit: Option<Arc<dyn AuditSink>>,
    events: Option<EventBus>,
    deferred: Option<DeferredActivator>,
    offer_filter: Option<Arc<dyn OfferFilter>>,
}

impl PipelineBuilder {
    /// Defaults: profile `full`, GoClaw's rate limit (150/hour, burst 30), no hooks, the
    /// deny-by-default approver, Claude Code's auto-allowed set, scrubbing on, 128 KiB output cap,
    /// 120 s timeout.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            registry,
            policy: PolicyEngine::default(),
            rate_limiter: RateLimiter::new(
                crate::rate_limit::DEFAULT_PER_HOUR,
                crate::rate_limit::DEFAULT_BURST,
            ),
            hooks: Hooks::default(),
            checker: None,
            script_analyzer: None,
            approver: Arc::new(DenyApprover),
            auto_allow: DEFAULT_AUTO_ALLOW
                .iter()
                .map(|s| (*s).to_string())
                .collect(),
            scrubber: None,
            scrub_enabled: true,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            default_timeout: DEFAULT_TIMEOUT,
            audit: None,
            events: None,
            deferred: None,
            offer_filter: None,
        }
    }

    pub fn policy(mut self, policy: PolicyEngine) -> Self {
        self.policy = policy;
        self
    }

    /// `None` disables rate limiting.
    pub fn rate_limiter(mut self, limiter: Option<RateLimiter>) -> Self {
        self.rate_limiter = limiter;
        self
    }

    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    pub fn permission_checker(mut self, checker: Arc<dyn PermissionChecker>) -> Self {
        self.checker = Some(checker);
        self
    }

    /// Analyses the shell script argument of tools that declare one
    /// ([`crate::ToolSpec::shell_script_arg`]) in the permission step; the checker, the approver
    /// and the tool share that analysis. Without one, each parses the script itself.
    pub fn script_analyzer(mut self, analyzer: Arc<dyn ScriptAnalyzer>) -> Self {
        self.script_analyzer = Some(analyzer);
        self
    }

    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// Tools allowed without asking in `default`, `acceptEdits` and `dontAsk` modes.
    pub fn auto_allow<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.auto_allow = names.into_iter().map(Into::into).collect();
        self
    }

    /// Shares a scrubber (so credential values registered elsewhere apply here).
    pub fn scrubber(mut self, scrubber: Arc<Scrubber>) -> Self {
        self.scrubber = Some(scrubber);
        self
    }

    pub fn scrub_enabled(mut self, enabled: bool) -> Self {
        self.scrub_enabled = enabled;
        self
    }

    pub fn max_output_bytes(mut self, max: usize) -> Self {
        self.max_output_bytes = max.max(1024);
        self
    }

    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    pub fn audit(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    pub fn events(mut self, events: EventBus) -> Self {
        self.events = Some(events);
        self
    }

    pub fn deferred_activator(mut self, activator: DeferredActivator) -> Self {
        self.deferred = Some(activator);
        self
    }

    /// Narrows listings beyond the policy ([`OfferFilter`]).
    pub fn offer_filter(mut self, filter: Arc<dyn OfferFilter>) -> Self {
        self.offer_filter = Some(filter);
        self
    }

    /// Builds the pipeline; fails only if the built-in scrubber rules do not compile.
    pub fn build(self) -> Result<Pipeline, ScrubError> {
        let scrubber = match self.scrubber {
            Some(s) => s,
            None => Arc::new(Scrubber::new()?),
        };
        Ok(Pipeline {
            registry: self.registry,
            policy: self.policy,
            policy_cache: Mutex::new(PolicyCache::default()),
            rate_limiter: self.rate_limiter,
            hooks: self.hooks,
            checker: self.checker,
            script_analyzer: self.script_analyzer,
            approver: self.approver,
            auto_allow: self.auto_allow,
            scrubber,
            scrub_enabled: self.scrub_enabled,
            max_output_bytes: self.max_output_bytes,
            default_timeout: self.default_timeout,
            audit: self.audit,
            events: self.events.unwrap_or_default(),
            deferred: self.deferred,
            offer_filter: self.offer_filter,
            next_call_id: AtomicU64::new(1),
        })
    }
}
