//! The virtual filesystem of seed 002 §3: some paths are not files on disk but rows in the store.
//!
//! * Context files — `SOUL.md`, `IDENTITY.md`, `AGENTS.md`, `TOOLS.md`, `HEARTBEAT.md`, `USER.md`,
//!   `USER_PREDEFINED.md`, `BOOTSTRAP.md`, `CAPABILITIES.md` at the workspace root — belong to the
//!   call's agent. For an open agent every file is per user, with the agent's own file as the
//!   template; for a predefined agent only `USER.md` is per user. Writing an empty `BOOTSTRAP.md`
//!   deletes it. Protected files (`SOUL`, `IDENTITY`, `AGENTS`, `USER`, `USER_PREDEFINED`,
//!   `CAPABILITIES`) are written only when the agent's settings say
//!   `"protected_files_writable": true`.
//! * A predefined agent's shared files (all but a user's own `USER.md`) sit in every user's
//!   system prompt, so they are the operator's: no tool call writes them, whatever the agent's
//!   settings (`talon agents set-file` does). Otherwise any user's model could speak in every
//!   other user's prompt. [`target`] decides this for every write and edit.
//! * Memory — `MEMORY.md`, `memory.md`, `memory/*` — are memory documents: the user's own first,
//!   then the agent's global ones; every write re-chunks and re-indexes.
//!
//! `CAPABILITIES.md` is routed like the other context files rather than dropped from the protected
//! list: whatever context files the store holds for an agent go into its system prompt, so a
//! `CAPABILITIES.md` set with `talon agents` tells the model what it may do. Protecting a name the
//! tools never routed protected nothing (the agent wrote a disk file of that name while the
//! prompt kept the store's); routed, the file tools show the model the text its prompt holds,
//! and only an agent allowed to change its protected files can change it.
//!
//! Routing applies whenever there is a store: the call's agent (Talon's default agent when the
//! call names none) must exist there, or the call is refused — memory never falls back to the
//! workspace's disk. Without a store (library use) the paths are ordinary files. With a store,
//! the disk's copies under these names ([`SHADOWED`]) are denied by the jail itself, so no tool
//! reaches them however it spells the path (`sub/../SOUL.md`, a symlink to `memory/`).
//!
//! Tools do not call this module: they go through the façade ([`crate::fs::files`]), which calls
//! it before the jail, so routed reads and writes pass the same pipeline (policy, hooks,
//! permission, scrubbing) as disk files, and listings and searches show [`documents`] in place
//! of the disk's shadowed names.

use std::path::{Component, Path};

use talon_core::CallContext;
use talon_store::{AgentType, Store, UpdateError};

/// Files routed to the agent's context store.
pub const CONTEXT_FILES: &[&str] = &[
    "SOUL.md",
    "IDENTITY.md",
    "AGENTS.md",
    "TOOLS.md",
    "HEARTBEAT.md",
    "USER.md",
    "USER_PREDEFINED.md",
    "BOOTSTRAP.md",
    "CAPABILITIES.md",
];

/// The memory directory: everything beneath it is a memory document.
pub const MEMORY_DIR: &str = "memory";

/// Root-level memory documents.
pub const MEMORY_FILES: &[&str] = &["MEMORY.md", "memory.md"];

/// The workspace-relative names the store owns when there is one: the jail denies the disk's
/// copies (a deny prefix covers everything beneath it).
pub fn shadowed() -> impl Iterator<Item = &'static str> {
    CONTEXT_FILES
        .iter()
        .chain(MEMORY_FILES)
        .copied()
        .chain([MEMORY_DIR])
}

/// Context files that need the agent's permission to change.
pub const PROTECTED_FILES: &[&str] = &[
    "SOUL.md",
    "IDENTITY.md",
    "AGENTS.md",
    "USER.md",
    "USER_PREDEFINED.md",
    "CAPABILITIES.md",
];

