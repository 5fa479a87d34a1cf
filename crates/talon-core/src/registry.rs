//! The tool registry: concurrent (many readers, rare writers), deterministic (sorted names, for
//! prompt-cache stability), with aliases, disabled tools, dynamic groups, and cheap clones for
//! per-agent registries.
//!
//! Running a tool is not possible from here: the registry hands out specs and schemas, and only
//! the [`crate::pipeline`] can execute.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use futures::future::BoxFuture;
use serde_json::Value;

use crate::context::CallContext;
use crate::output::ToolOutput;
use crate::policy::{McpServerRule, catalog};
use crate::script::ScriptAnalysis;
use crate::tool::{Authorized, Tool, ToolSpec};

/// Why a registry change was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("a tool named {0:?} is already registered")]
    Duplicate(String),
    #[error(
        "{0:?} is an alias (of {1:?}); unregister the alias before registering a tool with that name"
    )]
    NameIsAlias(String, String),
    #[error("alias {0:?} would shadow the real tool of the same name")]
    AliasShadowsTool(String),
    #[error("alias {alias:?} already points at {existing:?}")]
    AliasTaken { alias: String, existing: String },
    #[error("tool name {0:?} is invalid: use 1-128 characters from A-Z a-z 0-9 _ - . :")]
    InvalidName(String),
}

/// The executor half of a tool, with its input type erased. Crate-private: nothing outside the
/// pipeline can call it.
pub(crate) trait ErasedTool: Send + Sync {
    /// Deserializes validated arguments and runs the tool; `delegations` are the declared
    /// delegates the pipeline authorized for this call, `script` the permission step's analysis
    /// of its shell script argument, `mcp_servers` the caller's rule for MCP servers (for
    /// tools that declare [`crate::ToolSpec::reaches_mcp_servers`]).
    fn run(
        &self,
        ctx: Arc<CallContext>,
        args: Value,
        delegations: Arc<[String]>,
        script: Option<ScriptAnalysis>,
        mcp_servers: Option<Arc<McpServerRule>>,
    ) -> BoxFuture<'_, Result<ToolOutput, String>>;
}

struct Typed<T>(T);

impl<T: Tool> ErasedTool for Typed<T> {
    fn run(
        &self,
        ctx: Arc<CallContext>,
        args: Value,
        delegations: Arc<[String]>,
        script: Option<ScriptAnalysis>,
        mcp_servers: Option<Arc<McpServerRule>>,
    ) -> BoxFuture<'_, Result<ToolOutput, String>> {
        Box::pin(async move {
            let empty = args.as_object().is_some_and(serde_json::Map::is_empty);
            let input: T::Input = match serde_json::from_value(args) {
                Ok(input) => input,
                // Tools without arguments may use `()` as input; `{}` means "no arguments".
                Err(_) if empty => {
                    serde_json::from_value(Value::Null).map_err(|e| e.to_string())?
                }
                Err(e) => return Err(e.to_string()),
            };
            Ok(self
                .0
                .execute(Authorized::new(
                    input,
                    ctx,
                    delegations,
                    script,
                    mcp_servers,
                ))
                .await)
        })
    }
}

/// A registered tool: spec, schema, compiled validator, and the erased executor.
pub struct RegisteredTool {
    spec: ToolSpec,
    name: Arc<str>,
    schema: Arc<Value>,
    /// Compiled on first use: registering hundreds of MCP tools must stay cheap.
    validator: std::sync::OnceLock<Result<jsonschema::Validator, String>>,
    pub(crate) exec: Arc<dyn ErasedTool>,
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl RegisteredTool {
    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The canonical name, shared cheaply with events.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The JSON schema of the input.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The compiled validator; an error means the tool's schema itself is broken. Schemas
    /// that use no keyword newer than draft 7 are compiled as draft 7, which means the same for
    /// them: compiling against the 2020-12 meta-schema costs about a third of a one-shot
    /// process (`talon tool call`).
    pub(crate) fn validator(&self) -> Result<&jsonschema::Validator, String> {
        self.validator
            .get_or_init(|| crate::schema::validator(&self.schema))
            .as_ref()
            .map_err(Clone::clone)
    }
}

#[derive(Clone, Default)]
struct State {
    tools: BTreeMap<String, Arc<RegisteredTool>>,
    aliases: BTreeMap<String, String>,
    disabled: BTreeSet<String>,
    groups: BTreeMap<String, BTreeSet<String>>,
}

/// The set of tools, aliases and groups one agent (or the whole process) can draw from.
pub struct Registry {
    state: RwLock<State>,
    generation: AtomicU64,
    /// The generation after each change, for entry points that tell their clients (MCP's
    /// `notifications/tools/list_changed`).
    changes: tokio::sync::watch::Sender<u64>,
}

/// The write lock on a registry's state; announces the change when released.
struct WriteGuard<'a> {
    guard: Option<RwLockWriteGuard<'a, State>>,
    registry: &'a Registry,
}

impl std::ops::Deref for WriteGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        // Present until drop.
        self.guard.as_deref().unwrap_or_else(|| unreachable!())
    }
}

