//! The mock's `POST /v1/embeddings`, as OpenAI documents it (`input` a string or a list of
//! strings; `data[].embedding` with its `index`), so the OpenAI-compatible embedder can be run
//! against it. The vectors come from the embedder the server was started with (`talon
//! mock-provider --embedding-model DIR`: the local sentence model, so meaning is real), else
//! from a bag of hashed words ([`hashed_words`]: texts sharing words are near, nothing more).
//! `GET /_mock/embeddings` says how many texts were embedded.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::MockState;

/// Dimensions of [`hashed_words`] vectors.
const HASHED_DIMS: usize = 256;

/// A deterministic vector of `text`: each lowercase word adds 1 at its hash's position; then
/// normalised. Texts sharing words are near; paraphrases are not.
pub fn hashed_words(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; HASHED_DIMS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        // FNV-1a: stable across runs and platforms.
        let mut hash: u32 = 0x811c_9dc5;
        for b in word.to_lowercase().bytes() {
            hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        v[hash as usize % HASHED_DIMS] += 1.0;
    }
    talon_embed::normalize(&mut v);
    v
}

fn bad_request(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": {"message": message, "type": "invalid_request_error"}})),
    )
        .into_response()
}

pub(super) async fn embeddings(
    State(state): State<Arc<MockState>>,
    Json(body): Json<Value>,
) -> Response {
    let texts: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => {
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect();
            match strings {
                Some(s) if !s.is_empty() => s,
                _ => return bad_request("input must be a string or a non-empty list of strings"),
            }
        }
        _ => return bad_request("input must be a string or a non-empty list of strings"),
    };
    let vectors = match &state.embedder {
        Some(embedder) => match embedder.embed(&texts).await {
            Ok(v) => v,
            Err(e) => {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"error": {"message": e.to_string()}})),
                )
                    .into_response();
            }
        },
        None => texts.iter().map(|t| hashed_words(t)).collect(),
    };
    state.embedded.fetch_add(texts.len(), Ordering::Relaxed);
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, embedding)| json!({"object": "embedding", "index": index, "embedding": embedding}))
        .collect();
    let tokens: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    Json(json!({
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

pub(super) async fn embedded(State(state): State<Arc<MockState>>) -> Json<Value> {
    Json(json!({"texts": state.embedded.load(Ordering::Relaxed)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_words_are_near_when_they_share_words() {
        let a = hashed_words("the refund policy");
        let b = hashed_words("Refund policy!");
        let c = hashed_words("money back");
        assert!(talon_embed::dot(&a, &b) > 0.8);
        assert!(talon_embed::dot(&a, &c) < 0.2);
        assert_eq!(a, hashed_words("the refund policy"), "deterministic");
    }
}
