//! The tool contract.
//!
//! A tool is a type implementing [`Tool`]: its model-facing spec ([`ToolSpec`], the JSON schema
//! derived from its `Input` type) lives beside its `execute`. `execute` takes an
//! [`Authorized`] value, which only the [`crate::pipeline`] can construct: holding a tool is not
//! enough to run it, so every entry point goes through the same ten steps.
//!
//! A direct call cannot be written: there is no way to build an `Authorized` outside the
//! pipeline. Its constructor is private to this crate (error E0624):
//!
//! ```compile_fail,E0624
//! use std::sync::Arc;
//! use talon_core::{Authorized, CallContext};
//! let ctx = Arc::new(CallContext::new("session"));
//! let permit: Authorized<()> = Authorized::new((), ctx, Vec::new().into(), None, None);
//! ```
//!
//! and its fields are private, so a struct literal does not compile either (error E0451):
//!
//! ```compile_fail,E0451
//! use std::sync::Arc;
//! use talon_core::{Authorized, CallContext};
//! let ctx = Arc::new(CallContext::new("session"));
//! let permit: Authorized<()> = Authorized { input: (), ctx, delegations: Vec::new().into(), script: None, mcp_servers: None, seal: unreachable!() };
//! ```
//!
//! The only way to run a tool is [`crate::Pipeline::call`]:
//!
//! ```
//! use std::sync::Arc;
//! use talon_core::{Authorized, CallContext, Pipeline, Registry, SideEffect, Tool, ToolCall, ToolOutput, ToolSpec};
//!
//! struct Hello;
//! impl Tool for Hello {
//!     type Input = ();
//!     fn spec(&self) -> ToolSpec {
//!         ToolSpec::new("hello", "Says hello.", SideEffect::None)
//!     }
//!     async fn execute(&self, _call: Authorized<()>) -> ToolOutput {
//!         ToolOutput::text("hello")
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let registry = Arc::new(Registry::new());
//! registry.register(Hello).unwrap();
//! let pipeline = Pipeline::builder(registry).build().unwrap();
//! let ctx = Arc::new(CallContext::new("session"));
//! let outcome = pipeline.call(ctx, ToolCall::new("hello", serde_json::json!({}))).await;
//! assert_eq!(outcome.output.for_llm, "hello");
//! # });
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::context::CallContext;
use crate::output::ToolOutput;
use crate::policy::McpServerRule;
use crate::script::ScriptAnalysis;

/// Goat's side-effect classes: what a tool can do to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffect {
    /// Pure computation or reads of the call's own state (Read, Glob, Grep, TodoWrite).
    None,
    /// Reads outside state but changes nothing (MCP resource reads, task output).
    ReadOnly,
    /// Changes files or stored state (Write, Edit).
    Mutating,
    /// Reaches the network or runs arbitrary commands (Bash, WebFetch).
    Network,
    /// Waits on a person or another process (AskUserQuestion).
    Blocking,
    /// Starts other agents (Agent, spawn).
    Spawns,
}

/// Permission risk, ordered from harmless to critical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    None,
    Low,
    Medium,
    High,
    Critical,
}

impl SideEffect {
    /// Goat's `SideEffectToRisk` mapping.
    pub fn risk(self) -> Risk {
        match self {
            SideEffect::None => Risk::None,
            SideEffect::ReadOnly | SideEffect::Blocking => Risk::Low,
            SideEffect::Mutating => Risk::Medium,
            SideEffect::Network => Risk::High,
            SideEffect::Spawns => Risk::Critical,
        }
    }

    /// True for classes that cannot change anything (the only ones `plan` mode allows).
    pub fn is_read_only(self) -> bool {
        matches!(self, SideEffect::None | SideEffect::ReadOnly)
    }
}

