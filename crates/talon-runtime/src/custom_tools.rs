//! Custom tools from the store, in the registry of every running Talon.
//!
//! Definitions are written through one function ([`define`]; `talon custom-tools` and the HTTP
//! API both call it), which checks them completely — form, parameters, placeholders, and that
//! the name is no built-in tool's nor any tool's this process has registered — before anything
//! is stored. A running Talon follows the store's `custom_tools_revision` like the MCP servers
//! (read every [`crate::mcp_store::POLL_EVERY`], and at once on `NOTIFY talon_custom_tools` on
//! PostgreSQL), so a change reaches every gateway without a restart. Loading checks each
//! definition again and never puts a custom tool in place of a tool it did not load itself: a
//! name a built-in or bridged tool has stays that tool's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use talon_core::Registry;
use talon_exec::Shell;
use talon_store::{CustomToolSpec, Store, StoredCustomTool};
use talon_tools::FsConfig;
use talon_tools::runtime::custom_tool::{CustomTool, check_definition};
use tokio::sync::Notify;

/// Changes to a stored definition (`talon custom-tools update`, `PATCH /v1/custom-tools/{name}`);
/// what is `None` stays as it is.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomToolPatch {
    pub description: Option<String>,
    pub command: Option<String>,
    pub parameters: Option<serde_json::Value>,
    pub working_dir: Option<String>,
    pub timeout_secs: Option<u64>,
    /// The agent it exists for; `""` for every agent.
    pub agent: Option<String>,
    pub enabled: Option<bool>,
    /// Replaces every variable (an empty object removes them).
    pub env: Option<BTreeMap<String, String>>,
}

impl CustomToolPatch {
    fn apply(self, spec: &mut CustomToolSpec) {
        let CustomToolPatch {
            description,
            command,
            parameters,
            working_dir,
            timeout_secs,
            agent,
            enabled,
            env: _,
        } = self;
        if let Some(v) = description {
            spec.description = v;
        }
        if let Some(v) = command {
            spec.command = v;
        }
        if let Some(v) = parameters {
            spec.parameters = v;
        }
        if let Some(v) = working_dir {
            spec.working_dir = v;
        }
        if let Some(v) = timeout_secs {
            spec.timeout_secs = v;
        }
        if let Some(v) = agent {
            spec.agent = v;
        }
        if let Some(v) = enabled {
            spec.enabled = v;
        }
    }
}

/// Why a definition was not stored.
#[derive(Debug, thiserror::Error)]
pub enum DefineError {
    /// The definition is wrong; the message says what to fix.
    #[error("{0}")]
    Invalid(String),
    /// No such custom tool (an update or removal).
    #[error("no custom tool named {0:?}; list them with talon custom-tools list")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] talon_store::StoreError),
}

/// A parameter schema from `NAME:TYPE[:required][:description]` entries (`talon custom-tools
/// --param`), or from `json`, a whole JSON Schema (`--parameters`); `None` when neither is given.
pub fn parameter_schema(
    json: Option<&str>,
    params: &[String],
) -> Result<Option<serde_json::Value>, DefineError> {
    if let Some(text) = json {
        return serde_json::from_str(text)
            .map(Some)
            .map_err(|e| DefineError::Invalid(format!("--parameters is not JSON: {e}")));
    }
    if params.is_empty() {
        return Ok(None);
    }
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for entry in params {
        let mut parts = entry.splitn(4, ':');
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            return Err(DefineError::Invalid(format!(
                "--param {entry:?}: give NAME:TYPE, e.g. path:string"
            )));
        };
        let mut rest: Vec<&str> = parts.collect();
        if rest.first() == Some(&"required") {
            required.push(serde_json::Value::from(name));
            rest.remove(0);
        }
        let mut schema = serde_json::json!({ "type": kind });
        if let Some(description) = rest.first().filter(|d| !d.is_empty()) {
            schema["description"] = (*description).into();
        }
        if properties.insert(name.to_string(), schema).is_some() {
            return Err(DefineError::Invalid(format!(
                "--param {name} is given twice"
            )));
        }
    }
    Ok(Some(serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
    })))
}

/// Checks `spec` completely and stores it (a new tool, or with `replace` a changed one); `env`
/// replaces the stored variables when given. `registry`: the running registry, whose tools'
/// names are refused as well (the built-in vocabulary always is).
pub async fn define(
    store: &Store,
    registry: Option<&Registry>,
    spec: &CustomToolSpec,
    env: Option<&BTreeMap<String, String>>,
    replace: bool,
    by: &str,
) -> Result<(), DefineError> {
    check_definition(spec).map_err(DefineError::Invalid)?;
    if let Some(tool) = registry.and_then(|r| r.resolve(&spec.name))
        && !is_custom(tool.spec())
    {
        return Err(DefineError::Invalid(format!(
            "custom tool name {:?} is the name of a tool Talon already has; pick another",
            spec.name
        )));
    }
    match store.put_custom_tool(spec, env, replace, by).await {
        Err(talon_store::StoreError::Invalid { reason, .. }) => Err(DefineError::Invalid(reason)),
        other => Ok(other?),
    }
}