/// Where a path goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Context(String),
    Memory(String),
}

/// Classifies a path given to a file tool (relative, or absolute inside the workspace).
pub fn classify(ctx: &CallContext, input: &str) -> Option<Route> {
    let path = Path::new(input);
    let rel = if path.is_absolute() {
        let workspace = ctx.workspace.as_ref()?;
        let canonical = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.clone());
        path.strip_prefix(&canonical)
            .or_else(|_| path.strip_prefix(workspace))
            .ok()?
            .to_path_buf()
    } else {
        path.to_path_buf()
    };
    let parts: Vec<String> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return None;
    }
    match parts.as_slice() {
        [name] if CONTEXT_FILES.contains(&name.as_str()) => Some(Route::Context(name.clone())),
        [name] if MEMORY_FILES.contains(&name.as_str()) => Some(Route::Memory(name.clone())),
        [dir, rest @ ..] if dir == MEMORY_DIR && !rest.is_empty() => {
            Some(Route::Memory(parts.join("/")))
        }
        _ => None,
    }
}

/// Whose context files and memory a call reaches.
struct Owner {
    agent: String,
    agent_type: AgentType,
    /// The call's user; empty for none.
    user: String,
    /// The agent's settings allow writing protected files.
    protected_ok: bool,
}

/// The agent (and its type) and user of a call. An agent missing from the store is an error
/// that says how to create it.
async fn agent_of(store: &Store, ctx: &CallContext) -> Result<Owner, String> {
    let (key, _) = crate::memory::scope(ctx);
    match store.agent(&key).await {
        Ok(Some(agent)) => {
            let protected_ok = serde_json::from_str::<serde_json::Value>(&agent.settings)
                .ok()
                .and_then(|v| {
                    v.get("protected_files_writable")
                        .and_then(serde_json::Value::as_bool)
                })
                .unwrap_or(false);
            Ok(Owner {
                agent: agent.key,
                agent_type: agent.agent_type,
                user: ctx.user.clone().unwrap_or_default(),
                protected_ok,
            })
        }
        Ok(None) => Err(format!(
            "agent {key:?} does not exist, so its context files and memory cannot be used; create it with `talon agents create {key}` or call as an existing agent"
        )),
        Err(e) => Err(format!("the agent store is unavailable: {e}")),
    }
}

/// Every document a call can see under a routed name, as (workspace-relative path, text), sorted
/// by path: the context files the store holds for the call's agent and user (the user's own copy
/// where the file is per user, else the agent's), then the memory documents (the user's own,
/// else the agent's global one of that path). Listings and searches show these in place of the
/// disk's shadowed names. `Ok(empty)` without a store.
pub async fn documents(
    store: Option<&Store>,
    ctx: &CallContext,
) -> Result<Vec<(String, String)>, String> {
    let Some(store) = store else {
        return Ok(Vec::new());
    };
    let owner = agent_of(store, ctx).await?;
    let unavailable = |e: talon_store::StoreError| format!("the agent store is unavailable: {e}");
    let mut out: Vec<(String, String)> = store
        .context_files(&owner.agent, &owner.user, &[])
        .await
        .map_err(unavailable)?
        .into_iter()
        .filter(|(name, _)| CONTEXT_FILES.contains(&name.as_str()))
        .collect();
    let memory = store
        .memory_documents(&owner.agent, &owner.user)
        .await
        .map_err(|e| format!("memory is unavailable: {e}"))?;
    // Only paths a read would route: anything else in the table is not reachable by name.
    out.extend(
        memory
            .into_iter()
            .filter(|doc| matches!(classify(ctx, &doc.path), Some(Route::Memory(_))))
            .map(|doc| (doc.path, doc.content)),
    );
    out.sort();
    Ok(out)
}

/// Whether a context file is per user for this agent type.
fn per_user(agent_type: AgentType, file: &str) -> bool {
    agent_type == AgentType::Open || file == "USER.md"
}

