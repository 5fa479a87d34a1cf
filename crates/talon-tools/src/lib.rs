//! Talon's built-in tools, one module per tool, grouped as the seeds group them.
//!
//! Each module holds the tool's model-facing spec beside its implementation. GoClaw-dialect tools
//! live in their seed group's module ([`fs`], [`automation`], …); the Claude Code dialect (`Read`,
//! `Edit`, `TodoWrite`, …) lives in [`claude_code`] and calls the same operations. Which dialect a
//! client sees is policy: the `fs` group is GoClaw's, the `claude_code` group is Claude Code's, and
//! a profile or allow/deny list picks one or both.
//!
//! # Charter
//!
//! - **Owns:** the built-in tools in both dialects (GoClaw's and Claude Code's), each spec beside
//!   its executor.
//! - **Never contains:** runs, sessions' turns or anything needing the agent runtime (the runtime
//!   registers those), HTTP routes.
//! - **A new feature goes:** a browser tool or a media tool is a module here (spec, schema,
//!   executor, snapshot entry); one that needs the runtime is registered by talon-runtime.

/// Unwraps a `Result` whose error displays as a message for the model, or returns that message
/// as the tool's error result.
macro_rules! or_error {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(e) => return talon_core::ToolOutput::error(e.to_string()),
        }
    };
}

pub mod automation;
pub mod claude_code;
pub mod fs;
pub mod knowledge;
pub mod memory;
pub mod runtime;
pub mod session_map;
pub mod sessions;
pub mod skills;
pub mod untrusted_parse;
pub mod web;

use std::sync::Arc;

use talon_core::Registry;
use talon_core::registry::RegistryError;

pub use fs::workspace::{ExtraRoot, FsConfig};

/// Settings the built-in tools need.
#[derive(Debug, Clone, Default)]
pub struct BuiltinConfig {
    pub fs: FsConfig,
    /// The store; the memory tools are registered only when there is one.
    pub store: Option<talon_store::Store>,
    /// How `exec` and `Bash` run commands (sandboxed by default).
    pub shell: talon_exec::ShellConfig,
    /// What the web tools may reach, and their limits.
    pub web: web::WebConfig,
    /// The embedding model of hybrid memory search; `None`: full-text search only.
    pub embedder: Option<Arc<dyn talon_embed::Embedder>>,
    /// Where skills are found besides the workspace and the store.
    pub skills: skills::catalog::SkillsConfig,
    /// The endpoints `openai_compat_call` may call; the tool is registered only when there is
    /// at least one.
    pub openai_compat: Vec<web::openai_compat_call::Endpoint>,
    /// The model names a session may switch to with `Config` (`[subagents.models]`'s names):
    /// neither a model nor a file it wrote picks an arbitrary, or costlier, model.
    pub models: Vec<String>,
}

/// What the built-in tools share, kept for the layer above that owns the agent runtime: it
/// registers the versions of `sessions_send` and `WebFetch` that run on it
/// ([`Builtins::register_agent_services`]). Without that layer, `sessions_send` says it needs
/// the runtime and `WebFetch` returns the page for the calling model to read.
#[derive(Debug, Clone)]
pub struct Builtins {
    web: Arc<web::Web>,
    store: Option<talon_store::Store>,
    /// The skills catalogue the skill tools use.
    pub skills: skills::catalog::Skills,
    /// The file tools' configuration (the jail's roots), for tools registered later that run
    /// in the workspace (custom tools).
    pub fs: Arc<FsConfig>,
}

impl Builtins {
    /// Puts `sessions_send` (running turns with `sender`) and `WebFetch` (answering prompts with
    /// `answerer`) in place of the runtime-less ones, where the configuration registered them.
    pub fn register_agent_services(
        &self,
        registry: &Registry,
        sender: Arc<dyn sessions::SessionSender>,
        answerer: Arc<dyn claude_code::web_fetch::PageAnswerer>,
    ) -> Result<(), RegistryError> {
        if let Some(store) = &self.store {
            registry.replace(sessions::sessions_send::SessionsSend {
                store: store.clone(),
                sender: Some(sender),
            })?;
        }
        registry.replace(claude_code::web_fetch::WebFetch {
            web: Arc::clone(&self.web),
            answerer: Some(answerer),
        })?;
        Ok(())
    }
}

/// Registers every built-in tool this build provides.
pub fn register_builtin(
    registry: &Registry,
    config: &BuiltinConfig,
) -> Result<Builtins, RegistryError> {
    let shell = Arc::new(talon_exec::Shell::new(config.shell.clone()));
    register_builtin_with(registry, config, shell)
}

