//! Talon as an MCP client: the tools of external MCP servers become Talon tools.
//!
//! Each configured server is started and listed in parallel, bounded by a start-up timeout, so
//! one slow or dead server never holds up the others or Talon; its tools are registered under
//! the dialect's names ([`names`]) in the groups `mcp` and `mcp:<server>`, with a risk from their
//! annotations. A bridged tool is an ordinary registered tool, so every call to it goes through
//! Talon's pipeline: policy, approvals, rate limits, hooks, scrubbing and audit.
//!
//! # Charter
//!
//! - **Owns:** Talon as an MCP client: connecting servers, OAuth, grants, bridging their tools into
//!   the registry.
//! - **Never contains:** its own approval or policy path: bridged tools go through the pipeline
//!   like any other.
//! - **A new feature goes:** a new MCP transport or protocol revision.

pub mod access;
pub mod catalog;
mod elicit;
pub mod link;
mod mrtr;
pub mod names;
pub mod oauth;
pub mod oauth_http;
pub mod resources;
pub mod server;
pub mod sse;
pub mod stdio_client;
pub mod tool;
pub mod transport;
pub mod watcher;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use talon_core::{Registry, Tool};

pub use names::Dialect;
pub use server::{Server, ServerError};
pub use transport::{HttpConfig, StdioConfig, Transport};

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// GoClaw dialect: the prefix replacing `mcp_<server>`.
    pub prefix: Option<String>,
    /// Time allowed for start-up (the process and the handshake and the tool list).
    pub startup_timeout: Duration,
    /// Time allowed for one call.
    pub call_timeout: Duration,
    /// Characters of a result kept.
    pub max_output_chars: usize,
    /// Fail Talon's start when this server cannot be reached.
    pub required: bool,
    /// Only agents and users with a grant may use it ([`access`]).
    pub require_grant: bool,
}

impl ServerConfig {
    /// A stdio server with the defaults ([`ServerConfig::new`]).
    pub fn stdio(name: impl Into<String>, stdio: StdioConfig) -> Self {
        Self::new(name, Transport::Stdio(stdio))
    }

    /// A server with the defaults: 30 s to start, 60 s per call, Claude Code's output cap.
    pub fn new(name: impl Into<String>, transport: Transport) -> Self {
        Self {
            name: name.into(),
            transport,
            prefix: None,
            startup_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_output_chars: tool::DEFAULT_MAX_OUTPUT_CHARS,
            required: false,
            require_grant: false,
        }
    }

    /// Whether the server's name (and GoClaw prefix) can be bridged ([`names::check_server_name`]):
    /// a server whose name could take another server's tool names is never connected.
    pub fn check_names(&self) -> Result<(), ServerError> {
        let prefix = self.prefix.as_deref().map(names::check_prefix).transpose();
        names::check_server_name(&self.name)
            .and(prefix)
            .map(|_| ())
            .map_err(|message| ServerError::Config {
                server: self.name.clone(),
                message: format!(
                    "{message}; the server is not bridged. Rename it (remove it and add it again under a new name)."
                ),
            })
    }
}

/// What connecting the servers gave.
#[derive(Debug, Default)]
pub struct Connected {
    /// The connected servers' links (kept up by their supervisors).
    pub links: Vec<Arc<link::Link>>,
    /// Servers that could not be used, and why (the ones not `required`).
    pub failed: Vec<String>,
}

/// Whether [`Bridge::connect`] waits for servers that are not `required`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Startup {
    /// Wait for every server (one-shot commands, which need the tools now).
    Wait,
    /// Return once the `required` servers are up; the others connect in the background and
    /// their tools appear as each one answers (long-running entry points, whose clients hear
    /// `notifications/tools/list_changed`). A dead server then delays nothing.
    Background,
}