impl std::ops::DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard.as_deref_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        // Release the lock first, so a woken subscriber can read the new state at once.
        self.guard = None;
        self.registry
            .changes
            .send_replace(self.registry.generation());
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.names())
            .finish()
    }
}

fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

impl Registry {
    /// An empty registry seeded with the built-in groups and the legacy aliases
    /// (`bash`→`exec`, `edit_file`→`edit`, `sessions_spawn`→`spawn`, `apply-patch`→`apply_patch`).
    pub fn new() -> Self {
        let mut state = State::default();
        for (group, members) in catalog::BUILTIN_GROUPS {
            state.groups.insert(
                (*group).to_string(),
                members.iter().map(|m| (*m).to_string()).collect(),
            );
        }
        for (alias, canonical) in catalog::LEGACY_ALIASES {
            state
                .aliases
                .insert((*alias).to_string(), (*canonical).to_string());
        }
        Self {
            state: RwLock::new(state),
            generation: AtomicU64::new(0),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        // A poisoned lock only means a writer panicked mid-update of plain maps; the data is
        // still consistent enough to read, and refusing every call would be worse.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> WriteGuard<'_> {
        self.generation.fetch_add(1, Ordering::Release);
        WriteGuard {
            guard: Some(self.state.write().unwrap_or_else(|e| e.into_inner())),
            registry: self,
        }
    }

    /// Changes from now on: the receiver sees a new value after each change of the tools,
    /// aliases or groups.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// A counter bumped by every change; caches of derived data (effective tool sets) key on it.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Registers a tool. Its declared groups are merged into the registry's groups.
    pub fn register<T: Tool>(&self, tool: T) -> Result<(), RegistryError> {
        let spec = tool.spec();
        let schema = crate::schema::normalize(tool.input_schema());
        self.insert(spec, schema, Arc::new(Typed(tool)))
    }

    /// Puts `tool` in place of the registered tool of its name, in one change: the layer that
    /// owns a service a built-in tool needs (the agent runtime, for `sessions_send`) registers
    /// the version that has it. `false`, registering nothing, when no tool of that name is
    /// registered (a configuration left it out).
    pub fn replace<T: Tool>(&self, tool: T) -> Result<bool, RegistryError> {
        let spec = tool.spec();
        let schema = crate::schema::normalize(tool.input_schema());
        let mut state = self.write();
        if state.tools.remove(&spec.name).is_none() {
            return Ok(false);
        }
        Self::insert_into(&mut state, spec, schema, Arc::new(Typed(tool)))?;
        Ok(true)
    }

    fn insert(
        &self,
        spec: ToolSpec,
        schema: Value,
        exec: Arc<dyn ErasedTool>,
    ) -> Result<(), RegistryError> {
        Self::insert_into(&mut self.write(), spec, schema, exec)
    }

    fn insert_into(
        state: &mut State,
        spec: ToolSpec,
        schema: Value,
        exec: Arc<dyn ErasedTool>,
    ) -> Result<(), RegistryError> {
        if !valid_name(&spec.name) {
            return Err(RegistryError::InvalidName(spec.name));
        }
        if state.tools.contains_key(&spec.name) {
            return Err(RegistryError::Duplicate(spec.name));
        }
        if let Some(canonical) = state.aliases.get(&spec.name) {
            // Built-in legacy aliases give way to a real tool of the same name.
            let builtin = catalog::LEGACY_ALIASES.iter().any(|(a, _)| *a == spec.name);
            if !builtin {
                return Err(RegistryError::NameIsAlias(
                    spec.name.clone(),
                    canonical.clone(),
                ));
            }
            state.aliases.remove(&spec.name);
        }
        for group in &spec.groups {
            state
                .groups
                .entry(group.clone())
                .or_default()
                .insert(spec.name.clone());
        }
        let name: Arc<str> = Arc::from(spec.name.as_str());
        let key = spec.name.clone();
        state.tools.insert(
            key,
            Arc::new(RegisteredTool {
                spec,
                name,
                schema: Arc::new(schema),
                validator: std::sync::OnceLock::new(),
                exec,
            }),
        );
        Ok(())
    }

    /// Removes a tool; returns whether it existed. Aliases pointing at it stop resolving.
    pub fn unregister(&self, name: &str) -> bool {
        self.write().tools.remove(name).is_some()
    }

    /// Removes every tool whose name starts with `prefix` (for example `mcp__github__`);
    /// returns the removed names, sorted.
    pub fn unregister_prefix(&self, prefix: &str) -> Vec<String> {
        let mut state = self.write();
        let names: Vec<String> = state
            .tools
            .keys()
            .filter(|n| n.starts_with(prefix))
            .cloned()
            .collect();
        for name in &names {
            state.tools.remove(name);
        }
        names
    }

    /// Adds an alias. An alias may not shadow a registered tool.
    pub fn add_alias(&self, alias: &str, canonical: &str) -> Result<(), RegistryError> {
        if !valid_name(alias) {
            return Err(RegistryError::InvalidName(alias.to_string()));
        }
        let mut state = self.write();
        if state.tools.contains_key(alias) {
            return Err(RegistryError::AliasShadowsTool(alias.to_string()));
        }
        if let Some(existing) = state.aliases.get(alias)
            && existing != canonical
        {
            return Err(RegistryError::AliasTaken {
                alias: alias.to_string(),
                existing: existing.clone(),
            });
        }
        state
            .aliases
            .insert(alias.to_string(), canonical.to_string());
        Ok(())
    }

    /// Hides a tool from listings and resolution without unregistering it.
    pub fn disable(&self, name: &str) {
        self.write().disabled.insert(name.to_string());
    }

    /// Undoes [`Registry::disable`].
    pub fn enable(&self, name: &str) {
        self.write().disabled.remove(name);
    }

    /// Finds an enabled tool by its name or an alias (a real tool wins over an alias).
    pub fn resolve(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        let state = self.read();
        let canonical = if state.tools.contains_key(name) {
            name
        } else {
            state.aliases.get(name)?.as_str()
        };
        if state.disabled.contains(canonical) {
            return None;
        }
        state.tools.get(canonical).cloned()
    }

    /// The canonical name `name` resolves to, if any (enabled or not).
    pub fn canonical_name(&self, name: &str) -> Option<String> {
        let state = self.read();
        if state.tools.contains_key(name) {
            return Some(name.to_string());
        }
        state
            .aliases
            .get(name)
            .filter(|c| state.tools.contains_key(*c))
            .cloned()
    }

    /// Enabled tool names, sorted.
    pub fn names(&self) -> Vec<String> {
        let state = self.read();
        state
            .tools
            .keys()
            .filter(|n| !state.disabled.contains(*n))
            .cloned()
            .collect()
    }

    /// Enabled tools, sorted by name.
    pub fn tools(&self) -> Vec<Arc<RegisteredTool>> {
        let state = self.read();
        state
            .tools
            .iter()
            .filter(|(n, _)| !state.disabled.contains(*n))
            .map(|(_, t)| Arc::clone(t))
            .collect()
    }

    /// Number of enabled tools.
    pub fn len(&self) -> usize {
        self.names().len()
    }

    /// True when no tool is enabled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces a group's members (used by the MCP manager for `mcp:<server>`).
    pub fn register_group(&self, group: &str, members: impl IntoIterator<Item = String>) {
        self.write()
            .groups
            .insert(group.to_string(), members.into_iter().collect());
    }

    /// Adds members to a group, creating it if needed (deduplicated).
    pub fn merge_group(&self, group: &str, members: impl IntoIterator<Item = String>) {
        self.write()
            .groups
            .entry(group.to_string())
            .or_default()
            .extend(members);
    }

    /// Removes a group; returns whether it existed.
    pub fn unregister_group(&self, group: &str) -> bool {
        self.write().groups.remove(group).is_some()
    }

    /// A group's declared members (registered or not), sorted.
    pub fn group(&self, group: &str) -> Option<Vec<String>> {
        self.read()
            .groups
            .get(group)
            .map(|m| m.iter().cloned().collect())
    }

    /// All group names, sorted.
    pub fn group_names(&self) -> Vec<String> {
        self.read().groups.keys().cloned().collect()
    }

    /// Expands a group against the live registry: the enabled tools among its members (members
    /// may be aliases), sorted. Composite groups (`goclaw`) list member names, not groups.
    pub fn expand_group(&self, group: &str) -> Option<BTreeSet<String>> {
        let state = self.read();
        let members = state.groups.get(group)?;
        Some(
            members
                .iter()
                .filter_map(|m| {
                    let canonical = if state.tools.contains_key(m) {
                        m
                    } else {
                        state.aliases.get(m)?
                    };
                    (state.tools.contains_key(canonical) && !state.disabled.contains(canonical))
                        .then(|| canonical.clone())
                })
                .collect(),
        )
    }

    /// An independent copy sharing the tool implementations (per-agent registries, subagents).
    pub fn clone_registry(&self) -> Registry {
        Registry {
            state: RwLock::new(self.read().clone()),
            generation: AtomicU64::new(self.generation()),
            changes: tokio::sync::watch::Sender::new(self.generation()),
        }
    }
}

#[cfg(test)]
mod tests;

/// Keywords whose meaning needs draft 2019-09 or later.
const NEWER_KEYWORDS: &[&str] = &[
    "$defs",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "prefixItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "dependentRequired",
    "dependentSchemas",
    "minContains",
    "maxContains",
    "$vocabulary",
];

/// Whether `schema` uses a keyword (anywhere) that draft 7 would ignore, or names its draft.
pub(crate) fn uses_newer_keywords(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.iter().any(|(key, value)| {
            NEWER_KEYWORDS.contains(&key.as_str()) || key == "$schema" || uses_newer_keywords(value)
        }),
        Value::Array(items) => items.iter().any(uses_newer_keywords),
        _ => false,
    }
}
