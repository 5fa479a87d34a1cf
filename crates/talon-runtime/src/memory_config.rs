//! `[memory.embeddings]`: the model that embeds memory chunks for hybrid search. Without it,
//! `memory_search` is full-text only and says so.
//!
//! ```toml
//! [memory.embeddings]                     # an OpenAI-compatible server
//! provider = "openai"
//! base_url = "http://127.0.0.1:11434/v1"  # Ollama; or OpenAI, vLLM, llama.cpp, LM Studio
//! model = "nomic-embed-text"
//! api_key_env = "OPENAI_API_KEY"          # or api_key_secret = "NAME"; none for local servers
//! dimensions = 512                        # optional, for models that can shorten vectors
//!
//! [memory.embeddings]                     # or the local model (feature local-embeddings)
//! provider = "local"
//! path = "/srv/models/all-MiniLM-L6-v2"   # config.json, tokenizer.json, model.safetensors
//! model = "all-MiniLM-L6-v2"              # optional: the name its vectors are kept under
//! ```
//!
//! Changing the model (or its dimensions) re-embeds every chunk in the background; searches go
//! on meanwhile, ranking the chunks not yet embedded by their words alone.
//!
//! `[memory] knowledge_graph = true` has each agent's model extract entities and relations from
//! its memory documents as they are written (in the background; `knowledge_graph_search`).

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use talon_embed::Embedder;
use talon_store::Store;

use crate::config::ConfigError;

/// `[memory]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemorySection {
    /// `[memory.embeddings]`; none: full-text search only.
    pub embeddings: Option<EmbeddingsSection>,
    /// Extract a knowledge graph from memory documents with each agent's model (off by
    /// default: every memory write then costs a model request, in the background).
    pub knowledge_graph: bool,
}

impl MemorySection {
    /// How memory is searched with this configuration on `store`, in a line (`talon doctor`):
    /// hybrid or full text and why, what compares vectors, and how many chunks are embedded.
    pub async fn status(&self, store: &Store) -> String {
        let search = self.search_status(store).await;
        if !self.knowledge_graph {
            return format!("{search}; knowledge graph off");
        }
        match store.extraction_backlog().await {
            Ok((waiting, failed)) if failed.is_empty() => {
                format!(
                    "{search}; knowledge graph on, {waiting} document(s) waiting for extraction"
                )
            }
            Ok((waiting, failed)) => format!(
                "{search}; knowledge graph on, {waiting} document(s) waiting, {} given up ({})",
                failed.len(),
                failed
                    .iter()
                    .map(|(path, error)| format!("{path}: {error}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Err(e) => format!("{search}; knowledge graph unavailable: {e}"),
        }
    }

    async fn search_status(&self, store: &Store) -> String {
        let backend = match store.vector_backend().await {
            Ok(b) => b,
            Err(e) => return format!("unavailable: {e}"),
        };
        let Some(section) = &self.embeddings else {
            return format!(
                "full text only: no [memory.embeddings] is configured (vectors would be compared by {backend})"
            );
        };
        match section.embedder(store).await {
            Ok(embedder) => {
                let model = embedder.model().to_string();
                match store.embedding_progress(&model).await {
                    Ok(p) => format!(
                        "hybrid: words and meaning, embedding model {model} ({}); vectors compared by {backend}; {} of {} chunks embedded",
                        section.provider, p.embedded, p.chunks
                    ),
                    Err(e) => format!("hybrid, embedding model {model}; progress unavailable: {e}"),
                }
            }
            Err(e) => format!("full text only: {}", e.0),
        }
    }
}

/// `[memory.embeddings]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsSection {
    /// `openai` (any OpenAI-compatible `/v1/embeddings`) or `local`.
    pub provider: String,
    /// `openai`: the server's base URL, ending in `/v1`.
    pub base_url: Option<String>,
    /// `openai`: the model's name. `local`: the name its vectors are stored under (default
    /// `local:` and the directory's name).
    pub model: Option<String>,
    /// `openai`: the environment variable holding the key.
    pub api_key_env: Option<String>,
    /// `openai`: the store secret holding the key (`talon secrets set NAME`).
    pub api_key_secret: Option<String>,
    /// `openai`: shorter vectors, for models that offer them.
    pub dimensions: Option<u32>,
    /// `local`: the model's directory.
    pub path: Option<PathBuf>,
}

impl EmbeddingsSection {
    /// The problems a start would report, without loading anything.
    pub fn check(&self) -> Result<(), ConfigError> {
        let missing = |field: &str| {
            ConfigError(format!(
                "memory.embeddings: provider = {:?} needs {field}",
                self.provider
            ))
        };
        match self.provider.as_str() {
            "openai" => {
                let url = self
                    .base_url
                    .as_deref()
                    .ok_or_else(|| missing("base_url"))?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError(format!(
                        "memory.embeddings.base_url {url:?}: an http:// or https:// URL ending in /v1"
                    )));
                }
                self.model.as_deref().ok_or_else(|| missing("model"))?;
                Ok(())
            }
            "local" => {
                self.path.as_ref().ok_or_else(|| missing("path"))?;
                if cfg!(feature = "local-embeddings") {
                    Ok(())
                } else {
                    Err(ConfigError(
                        "memory.embeddings: provider = \"local\" needs a Talon built with the \
                         local-embeddings feature (the default); this one was built without it"
                            .into(),
                    ))
                }
            }
            other => Err(ConfigError(format!(
                "memory.embeddings.provider {other:?}: \"openai\" or \"local\""
            ))),
        }
    }

    /// The embedder (the local model's files are checked here, its weights read on first use).
    pub async fn embedder(&self, store: &Store) -> Result<Arc<dyn Embedder>, ConfigError> {
        self.check()?;
        match self.provider.as_str() {
            "local" => self.local(),
            _ => {
                let key = self.api_key(store).await?;
                let embedder = talon_embed::OpenAiEmbedder::new(
                    self.base_url.as_deref().unwrap_or_default(),
                    self.model.as_deref().unwrap_or_default(),
                    key,
                    self.dimensions,
                )
                .map_err(|e| ConfigError(format!("memory.embeddings: {e}")))?;
                Ok(Arc::new(embedder))
            }
        }
    }

    #[cfg(feature = "local-embeddings")]
    fn local(&self) -> Result<Arc<dyn Embedder>, ConfigError> {
        let path = self.path.clone().unwrap_or_default();
        talon_embed::LocalEmbedder::load(&path, self.model.as_deref())
            .map(|e| Arc::new(e) as Arc<dyn Embedder>)
            .map_err(|e| ConfigError(format!("memory.embeddings.path: {e}")))
    }

    #[cfg(not(feature = "local-embeddings"))]
    fn local(&self) -> Result<Arc<dyn Embedder>, ConfigError> {
        // `check` refused it already.
        Err(ConfigError(
            "memory.embeddings: this Talon was built without the local-embeddings feature".into(),
        ))
    }

    async fn api_key(&self, store: &Store) -> Result<Option<String>, ConfigError> {
        crate::chat_config::key_from(
            "memory.embeddings",
            "api_key",
            self.api_key_secret.as_deref(),
            self.api_key_env.as_deref(),
            store,
        )
        .await
    }
}