/// The bridged servers of one registry: connected at start, and added, changed and removed
/// while Talon runs. Each server's tools are re-listed and replaced whenever it announces
/// `notifications/tools/list_changed`, with the groups `mcp` and `mcp:<server>` rebuilt to
/// match; a server that goes down is reconnected ([`link`]).
pub struct Bridge {
    registry: Arc<Registry>,
    dialect: Dialect,
    /// Every bridged tool, and which are registered (search mode).
    catalog: Arc<Mutex<catalog::Catalog>>,
    /// Above this many bridged tools, only activated ones are registered.
    search_threshold: std::sync::atomic::AtomicUsize,
    links: resources::Links,
    access: Option<Arc<dyn access::Access>>,
    /// Itself, for the search tool's activations.
    me: Weak<Bridge>,
    /// Servers still connecting in the background, by name.
    connecting: Mutex<BTreeMap<String, tokio::task::JoinHandle<()>>>,
    /// The embedding model `mcp_tool_search` ranks by meaning with; none: by words only.
    embedder: Mutex<Option<talon_embed::CachedEmbedder>>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("dialect", &self.dialect)
            .field("servers", &self.server_names())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Bridge {
    /// A bridge registering into `registry` under `dialect`'s names. With `access`, every call
    /// to a bridged tool or resource is first checked against the caller's grants.
    pub fn new(
        registry: &Arc<Registry>,
        dialect: Dialect,
        access: Option<Arc<dyn access::Access>>,
    ) -> Arc<Self> {
        let links: resources::Links = Arc::default();
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            registry: Arc::clone(registry),
            dialect,
            catalog: Arc::default(),
            search_threshold: std::sync::atomic::AtomicUsize::new(
                catalog::DEFAULT_SEARCH_THRESHOLD,
            ),
            links,
            access,
            connecting: Mutex::default(),
            embedder: Mutex::default(),
        })
    }

    /// Has `mcp_tool_search` rank by meaning as well as words, with `embedder` (set it before
    /// [`Bridge::connect`]: the search tool is made when servers connect).
    pub fn set_embedder(&self, embedder: Arc<dyn talon_embed::Embedder>) {
        *self.embedder.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(talon_embed::CachedEmbedder::new(embedder));
    }

    /// Connects `configs` in parallel. A `required` server that fails fails the whole call;
    /// with [`Startup::Background`] the others are not waited for.
    pub async fn connect(
        self: &Arc<Self>,
        configs: &[ServerConfig],
        startup: Startup,
    ) -> Result<Connected, ServerError> {
        let mut connected = Connected::default();
        let mut usable = Vec::with_capacity(configs.len());
        for config in configs {
            match config.check_names() {
                Ok(()) => usable.push(config.clone()),
                Err(e) if config.required => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "MCP server skipped");
                    connected.failed.push(e.to_string());
                }
            }
        }
        let (awaited, background): (Vec<ServerConfig>, Vec<ServerConfig>) = usable
            .into_iter()
            .partition(|c| c.required || startup == Startup::Wait);
        for config in background {
            self.add_in_background(config);
        }
        let started = futures_join(&awaited).await;
        for (config, result) in awaited.iter().zip(started) {
            match result {
                Ok((server, tools)) => {
                    let (link, failures) = self.attach(config, server, tools);
                    connected.failed.extend(failures);
                    connected.links.push(link);
                }
                Err(e) if config.required => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "MCP server skipped");
                    connected.failed.push(e.to_string());
                }
            }
        }
        Ok(connected)
    }

    /// Starts connecting `config` without waiting; its tools appear when it answers. A server
    /// of the same name is replaced. A server whose name cannot be bridged is skipped with a
    /// warning.
    pub fn add_in_background(self: &Arc<Self>, config: ServerConfig) {
        if let Err(e) = config.check_names() {
            tracing::warn!(error = %e, "MCP server skipped");
            return;
        }
        self.remove(&config.name);
        let bridge = Arc::downgrade(self);
        let name = config.name.clone();
        let task = tokio::spawn(async move {
            let result = start_and_list(config.clone()).await;
            let Some(bridge) = bridge.upgrade() else {
                return;
            };
            lock(&bridge.connecting).remove(&config.name);
            match result {
                Ok((server, tools)) => {
                    for failure in bridge.attach(&config, server, tools).1 {
                        tracing::warn!("{failure}");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "MCP server skipped"),
            }
        });
        lock(&self.connecting).insert(name, task);
    }

    /// Connects `config` now (replacing a server of the same name) and returns its link.
    pub async fn add(
        self: &Arc<Self>,
        config: ServerConfig,
    ) -> Result<Arc<link::Link>, ServerError> {
        config.check_names()?;
        self.remove(&config.name);
        let (server, tools) = start_and_list(config.clone()).await?;
        let (link, failures) = self.attach(&config, server, tools);
        for failure in failures {
            tracing::warn!("{failure}");
        }
        Ok(link)
    }

    /// Disconnects a server and unregisters its tools; returns whether it was bridged.
    pub fn remove(&self, name: &str) -> bool {
        let pending = lock(&self.connecting).remove(name);
        let was_pending = pending.is_some_and(|task| {
            task.abort();
            true
        });
        let link = lock(&self.links).remove(name);
        {
            let mut catalog = lock(&self.catalog);
            catalog.tools.remove(name);
            self.apply(&mut catalog, Some(name));
        }
        self.registry.unregister_group(&format!("mcp:{name}"));
        self.offer_resource_tools();
        match link {
            Some(link) => {
                link.shut_down();
                true
            }
            None => was_pending,
        }
    }

    /// Registers the resource tools while a server is connected, and only then (every entry
    /// point offers the same tools, with or without servers).
    fn offer_resource_tools(&self) {
        let (list, read) = (
            resources::ListMcpResources::new(self.dialect, Arc::clone(&self.links)),
            resources::ReadMcpResource::new(self.dialect, Arc::clone(&self.links)),
        );
        let names = [list.spec().name, read.spec().name];
        if lock(&self.links).is_empty() {
            for name in &names {
                self.registry.unregister(name);
            }
        } else if self.registry.resolve(&names[0]).is_none() {
            let _ = self.registry.register(list);
            let _ = self.registry.register(read);
        }
    }

    /// The configuration of every bridged server (connected or connecting), by name.
    pub fn server_names(&self) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.links).keys().cloned().collect();
        names.extend(lock(&self.connecting).keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// Where each server stands, by name (`None` while it is still connecting).
    pub fn statuses(&self) -> BTreeMap<String, Option<link::Status>> {
        let mut out: BTreeMap<String, Option<link::Status>> = lock(&self.connecting)
            .keys()
            .map(|n| (n.clone(), None))
            .collect();
        for (name, link) in lock(&self.links).iter() {
            out.insert(name.clone(), Some(link.status()));
        }
        out
    }

    /// The link of a connected server.
    pub fn link(&self, name: &str) -> Option<Arc<link::Link>> {
        lock(&self.links).get(name).cloned()
    }

    /// The registry the bridge registers into.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
    /// Registers a started server's tools and starts following it (list changes, health,
    /// reconnection); returns its link and the tools that could not be registered.
    fn attach(
        self: &Arc<Self>,
        config: &ServerConfig,
        server: Server,
        tools: Vec<server::ListedTool>,
    ) -> (Arc<link::Link>, Vec<String>) {
        let server = Arc::new(server);
        let link = Arc::new(link::Link::new(
            config.clone(),
            Arc::clone(&server),
            self.access.clone(),
        ));
        if let Some(old) = lock(&self.links).insert(config.name.clone(), Arc::clone(&link)) {
            old.shut_down();
        }
        self.offer_resource_tools();
        let failures = self.sync(&link, tools);
        tokio::spawn(refresh_on_change(
            Arc::downgrade(self),
            Arc::downgrade(&link),
            Arc::downgrade(&server),
            false,
        ));
        let bridge = Arc::downgrade(self);
        tokio::spawn(Arc::clone(&link).supervise(move |link, server| {
            // A restarted server may list other tools: list it now, then follow its changes.
            tokio::spawn(refresh_on_change(
                bridge.clone(),
                Arc::downgrade(link),
                Arc::downgrade(server),
                true,
            ));
        }));
        (link, failures)
    }

    /// Replaces the link's server's tools with `tools` and rebuilds the groups; returns the
    /// tools that could not be registered, and why. A link that was removed meanwhile
    /// registers nothing.
    fn sync(
        self: &Arc<Self>,
        link: &Arc<link::Link>,
        tools: Vec<server::ListedTool>,
    ) -> Vec<String> {
        let config = &link.config;
        let mut catalog = lock(&self.catalog);
        let current = lock(&self.links)
            .get(&config.name)
            .is_some_and(|l| Arc::ptr_eq(l, link));
        if !current {
            return Vec::new();
        }
        let head = names::head(self.dialect, &config.name, config.prefix.as_deref());
        let twin = {
            let links = lock(&self.links);
            catalog
                .tools
                .keys()
                .filter(|other| **other != config.name)
                .find(|other| {
                    links.get(*other).is_some_and(|l| {
                        names::head(self.dialect, other, l.config.prefix.as_deref()) == head
                    })
                })
                .cloned()
        };
        if let Some(twin) = twin {
            return vec![format!(
                "MCP server {:?} is not bridged: its tools would be named {head}__… like those of MCP server {twin:?}, so a name would not say which server it calls. Rename one of them, or give one a different tool prefix.",
                config.name
            )];
        }
        let own: Vec<String> = catalog
            .tools
            .get(&config.name)
            .map(|t| t.iter().map(|b| b.name.clone()).collect())
            .unwrap_or_default();
        let mut entries: Vec<tool::Bridged> = Vec::with_capacity(tools.len());
        for listed in tools {
            let name = names::bridged_name(
                self.dialect,
                &config.name,
                config.prefix.as_deref(),
                &listed.name,
                // Another server's names never start with this server's head ([`names`]).
                |n| {
                    (self.registry.resolve(n).is_some() && !own.iter().any(|o| o == n))
                        || entries.iter().any(|e| e.name == n)
                },
            );
            entries.push(tool::Bridged {
                link: Arc::clone(link),
                name,
                listed,
                timeout: config.call_timeout,
                max_output_chars: config.max_output_chars,
            });
        }
        catalog.tools.insert(config.name.clone(), entries);
        self.apply(&mut catalog, Some(&config.name))
    }

    /// Registers what the catalog says should be ([`catalog::Catalog::apply`]).
    fn apply(&self, catalog: &mut catalog::Catalog, changed: Option<&str>) -> Vec<String> {
        let threshold = self
            .search_threshold
            .load(std::sync::atomic::Ordering::Relaxed);
        let weak = Arc::downgrade(&self.catalog);
        let me = self.me.clone();
        let access = self.access.clone();
        let embedder = self
            .embedder
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        catalog.apply(&self.registry, threshold, changed, || catalog::SearchTool {
            catalog: weak,
            access,
            embedder,
            activate: Arc::new(move |names: &[String]| {
                if let Some(bridge) = me.upgrade() {
                    bridge.activate(names);
                }
            }),
        })
    }

    /// Above `threshold` bridged tools, only the activated ones are offered (search mode).
    pub fn set_search_threshold(&self, threshold: usize) {
        self.search_threshold
            .store(threshold, std::sync::atomic::Ordering::Relaxed);
        let mut catalog = lock(&self.catalog);
        for failure in self.apply(&mut catalog, None) {
            tracing::warn!("{failure}");
        }
    }

    /// Activates bridged tools by name (search mode); returns whether any was not yet.
    pub fn activate(&self, names: &[String]) -> bool {
        let mut catalog = lock(&self.catalog);
        let known: Vec<String> = names
            .iter()
            .filter(|n| catalog.tools.values().flatten().any(|t| &t.name == *n))
            .filter(|n| !catalog.activated.contains(*n))
            .cloned()
            .collect();
        if known.is_empty() {
            return false;
        }
        catalog.activated.extend(known);
        for failure in self.apply(&mut catalog, None) {
            tracing::warn!("{failure}");
        }
        true
    }

    /// For the pipeline: activates a deferred tool a call names, so it resolves.
    pub fn activator(self: &Arc<Self>) -> talon_core::pipeline::DeferredActivator {
        let bridge = Arc::downgrade(self);
        Arc::new(move |name: &str| {
            bridge
                .upgrade()
                .is_some_and(|b| b.activate(&[name.to_string()]))
        })
    }

    /// For the pipeline: listings leave out bridged tools the caller's grants refuse.
    pub fn offer_filter(self: &Arc<Self>) -> Arc<dyn talon_core::pipeline::OfferFilter> {
        Arc::new(access::GrantFilter(Arc::downgrade(self)))
    }

    /// Every bridged tool's name, registered or deferred.
    pub fn tool_names(&self) -> Vec<String> {
        lock(&self.catalog)
            .tools
            .values()
            .flatten()
            .map(|t| t.name.clone())
            .collect()
    }
}

