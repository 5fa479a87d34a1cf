//! An embedder from a fixed table of concepts: each concept is a list of words meaning the same
//! thing, and a text's vector counts its words per concept. Texts using different words for the
//! same concepts are near. For tests and demos of hybrid ranking where a real model is not
//! wanted (a few milliseconds, no files); never a substitute for one.

use futures::future::BoxFuture;

use crate::{EmbedError, Embedder, normalize};

/// Words per concept; dimension `i` is concept `i`, and one more for words of no concept.
#[derive(Debug, Clone)]
pub struct ConceptEmbedder {
    concepts: Vec<Vec<String>>,
}

impl ConceptEmbedder {
    pub fn new(concepts: &[&[&str]]) -> Self {
        Self {
            concepts: concepts
                .iter()
                .map(|words| words.iter().map(|w| w.to_lowercase()).collect())
                .collect(),
        }
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.concepts.len() + 1];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
        {
            let dim = self
                .concepts
                .iter()
                .position(|c| c.contains(&word))
                .unwrap_or(self.concepts.len());
            // Words of no concept weigh little: they are what the concepts are not about.
            v[dim] += if dim == self.concepts.len() { 0.1 } else { 1.0 };
        }
        normalize(&mut v);
        v
    }
}

impl Embedder for ConceptEmbedder {
    fn model(&self) -> &str {
        "concepts"
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move { Ok(texts.iter().map(|t| self.vector(t)).collect()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot;

    #[test]
    fn synonyms_are_near() {
        let e = ConceptEmbedder::new(&[&["sum", "total", "add"], &["echo", "repeat"]]);
        let sum = e.vector("Returns the sum of two numbers");
        assert!(dot(&sum, &e.vector("what is the total")) > 0.9);
        assert!(dot(&sum, &e.vector("repeat my words")) < 0.1);
    }
}