/// Whether a write of context file `file` by `owner`'s call may happen, and if so whether it goes
/// to the user's own copy (`true`) or the agent's (`false`); otherwise why not, for the model.
fn target(owner: &Owner, file: &str) -> Result<bool, String> {
    let agent = &owner.agent;
    if PROTECTED_FILES.contains(&file) && !owner.protected_ok {
        return Err(format!(
            "{file} is a protected context file of agent {agent}; it can only be changed when the agent's settings allow it (protected_files_writable)"
        ));
    }
    let for_user = per_user(owner.agent_type, file) && !owner.user.is_empty();
    if owner.agent_type == AgentType::Predefined && !for_user {
        return Err(format!(
            "{file} is a shared context file of predefined agent {agent}: it is in every user's system prompt, so only the operator changes it (`talon agents set-file {agent} {file} --from PATH`); ask the user to have it changed{}",
            if file == "USER.md" {
                "; a call made for a user writes that user's own USER.md"
            } else {
                ""
            }
        ));
    }
    Ok(for_user)
}

/// Reads a routed path. `None`: not routed (use the disk).
pub async fn read(
    store: Option<&Store>,
    ctx: &CallContext,
    input: &str,
) -> Option<Result<String, String>> {
    let store = store?;
    let route = classify(ctx, input)?;
    let Owner {
        agent,
        agent_type,
        user,
        ..
    } = match agent_of(store, ctx).await {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    Some(match route {
        Route::Context(file) => {
            let own = if per_user(agent_type, &file) && !user.is_empty() {
                store.user_file(&agent, &user, &file).await
            } else {
                Ok(None)
            };
            let found = match own {
                Ok(Some(content)) => Ok(Some(content)),
                Ok(None) => store.agent_file(&agent, &file).await,
                Err(e) => Err(e),
            };
            match found {
                Ok(Some(content)) => Ok(content),
                Ok(None) => Err(format!(
                    "{file} does not exist yet for agent {agent}; write it to create it"
                )),
                Err(e) => Err(format!("the agent store is unavailable: {e}")),
            }
        }
        Route::Memory(path) => match store.memory(&agent, &user, &path).await {
            Ok(Some(doc)) => Ok(doc.content),
            Ok(None) => Err(format!(
                "memory document {path} does not exist yet; write it to create it"
            )),
            Err(e) => Err(format!("memory is unavailable: {e}")),
        },
    })
}

/// Writes a routed path; returns a short description of what happened.
pub async fn write(
    store: Option<&Store>,
    ctx: &CallContext,
    input: &str,
    content: &str,
) -> Option<Result<String, String>> {
    let store = store?;
    let route = classify(ctx, input)?;
    let owner = match agent_of(store, ctx).await {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    Some(match route {
        Route::Context(file) => {
            let for_user = match target(&owner, &file) {
                Ok(for_user) => for_user,
                Err(e) => return Some(Err(e)),
            };
            let Owner { agent, user, .. } = owner;
            if file == "BOOTSTRAP.md" && content.trim().is_empty() {
                let deleted = if for_user {
                    store.delete_user_file(&agent, &user, &file).await
                } else {
                    store.delete_agent_file(&agent, &file).await
                };
                return Some(
                    deleted
                        .map(|_| format!("{file} deleted (bootstrap finished)"))
                        .map_err(|e| e.to_string()),
                );
            }
            let result = if for_user {
                store.set_user_file(&agent, &user, &file, content).await
            } else {
                store.set_agent_file(&agent, &file, content).await
            };
            result
                .map(|()| {
                    format!(
                        "{file} saved for agent {agent}{}",
                        if for_user {
                            format!(" and user {user}")
                        } else {
                            String::new()
                        }
                    )
                })
                .map_err(|e| e.to_string())
        }
        Route::Memory(path) => store
            .put_memory(&owner.agent, &owner.user, &path, content)
            .await
            .map(|version| format!("memory document {path} saved (version {version}) and indexed"))
            .map_err(|e| format!("memory is unavailable: {e}")),
    })
}

/// Applies an edit to a routed path atomically (memory documents with compare-and-set).
pub async fn edit<F>(
    store: Option<&Store>,
    ctx: &CallContext,
    input: &str,
    change: F,
) -> Option<Result<String, String>>
where
    F: Fn(&str) -> Result<String, String>,
{
    let store_ref = store?;
    let route = classify(ctx, input)?;
    let owner = match agent_of(store_ref, ctx).await {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    Some(match route {
        Route::Memory(path) => match store_ref
            .update_memory(&owner.agent, &owner.user, &path, &change)
            .await
        {
            Ok((version, _)) => Ok(format!(
                "memory document {path} updated (version {version}) and indexed"
            )),
            Err(UpdateError::Rejected(message)) => Err(message),
            Err(UpdateError::Store(e)) => Err(format!("memory is unavailable: {e}")),
        },
        Route::Context(file) => edit_context(store_ref, &owner, &file, &change).await,
    })
}

/// Edits a context file with compare-and-set on its content, retrying when another writer got in
/// between: concurrent edits all land. An open agent's user edits start from the agent's template.
async fn edit_context<F>(
    store: &Store,
    owner: &Owner,
    file: &str,
    change: &F,
) -> Result<String, String>
where
    F: Fn(&str) -> Result<String, String>,
{
    let (agent_key, user) = (owner.agent.as_str(), owner.user.as_str());
    let for_user = target(owner, file)?;
    let target_user = if for_user { user } else { "" };
    for _ in 0..32 {
        let own = if for_user {
            store.user_file(agent_key, user, file).await
        } else {
            store.agent_file(agent_key, file).await
        }
        .map_err(|e| format!("the agent store is unavailable: {e}"))?;
        let base = match &own {
            Some(content) => content.clone(),
            None if for_user => store
                .agent_file(agent_key, file)
                .await
                .map_err(|e| format!("the agent store is unavailable: {e}"))?
                .ok_or_else(|| {
                    format!(
                        "{file} does not exist yet for agent {agent_key}; write it to create it"
                    )
                })?,
            None => {
                return Err(format!(
                    "{file} does not exist yet for agent {agent_key}; write it to create it"
                ));
            }
        };
        let next = change(&base)?;
        let done = store
            .replace_context_file(agent_key, target_user, file, own.as_deref(), &next)
            .await
            .map_err(|e| format!("the agent store is unavailable: {e}"))?;
        if done {
            return Ok(format!(
                "{file} saved for agent {agent_key}{}",
                if for_user {
                    format!(" and user {user}")
                } else {
                    String::new()
                }
            ));
        }
    }
    Err(format!(
        "{file} kept changing under concurrent writers; read it again and retry"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let mut ctx = CallContext::new("s");
        ctx.workspace = Some("/ws".into());
        assert_eq!(
            classify(&ctx, "SOUL.md"),
            Some(Route::Context("SOUL.md".into()))
        );
        assert_eq!(
            classify(&ctx, "/ws/USER.md"),
            Some(Route::Context("USER.md".into()))
        );
        assert_eq!(
            classify(&ctx, "./MEMORY.md"),
            Some(Route::Memory("MEMORY.md".into()))
        );
        assert_eq!(
            classify(&ctx, "memory/2026/a.md"),
            Some(Route::Memory("memory/2026/a.md".into()))
        );
        assert_eq!(
            classify(&ctx, "docs/SOUL.md"),
            None,
            "only at the workspace root"
        );
        assert_eq!(classify(&ctx, "memory"), None);
        assert_eq!(classify(&ctx, "../SOUL.md"), None);
        assert_eq!(classify(&ctx, "/elsewhere/SOUL.md"), None);
    }
}