/// Applies `patch` to the stored tool `name` and stores the result, checked as [`define`]
/// checks a new one.
pub async fn update(
    store: &Store,
    registry: Option<&Registry>,
    name: &str,
    patch: CustomToolPatch,
    by: &str,
) -> Result<StoredCustomTool, DefineError> {
    let Some(mut stored) = store.custom_tool(name).await? else {
        return Err(DefineError::NotFound(name.to_string()));
    };
    let env = patch.env.clone();
    patch.apply(&mut stored.spec);
    define(store, registry, &stored.spec, env.as_ref(), true, by).await?;
    store
        .custom_tool(name)
        .await?
        .ok_or_else(|| DefineError::NotFound(name.to_string()))
}

fn is_custom(spec: &talon_core::ToolSpec) -> bool {
    spec.groups.iter().any(|g| g == "custom")
}

/// What a loaded tool was made of: a change of any of it reloads the tool.
#[derive(PartialEq)]
struct Loaded {
    spec: CustomToolSpec,
    env: BTreeMap<String, String>,
}

/// The custom tools of one registry, kept equal to the store's.
pub struct CustomTools {
    store: Store,
    registry: Weak<Registry>,
    fs: Arc<FsConfig>,
    shell: Arc<Shell>,
    loaded: Mutex<BTreeMap<String, Loaded>>,
}

impl CustomTools {
    pub fn new(
        store: Store,
        registry: &Arc<Registry>,
        fs: Arc<FsConfig>,
        shell: Arc<Shell>,
    ) -> Self {
        Self {
            store,
            registry: Arc::downgrade(registry),
            fs,
            shell,
            loaded: Mutex::default(),
        }
    }

    /// Loads the store's enabled tools into the registry and removes the ones no longer there;
    /// a definition that fails its checks, whose variables cannot be decrypted, or whose name
    /// another tool has is skipped with an error in the log. Returns how many are loaded.
    pub async fn sync(&self) -> Result<usize, talon_store::StoreError> {
        let mut wanted = BTreeMap::new();
        for stored in self.store.custom_tools().await? {
            if !stored.spec.enabled {
                continue;
            }
            let name = stored.spec.name.clone();
            match self.store.custom_tool_env(&stored).await {
                Ok(env) => {
                    wanted.insert(
                        name,
                        Loaded {
                            spec: stored.spec,
                            env,
                        },
                    );
                }
                Err(e) => {
                    tracing::error!(tool = %name, error = %e, "custom tool skipped: its environment cannot be read");
                }
            }
        }
        let Some(registry) = self.registry.upgrade() else {
            return Ok(0);
        };
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        loaded.retain(|name, _| {
            let keep = wanted.contains_key(name);
            if !keep {
                registry.unregister(name);
                tracing::info!(tool = %name, "custom tool removed");
            }
            keep
        });
        for (name, next) in wanted {
            if loaded.get(&name) == Some(&next) {
                continue;
            }
            let schema = match check_definition(&next.spec) {
                Ok(schema) => schema,
                Err(e) => {
                    tracing::error!(tool = %name, error = %e, "custom tool skipped");
                    continue;
                }
            };
            let tool = CustomTool {
                spec: next.spec.clone(),
                schema,
                env: next.env.clone().into_iter().collect::<Vec<_>>().into(),
                fs: Arc::clone(&self.fs),
                shell: Arc::clone(&self.shell),
            };
            let done = if loaded.contains_key(&name) {
                registry.replace(tool).map(|_| ())
            } else if registry.canonical_name(&name).is_some() {
                tracing::error!(tool = %name, "custom tool skipped: a built-in or bridged tool has its name");
                continue;
            } else {
                registry.register(tool)
            };
            match done {
                Ok(()) => {
                    tracing::info!(tool = %name, "custom tool loaded");
                    loaded.insert(name, next);
                }
                Err(e) => tracing::error!(tool = %name, error = %e, "custom tool skipped"),
            }
        }
        Ok(loaded.len())
    }

    /// Follows the store until the registry is dropped: on every change (`seen`: the revision
    /// read before the first [`CustomTools::sync`]), loads again.
    pub async fn follow(self, mut seen: Option<i64>) {
        let wake = Arc::new(Notify::new());
        self.store.notify_custom_tool_changes(Arc::clone(&wake));
        loop {
            let _ = tokio::time::timeout(crate::mcp_store::POLL_EVERY, wake.notified()).await;
            if self.registry.strong_count() == 0 {
                return;
            }
            let revision = match self.store.custom_tools_revision().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the custom tools' revision");
                    continue;
                }
            };
            if seen == Some(revision) {
                continue;
            }
            match self.sync().await {
                Ok(_) => seen = Some(revision),
                Err(e) => tracing::warn!(error = %e, "cannot read the custom tools"),
            }
        }
    }
}
