//! The OpenAI-compatible embedder against a local server speaking the documented
//! `POST /v1/embeddings` (batches, order by `index`, errors). The local model is tested where
//! its files are provisioned: `talon`'s `knowledge` tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use talon_embed::{EmbedError, Embedder, MAX_BATCH, OpenAiEmbedder, dot};

#[derive(Clone, Default)]
struct Seen {
    batches: Arc<Mutex<Vec<usize>>>,
    auth: Arc<Mutex<Vec<String>>>,
}

/// A vector per text: its length and its first byte, in reverse order of `index` so the client
/// must sort.
async fn embeddings(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if body["model"] == "broken" {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"message": "model not found"}})),
        );
    }
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    seen.batches.lock().unwrap().push(inputs.len());
    if let Some(auth) = headers.get("authorization") {
        seen.auth
            .lock()
            .unwrap()
            .push(auth.to_str().unwrap().to_string());
    }
    let mut data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let t = t.as_str().unwrap();
            json!({"object": "embedding", "index": i,
                   "embedding": [t.len() as f32, f32::from(t.as_bytes()[0])]})
        })
        .collect();
    data.reverse();
    (
        StatusCode::OK,
        Json(json!({"object": "list", "data": data, "model": body["model"]})),
    )
}

async fn server() -> (String, Seen) {
    let seen = Seen::default();
    let app = axum::Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), seen)
}

#[tokio::test]
async fn an_openai_compatible_server_embeds_in_batches_and_in_order() {
    let (url, seen) = server().await;
    let embedder =
        OpenAiEmbedder::new(&url, "nomic-embed-text", Some("sk-test".into()), None).unwrap();
    assert_eq!(embedder.model(), "nomic-embed-text");
    let texts: Vec<String> = (0..MAX_BATCH + 6).map(|i| "x".repeat(i + 1)).collect();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert_eq!(vectors.len(), texts.len());
    assert_eq!(*seen.batches.lock().unwrap(), [MAX_BATCH, 6]);
    assert!(
        seen.auth
            .lock()
            .unwrap()
            .iter()
            .all(|a| a == "Bearer sk-test")
    );
    for (text, v) in texts.iter().zip(&vectors) {
        // In the texts' order (the server answered in reverse), normalised.
        let mut expected = [text.len() as f32, f32::from(b'x')];
        let norm = expected.iter().map(|x| x * x).sum::<f32>().sqrt();
        expected.iter_mut().for_each(|x| *x /= norm);
        assert!((v[0] - expected[0]).abs() < 1e-6, "{text}: {v:?}");
        assert!((dot(v, v) - 1.0).abs() < 1e-5);
    }
    let named = OpenAiEmbedder::new(&url, "text-embedding-3-small", None, Some(256)).unwrap();
    assert_eq!(
        named.model(),
        "text-embedding-3-small@256",
        "shortened vectors are another model's"
    );
}

#[tokio::test]
async fn errors_say_what_failed() {
    let (url, _) = server().await;
    let broken = OpenAiEmbedder::new(&url, "broken", None, None).unwrap();
    let err = broken.embed(&["a".to_string()]).await.unwrap_err();
    assert!(
        matches!(err, EmbedError::Status { status: 400, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("model not found"), "{err}");
    let nowhere = OpenAiEmbedder::new("http://127.0.0.1:9/v1", "m", None, None).unwrap();
    let err = nowhere.embed(&["a".to_string()]).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("the embedding server at http://127.0.0.1:9/v1/embeddings is unreachable"),
        "{err}"
    );
    assert!(broken.embed(&[]).await.unwrap().is_empty(), "nothing to do");
}