/// A tool's model-facing description and its static properties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name the model calls the tool by.
    pub name: String,
    /// Description the model reads; say what the tool does and when to use it.
    pub description: String,
    /// Risk class.
    pub side_effect: SideEffect,
    /// Permission risk; defaults to the side effect's risk but may be raised (MCP annotations).
    pub risk: Risk,
    /// May run concurrently with other parallel-safe calls in one batch.
    pub parallel_safe: bool,
    /// Groups the tool belongs to, without the `group:` prefix.
    pub groups: Vec<String>,
    /// Per-tool execution timeout; the pipeline default applies when `None`.
    #[serde(skip)]
    pub timeout: Option<Duration>,
    /// The tool reports progress ([`CallContext::report_progress`]); the pipeline then passes
    /// its reports on as events.
    #[serde(skip)]
    pub reports_progress: bool,
    /// Tools this tool may hand a call to from inside its `execute` (`exec` runs a command
    /// through `credentialed_exec` when it runs a binary with stored credentials). The pipeline
    /// authorizes each for the caller as it authorizes a call of that tool (policy, and a
    /// permission checker's refusal), and the tool may hand over only with the [`Delegation`]
    /// the pipeline gave it ([`Authorized::delegation`]): the hand-off is governed by the rules
    /// of the tool it reaches, not only by those of the tool called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegates: Vec<String>,
    /// The tool returns text written by others (web pages, search results, MCP servers): the
    /// pipeline fences its output for the model as untrusted ([`crate::untrusted::wrap`]), in
    /// one place for every such tool, naming the origin the tool reported
    /// ([`ToolOutput::with_origin`]). Tools never fence their own output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrusted_output: bool,
    /// The argument that holds a shell script (`command` for `exec` and `Bash`). The pipeline's
    /// permission step analyses it once, for the permission checker and the approver, and the
    /// tool receives that analysis ([`Authorized::script`]) instead of parsing the script again.
    /// Declared here so no crate has to recognise shell tools by their names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_script_arg: Option<String>,
    /// The tool reaches MCP servers other than by being one of their tools (resource tools,
    /// `mcp_tool_search`): the pipeline gives it the caller's rule for servers
    /// ([`Authorized::mcp_server_allowed`]), which the policy derives from the same deny lists
    /// that refuse a server's own tools (`group:mcp:<server>`), and the tool leaves out the
    /// servers it may not reach.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reaches_mcp_servers: bool,
    /// The argument that names the MCP server the tool reaches (`server` for
    /// `ListMcpResources` and `ReadMcpResource`); implies [`ToolSpec::reaches_mcp_servers`].
    /// The pipeline refuses a call naming a server the caller's policy denies, before it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server_arg: Option<String>,
    /// The tool of the other dialect that does the same thing (`Read` is `read_file`). With one
    /// dialect chosen ([`crate::policy::Dialect`]), the policy offers only one of the two, so a
    /// model never sees two tools for one job. Declared by the Claude Code dialect's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_as: Option<String>,
    /// The shell command the tool runs, with `{{.name}}` placeholders for its arguments (custom
    /// tools). The pipeline renders it with each value shell-quoted
    /// ([`crate::script_template::render`]) and analyses the rendered script as it analyses a
    /// [`ToolSpec::shell_script_arg`]: the permission checker judges, and the tool runs, exactly
    /// the command the arguments make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_template: Option<String>,
    /// The one agent this tool exists for (a custom tool defined for an agent); `None` for every
    /// agent. The policy leaves it out of every other agent's tool set, in one place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_agent: Option<String>,
    /// The tool administers the gateway (`gateway`): it is offered to a model only in a turn
    /// of the operator, never in a run ([`crate::context::CallContext::is_run`]), and refuses
    /// every other caller itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator_only: bool,
    /// The tool starts runs (subagents, delegations, evaluate loops; not a shell, whose side
    /// effect is [`SideEffect::Spawns`] too): a run at the deepest spawn depth is not offered
    /// it, whatever the configured deny lists say.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub starts_runs: bool,
    /// The tool hands the conversation to another agent (`handoff`): the target then answers
    /// the person directly, so no run is offered it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hands_off: bool,
}

