//! The background indexer: gives every memory chunk a vector of the configured embedding model.
//!
//! Writing a memory document (any tool, any entry point: they all go through the store) chunks
//! it in the same transaction and wakes this task; the chunks are embedded here, never in the
//! write, so a slow or unreachable embedder never holds up a write and a failed batch is simply
//! tried again (after 1 s, doubling to a minute while it keeps failing). A changed model finds
//! every chunk without its vectors and re-embeds them all, batch by batch, while searches go on.
//! Writes by other gateways on the same database are picked up by polling every few seconds.
//! Two gateways embedding the same chunk both store the same vector: wasted work, never a wrong
//! answer.

use std::sync::Arc;
use std::time::Duration;

use talon_embed::{EmbedError, Embedder};
use talon_store::{ChunkVector, Store, StoreError};

/// Chunks embedded per pass.
const BATCH: i64 = 32;
/// How often the store is looked at when nothing was written here.
const POLL: Duration = Duration::from_secs(3);
/// The longest wait after failures.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Characters of a chunk sent to the embedder: a chunk is ~1000 characters, but a single long
/// line is a chunk of its own, and servers refuse texts beyond their model's window.
const MAX_EMBEDDED_CHARS: usize = 4000;

/// Starts the indexer for `embedder`'s model on `store`.
pub fn spawn(store: Store, embedder: Arc<dyn Embedder>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Duration::from_secs(1);
        loop {
            match pass(&store, embedder.as_ref()).await {
                Ok(0) => {
                    backoff = Duration::from_secs(1);
                    tokio::select! {
                        () = store.memory_written() => {}
                        () = tokio::time::sleep(POLL) => {}
                    }
                }
                Ok(_) => backoff = Duration::from_secs(1),
                Err(e) => {
                    tracing::warn!(model = embedder.model(), error = %e, retry_in = ?backoff, "cannot embed memory chunks");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    })
}

/// Why a pass embedded nothing (the next one tries again).
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The embedding model failed or could not be reached.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Embeds one batch of waiting chunks; how many.
pub async fn pass(store: &Store, embedder: &dyn Embedder) -> Result<usize, IndexError> {
    let model = embedder.model();
    let waiting = store.chunks_to_embed(model, BATCH).await?;
    if waiting.is_empty() {
        return Ok(0);
    }
    let texts: Vec<String> = waiting
        .iter()
        .map(|(_, content)| content.chars().take(MAX_EMBEDDED_CHARS).collect())
        .collect();
    let vectors = embedder.embed(&texts).await?;
    let vectors: Vec<ChunkVector> = waiting
        .iter()
        .zip(vectors)
        .map(|((chunk, _), vector)| ChunkVector {
            chunk: *chunk,
            vector,
        })
        .collect();
    store.put_chunk_vectors(model, &vectors).await?;
    Ok(vectors.len())
}
