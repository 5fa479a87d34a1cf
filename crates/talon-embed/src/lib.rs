//! Text embeddings for Talon's hybrid search.
//!
//! An [`Embedder`] turns texts into vectors that are close when the texts mean the same, whatever
//! words they use: what full-text search cannot do ("how do I get my money back" finds the
//! refund policy). Two kinds:
//! - [`OpenAiEmbedder`]: any server speaking OpenAI's `POST /v1/embeddings` (OpenAI, Ollama,
//!   vLLM, llama.cpp's server, LM Studio);
//! - `LocalEmbedder` (feature `local`): a BERT sentence model (all-MiniLM-L6-v2 and its kind)
//!   run in-process with candle, from model files in a directory; no network at all.
//!
//! Every vector an embedder returns is L2-normalised ([`normalize`]), so cosine similarity is a
//! dot product ([`dot`]) and the stores compare them as such. A vector is only ever compared with
//! vectors of the same [`Embedder::model`]: the name is stored with each one, and a changed model
//! means re-embedding, never mixing.
//!
//! Ranking: [`fuse`] combines a full-text ranking and a vector ranking (its docs say how and
//! why); [`bm25`] ranks short in-memory documents by words and [`nearest`] by meaning (tools,
//! skills, agents); [`CachedEmbedder`] remembers candidates' vectors between searches;
//! [`ConceptEmbedder`] is a fixed table of synonyms for tests.
//!
//! # Charter
//!
//! - **Owns:** embedders (local candle model, OpenAI-compatible, test doubles) and rank fusion.
//! - **Never contains:** storage or tools.
//! - **A new feature goes:** a new embedding provider.

mod bm25;
mod cache;
mod concepts;
mod fuse;
#[cfg(feature = "local")]
mod local;
mod nearest;
mod openai;
mod vector;

pub use bm25::{bm25, words};
pub use cache::{CACHE_ENTRIES, CachedEmbedder};
pub use concepts::ConceptEmbedder;
pub use fuse::{Fused, WORDS_WEIGHT, fuse};
#[cfg(feature = "local")]
pub use local::LocalEmbedder;
pub use nearest::{MIN_SIMILARITY, nearest, nearest_if};
pub use openai::{MAX_BATCH, OpenAiEmbedder};
pub use vector::{dot, normalize};

use futures::future::BoxFuture;

/// Why texts could not be embedded. Each message says what to check.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The embedding server could not be reached or did not answer in time.
    #[error("the embedding server at {url} is unreachable: {reason}")]
    Unreachable { url: String, reason: String },
    /// The server answered with an error status.
    #[error("the embedding server answered {status}: {body}")]
    Status { status: u16, body: String },
    /// The server's answer is not the embeddings asked for.
    #[error("the embedding server's answer is malformed: {0}")]
    Malformed(String),
    /// The local model's files could not be loaded or run.
    #[error("the local embedding model failed: {0}")]
    Model(String),
}

/// Something that embeds texts.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The model's name as stored with every vector it makes (vectors of different models are
    /// never compared).
    fn model(&self) -> &str;

    /// One normalised vector per text, in order.
    fn embed<'a>(&'a self, texts: &'a [String])
    -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
}