impl ToolSpec {
    /// A spec with the risk implied by `side_effect`; parallel-safe iff read-only.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        side_effect: SideEffect,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            side_effect,
            risk: side_effect.risk(),
            parallel_safe: side_effect.is_read_only(),
            groups: Vec::new(),
            timeout: None,
            reports_progress: false,
            delegates: Vec::new(),
            untrusted_output: false,
            shell_script_arg: None,
            reaches_mcp_servers: false,
            mcp_server_arg: None,
            same_as: None,
            script_template: None,
            for_agent: None,
            operator_only: false,
            starts_runs: false,
            hands_off: false,
        }
    }

    /// Declares that the tool starts runs (see [`ToolSpec::starts_runs`]).
    pub fn starting_runs(mut self) -> Self {
        self.starts_runs = true;
        self
    }

    /// Declares that the tool hands the conversation off (see [`ToolSpec::hands_off`]).
    pub fn handing_off(mut self) -> Self {
        self.hands_off = true;
        self
    }

    /// Declares the tool the operator's alone (see [`ToolSpec::operator_only`]).
    pub fn for_operator_only(mut self) -> Self {
        self.operator_only = true;
        self
    }

    /// Declares the command the tool runs (see [`ToolSpec::script_template`]).
    pub fn with_script_template(mut self, template: impl Into<String>) -> Self {
        self.script_template = Some(template.into());
        self
    }

    /// Limits the tool to one agent (see [`ToolSpec::for_agent`]).
    pub fn only_for_agent(mut self, agent: impl Into<String>) -> Self {
        self.for_agent = Some(agent.into());
        self
    }

    /// Declares the other dialect's tool that does the same thing (see [`ToolSpec::same_as`]).
    pub fn same_as(mut self, tool: impl Into<String>) -> Self {
        self.same_as = Some(tool.into());
        self
    }

    /// Marks a tool whose output is written by others (see [`ToolSpec::untrusted_output`]).
    pub fn with_untrusted_output(mut self) -> Self {
        self.untrusted_output = true;
        self
    }

    /// Declares that argument `arg` is a shell script (see [`ToolSpec::shell_script_arg`]).
    pub fn with_shell_script_arg(mut self, arg: impl Into<String>) -> Self {
        self.shell_script_arg = Some(arg.into());
        self
    }

    /// Declares that the tool reaches MCP servers (see [`ToolSpec::reaches_mcp_servers`]).
    pub fn reaching_mcp_servers(mut self) -> Self {
        self.reaches_mcp_servers = true;
        self
    }

    /// Declares that argument `arg` names the MCP server the tool reaches (see
    /// [`ToolSpec::mcp_server_arg`]).
    pub fn naming_mcp_server(mut self, arg: impl Into<String>) -> Self {
        self.reaches_mcp_servers = true;
        self.mcp_server_arg = Some(arg.into());
        self
    }

    /// Declares that the tool may hand calls to `tool` (see [`ToolSpec::delegates`]).
    pub fn delegating_to(mut self, tool: impl Into<String>) -> Self {
        self.delegates.push(tool.into());
        self
    }

    /// Marks a tool that reports progress.
    pub fn reporting_progress(mut self) -> Self {
        self.reports_progress = true;
        self
    }

    /// Adds the tool to a group (without the `group:` prefix).
    pub fn in_group(mut self, group: impl Into<String>) -> Self {
        self.groups.push(group.into());
        self
    }

    /// Overrides the permission risk.
    pub fn with_risk(mut self, risk: Risk) -> Self {
        self.risk = risk;
        self
    }

    /// Overrides the parallel-safe flag.
    pub fn parallel_safe(mut self, parallel_safe: bool) -> Self {
        self.parallel_safe = parallel_safe;
        self
    }

    /// Sets a per-tool timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// Private marker: only this crate can create one, so only the pipeline can create [`Authorized`].
#[derive(Debug)]
pub(crate) struct Seal(());

/// A call that has passed every pre-execution step of the pipeline: resolved, authorized by
/// policy, validated, rate limited, cleared by hooks and by the permission check.
///
/// Tools receive this instead of raw arguments. There is no public constructor; see the module
/// docs for the compile-fail proof.
#[derive(Debug)]
pub struct Authorized<I> {
    input: I,
    ctx: Arc<CallContext>,
    /// The declared delegates ([`ToolSpec::delegates`]) the pipeline authorized for this call.
    delegations: Arc<[String]>,
    /// The permission step's analysis of the spec's shell script argument, if any.
    script: Option<ScriptAnalysis>,
    /// The caller's rule for MCP servers, for tools that declare
    /// [`ToolSpec::reaches_mcp_servers`].
    mcp_servers: Option<Arc<McpServerRule>>,
    #[allow(dead_code)]
    seal: Seal,
}

