//! Issue 22 item 8: `memory_search` queries are bounded where every search passes (the store),
//! and the model is told the limit and how to fix its query, not that memory is unavailable.

use std::sync::Arc;

use serde_json::json;
use talon_core::ToolCall;
use talon_store::{MAX_MEMORY_QUERY_BYTES, Store, StoreConfig};
use talon_tools::BuiltinConfig;

use crate::common;

#[tokio::test]
async fn h22_8_memory_search_tells_the_model_the_query_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&StoreConfig::sqlite_in(dir.path()))
        .await
        .unwrap();
    store
        .put_memory("default", "", "MEMORY.md", "The cat likes tuna.")
        .await
        .unwrap();
    let pipeline = common::pipeline(&BuiltinConfig {
        store: Some(store),
        ..BuiltinConfig::default()
    });
    let call = |query: String| {
        let ctx = common::context(dir.path(), "s");
        pipeline.call(
            Arc::new(ctx),
            ToolCall::new("memory_search", json!({ "query": query })),
        )
    };
    let out = call("cat ".repeat(500)).await.output;
    assert!(out.is_error, "{}", out.for_llm);
    assert!(
        out.for_llm.contains("2000 bytes")
            && out.for_llm.contains(&MAX_MEMORY_QUERY_BYTES.to_string())
            && out.for_llm.contains("distinctive words")
            && !out.for_llm.contains("unavailable"),
        "{}",
        out.for_llm
    );
    // Repeated words within the limit count once and still find the passage.
    let out = call("cat tuna ".repeat(100)).await.output;
    assert!(
        !out.is_error && out.for_llm.contains("MEMORY.md"),
        "{}",
        out.for_llm
    );
}
