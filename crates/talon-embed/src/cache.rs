//! An embedder that remembers: texts embedded before are answered from memory. For rankings
//! that embed the same candidates at every search (the agents one may delegate to, the tools of
//! MCP servers): only the query and new or changed candidates reach the model. Bounded: past
//! [`CACHE_ENTRIES`] texts the memory starts over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::{EmbedError, Embedder};

/// The most texts remembered.
pub const CACHE_ENTRIES: usize = 4096;

/// `inner`, remembering its vectors.
#[derive(Debug, Clone)]
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    memory: Arc<Mutex<HashMap<String, Vec<f32>>>>,
}

impl CachedEmbedder {
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        Self {
            inner,
            memory: Arc::default(),
        }
    }
}

impl Embedder for CachedEmbedder {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let known: Vec<Option<Vec<f32>>> = {
                let memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
                texts.iter().map(|t| memory.get(t).cloned()).collect()
            };
            let missing: Vec<String> = texts
                .iter()
                .zip(&known)
                .filter(|(_, k)| k.is_none())
                .map(|(t, _)| t.clone())
                .collect();
            let mut fresh = if missing.is_empty() {
                Vec::new()
            } else {
                self.inner.embed(&missing).await?
            }
            .into_iter();
            let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            if memory.len() + missing.len() > CACHE_ENTRIES {
                memory.clear();
            }
            let mut out = Vec::with_capacity(texts.len());
            for (text, known) in texts.iter().zip(known) {
                match known {
                    Some(v) => out.push(v),
                    None => {
                        let v = fresh.next().ok_or_else(|| {
                            EmbedError::Malformed("fewer vectors than texts".into())
                        })?;
                        memory.insert(text.clone(), v.clone());
                        out.push(v);
                    }
                }
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    impl Embedder for Counting {
        fn model(&self) -> &str {
            "counting"
        }
        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            self.0.fetch_add(texts.len(), Ordering::Relaxed);
            Box::pin(async move { Ok(texts.iter().map(|t| vec![t.len() as f32]).collect()) })
        }
    }

    #[tokio::test]
    async fn only_new_texts_reach_the_model() {
        let inner = Arc::new(Counting::default());
        let cached = CachedEmbedder::new(Arc::clone(&inner) as Arc<dyn Embedder>);
        let texts = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let v = cached.embed(&texts(&["a", "bb"])).await.unwrap();
        assert_eq!(v, [vec![1.0], vec![2.0]]);
        let v = cached.embed(&texts(&["bb", "ccc", "a"])).await.unwrap();
        assert_eq!(v, [vec![2.0], vec![3.0], vec![1.0]]);
        assert_eq!(
            inner.0.load(Ordering::Relaxed),
            3,
            "a and bb were remembered"
        );
        assert_eq!(cached.model(), "counting");
    }
}