/// The pipeline's authorization for a tool to hand this call to one of its declared delegates
/// ([`ToolSpec::delegates`]). Only the pipeline creates one, so code that hands a call over can
/// require it and cannot be reached without it.
#[derive(Debug, Clone)]
pub struct Delegation {
    tool: String,
    #[allow(dead_code)]
    seal: Arc<Seal>,
}

impl Delegation {
    /// The tool the call may be handed to.
    pub fn tool(&self) -> &str {
        &self.tool
    }
}

impl<I> Authorized<I> {
    pub(crate) fn new(
        input: I,
        ctx: Arc<CallContext>,
        delegations: Arc<[String]>,
        script: Option<ScriptAnalysis>,
        mcp_servers: Option<Arc<McpServerRule>>,
    ) -> Self {
        Self {
            input,
            ctx,
            delegations,
            script,
            mcp_servers,
            seal: Seal(()),
        }
    }

    /// Whether the caller's policy lets this call reach MCP server `server`, for the servers
    /// a tool picks itself (a listing of all of them); a server named in the declared argument
    /// ([`ToolSpec::mcp_server_arg`]) was checked before the tool ran. `true` for tools that
    /// do not declare [`ToolSpec::reaches_mcp_servers`].
    pub fn mcp_server_allowed(&self, server: &str) -> bool {
        self.mcp_servers
            .as_deref()
            .is_none_or(|rule| rule.allows(server))
    }

    /// The analysis of the shell script argument ([`ToolSpec::shell_script_arg`]) that the
    /// permission step made and decided on; `None` when the spec declares none or the pipeline
    /// has no [`crate::ScriptAnalyzer`]. Use it instead of parsing the script again.
    pub fn script(&self) -> Option<&ScriptAnalysis> {
        self.script.as_ref()
    }

    /// The authorization to hand this call to `tool`, if the tool declared it as a delegate and
    /// the pipeline authorized it for the caller; `None` otherwise.
    pub fn delegation(&self, tool: &str) -> Option<Delegation> {
        self.delegations
            .iter()
            .any(|t| t == tool)
            .then(|| Delegation {
                tool: tool.to_string(),
                seal: Arc::new(Seal(())),
            })
    }

    /// The validated, typed input.
    pub fn input(&self) -> &I {
        &self.input
    }

    /// The immutable call context.
    pub fn ctx(&self) -> &CallContext {
        &self.ctx
    }

    /// A shared handle on the context, for work that outlives the borrow (background tasks).
    pub fn ctx_arc(&self) -> Arc<CallContext> {
        Arc::clone(&self.ctx)
    }

    /// Splits the call into its input and context.
    pub fn into_parts(self) -> (I, Arc<CallContext>) {
        (self.input, self.ctx)
    }
}

/// A tool: a spec, a typed input, and an executor.
///
/// Implementations are shared across concurrent calls (`Send + Sync`) and keep no per-call
/// mutable state; per-session state must be keyed by [`CallContext::session_key`].
pub trait Tool: Send + Sync + 'static {
    /// The typed input; its JSON schema is what the model sees, and arguments are validated
    /// against it before `execute` runs. Tools with a runtime schema (MCP bridges) use
    /// `serde_json::Value` and override [`Tool::input_schema`].
    type Input: DeserializeOwned + JsonSchema + Send + 'static;

    /// The model-facing spec.
    fn spec(&self) -> ToolSpec;

    /// The JSON schema of the input (derived from `Input` unless overridden).
    fn input_schema(&self) -> serde_json::Value {
        crate::schema::schema_for::<Self::Input>()
    }

    /// Runs the tool. Errors are returned as [`ToolOutput::error`], never as panics (a panic is
    /// caught by the pipeline and reported as an error result, but is a bug).
    fn execute(&self, call: Authorized<Self::Input>) -> impl Future<Output = ToolOutput> + Send;
}