/// Re-lists the server's tools each time it says they changed (and at once with `list_now`),
/// until the server, its link or the bridge is gone.
async fn refresh_on_change(
    bridge: Weak<Bridge>,
    link: Weak<link::Link>,
    server: Weak<Server>,
    mut list_now: bool,
) {
    let Some(changed) = server.upgrade().map(|s| s.tools_changed()) else {
        return;
    };
    loop {
        if !list_now {
            changed.notified().await;
        }
        list_now = false;
        let (Some(server), Some(bridge), Some(link)) =
            (server.upgrade(), bridge.upgrade(), link.upgrade())
        else {
            return;
        };
        match server.tools(link.config.startup_timeout).await {
            Ok(tools) => {
                for failure in bridge.sync(&link, tools) {
                    tracing::warn!("{failure}");
                }
                tracing::info!(server = %link.name(), "MCP server's tools (re-)listed");
            }
            Err(e) => tracing::warn!(error = %e, "cannot list an MCP server's tools"),
        }
    }
}

/// Starts `config`'s server and lists its tools, within its start-up timeout.
async fn start_and_list(
    config: ServerConfig,
) -> Result<(Server, Vec<server::ListedTool>), ServerError> {
    let deadline = config.startup_timeout;
    let work = async {
        let server = Server::start(&config.name, &config.transport, deadline).await?;
        let tools = server.tools(deadline).await?;
        Ok::<_, ServerError>((server, tools))
    };
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or_else(|_| {
            Err(ServerError::Timeout {
                server: config.name.clone(),
                secs: deadline.as_secs(),
            })
        })
}

/// Starts and lists every server concurrently.
async fn futures_join(
    configs: &[ServerConfig],
) -> Vec<Result<(Server, Vec<server::ListedTool>), ServerError>> {
    let tasks: Vec<_> = configs
        .iter()
        .cloned()
        .map(|config| tokio::spawn(start_and_list(config)))
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for (task, config) in tasks.into_iter().zip(configs) {
        out.push(task.await.unwrap_or_else(|e| {
            Err(ServerError::Protocol {
                server: config.name.clone(),
                message: format!("the start-up task failed: {e}"),
            })
        }));
    }
    out
}
