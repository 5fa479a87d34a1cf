//! An embedding server speaking OpenAI's `POST {base_url}/embeddings`: OpenAI itself, Ollama,
//! vLLM, llama.cpp's server, LM Studio. Texts go in batches of at most [`MAX_BATCH`]; the
//! answer's `data[].index` puts vectors back in order, and every answer is checked (one vector
//! per text, all of one length) before it is believed.

use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;

use crate::{EmbedError, Embedder, normalize};

/// The most texts sent in one request (servers limit the batch; 64 suits them all).
pub const MAX_BATCH: usize = 64;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(60);
/// How much of an error answer is quoted.
const QUOTED_BODY: usize = 500;

/// An OpenAI-compatible embedding server.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    base_url: String,
    /// The model's name sent to the server.
    server_model: String,
    api_key: Option<String>,
    dimensions: Option<u32>,
    /// What [`Embedder::model`] says: the model and, when asked for, its dimensions.
    name: String,
}

impl OpenAiEmbedder {
    /// A server at `base_url` (ending in `/v1`), model `model`, with a bearer `api_key` when
    /// the server wants one; `dimensions` asks models that can shorten their vectors
    /// (OpenAI's `text-embedding-3-*`) for that many.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        dimensions: Option<u32>,
    ) -> Result<Self, EmbedError> {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| EmbedError::Unreachable {
                url: base_url.to_string(),
                reason: e.to_string(),
            })?;
        let name = match dimensions {
            Some(d) => format!("{model}@{d}"),
            None => model.to_string(),
        };
        Ok(Self {
            client,
            base_url: base_url.trim_end_matches('/').to_string(),
            server_model: model.to_string(),
            api_key,
            dimensions,
            name,
        })
    }

    async fn batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let url = format!("{}/embeddings", self.base_url);
        let mut body = serde_json::json!({"model": self.server_model, "input": texts});
        if let Some(d) = self.dimensions {
            body["dimensions"] = d.into();
        }
        let mut request = self.client.post(&url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let unreachable = |e: reqwest::Error| EmbedError::Unreachable {
            url: url.clone(),
            reason: e.to_string(),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let text = response.text().await.map_err(unreachable)?;
        if !status.is_success() {
            let mut body: String = text.chars().take(QUOTED_BODY).collect();
            if text.len() > body.len() {
                body.push('…');
            }
            return Err(EmbedError::Status {
                status: status.as_u16(),
                body,
            });
        }
        parse(&text, texts.len())
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// The vectors of an answer to `expected` texts, in the texts' order, normalised.
fn parse(text: &str, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let answer: Answer = serde_json::from_str(text)
        .map_err(|e| EmbedError::Malformed(format!("not an embeddings answer ({e})")))?;
    if answer.data.len() != expected {
        return Err(EmbedError::Malformed(format!(
            "{} vectors for {expected} texts",
            answer.data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in answer.data.into_iter().enumerate() {
        let index = item.index.unwrap_or(position);
        match slots.get_mut(index) {
            Some(slot @ None) => *slot = Some(item.embedding),
            _ => {
                return Err(EmbedError::Malformed(format!(
                    "index {index} is out of range or repeated"
                )));
            }
        }
    }
    let mut vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
    let dims = vectors.first().map_or(0, Vec::len);
    if dims == 0 || vectors.iter().any(|v| v.len() != dims) {
        return Err(EmbedError::Malformed(
            "vectors are empty or of different lengths".into(),
        ));
    }
    vectors.iter_mut().for_each(|v| normalize(v));
    Ok(vectors)
}

impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.name
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(texts.len());
            for batch in texts.chunks(MAX_BATCH) {
                out.extend(self.batch(batch).await?);
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_and_put_in_order() {
        let v = parse(
            r#"{"data": [{"embedding": [0, 2], "index": 1}, {"embedding": [3, 4], "index": 0}]}"#,
            2,
        )
        .unwrap();
        assert_eq!(v, [vec![0.6, 0.8], vec![0.0, 1.0]]);
        for (bad, why) in [
            (r#"{"data": [{"embedding": [1]}]}"#, "1 vectors for 2 texts"),
            (
                r#"{"data": [{"embedding": [1], "index": 0}, {"embedding": [1], "index": 0}]}"#,
                "repeated",
            ),
            (
                r#"{"data": [{"embedding": [1]}, {"embedding": [1, 2]}]}"#,
                "different lengths",
            ),
            (r#"{"error": "nope"}"#, "not an embeddings answer"),
        ] {
            let err = parse(bad, 2).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