/// Like [`register_builtin`], with the shell the command tools share given by the caller, who
/// keeps it to stop background commands and session sandboxes at shutdown
/// ([`talon_exec::Shell::shutdown`]). `config.shell` is ignored.
pub fn register_builtin_with(
    registry: &Registry,
    config: &BuiltinConfig,
    shell: Arc<talon_exec::Shell>,
) -> Result<Builtins, RegistryError> {
    let mut fs_config = config.fs.clone();
    fs_config.store = config.store.clone();
    let fs = Arc::new(fs_config);
    let state = Arc::new(fs::read_state::ReadState::default());
    registry.register(automation::datetime::Datetime)?;
    registry.register(fs::workspace_dir::WorkspaceDir {
        fs: Arc::clone(&fs),
    })?;
    registry.register(runtime::exec::Exec {
        fs: Arc::clone(&fs),
        shell: Arc::clone(&shell),
    })?;
    registry.register(runtime::process::Process {
        shell: Arc::clone(&shell),
    })?;
    registry.register(runtime::credentialed_exec::CredentialedExec {
        fs: Arc::clone(&fs),
        shell: Arc::clone(&shell),
    })?;
    registry.register(claude_code::bash::Bash::new(
        Arc::clone(&fs),
        Arc::clone(&shell),
    ))?;
    registry.register(claude_code::task_output::TaskOutput {
        shell: Arc::clone(&shell),
    })?;
    registry.register(claude_code::task_stop::TaskStop { shell })?;
    registry.register(fs::read_file::ReadFile {
        fs: Arc::clone(&fs),
    })?;
    registry.register(fs::write_file::WriteFile {
        fs: Arc::clone(&fs),
    })?;
    registry.register(fs::edit::Edit {
        fs: Arc::clone(&fs),
    })?;
    registry.register(fs::list_files::ListFiles {
        fs: Arc::clone(&fs),
    })?;
    registry.register(fs::glob::GlobTool {
        fs: Arc::clone(&fs),
    })?;
    registry.register(fs::search::Search {
        fs: Arc::clone(&fs),
    })?;
    registry.register(claude_code::glob::GlobTool {
        fs: Arc::clone(&fs),
    })?;
    registry.register(claude_code::grep::GrepTool {
        fs: Arc::clone(&fs),
    })?;
    registry.register(claude_code::read::Read {
        fs: Arc::clone(&fs),
        state: Arc::clone(&state),
    })?;
    registry.register(claude_code::write::Write {
        fs: Arc::clone(&fs),
        state: Arc::clone(&state),
    })?;
    registry.register(claude_code::notebook_edit::NotebookEdit {
        fs: Arc::clone(&fs),
        state: Arc::clone(&state),
    })?;
    registry.register(claude_code::edit::Edit {
        fs: Arc::clone(&fs),
        state,
    })?;
    if let Some(store) = &config.store {
        registry.register(memory::memory_get::MemoryGet {
            store: store.clone(),
        })?;
        registry.register(knowledge::knowledge_graph_search::KnowledgeGraphSearch {
            store: store.clone(),
        })?;
        registry.register(memory::memory_search::MemorySearch {
            store: store.clone(),
            embedder: config.embedder.clone(),
        })?;
        registry.register(sessions::sessions_list::SessionsList {
            store: store.clone(),
        })?;
        registry.register(sessions::sessions_history::SessionsHistory {
            store: store.clone(),
        })?;
        registry.register(sessions::session_status::SessionStatus {
            store: store.clone(),
        })?;
        registry.register(claude_code::config::Config {
            store: store.clone(),
            models: config.models.clone(),
        })?;
        registry.register(sessions::sessions_send::SessionsSend {
            store: store.clone(),
            sender: None,
        })?;
    }
    let skills = skills::catalog::Skills {
        config: config.skills.clone(),
        fs: Arc::clone(&fs),
        store: config.store.clone(),
    };
    registry.register(skills::skill_search::SkillSearch {
        skills: skills.clone(),
        embedder: config
            .embedder
            .clone()
            .map(talon_embed::CachedEmbedder::new),
    })?;
    registry.register(skills::use_skill::UseSkill {
        skills: skills.clone(),
    })?;
    registry.register(skills::publish_skill::PublishSkill {
        skills: skills.clone(),
    })?;
    registry.register(claude_code::skill::Skill {
        skills: skills.clone(),
    })?;
    registry.register(claude_code::todo_write::TodoWrite::default())?;
    registry.register(claude_code::ask_user_question::AskUserQuestion)?;
    registry.register(claude_code::exit_plan_mode::ExitPlanMode)?;
    let web = Arc::new(web::Web::new(config.web.clone()));
    registry.register(web::web_fetch::WebFetch {
        web: Arc::clone(&web),
    })?;
    registry.register(claude_code::web_fetch::WebFetch {
        web: Arc::clone(&web),
        answerer: None,
    })?;
    registry.register(web::web_search::WebSearch {
        web: Arc::clone(&web),
    })?;
    registry.register(claude_code::web_search::WebSearch {
        web: Arc::clone(&web),
    })?;
    if !config.openai_compat.is_empty() {
        registry.register(web::openai_compat_call::OpenAiCompatCall {
            web: Arc::clone(&web),
            endpoints: Arc::new(config.openai_compat.clone()),
        })?;
    }
    Ok(Builtins {
        web,
        store: config.store.clone(),
        skills,
        fs,
    })
}
