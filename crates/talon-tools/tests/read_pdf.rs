//! Read on PDFs: text per page, the pages parameter, and the limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{pdf, pdf_with};

use std::sync::Arc;

use serde_json::{Value, json};
use talon_core::{CallContext, Pipeline, ToolCall};

async fn read(p: &Pipeline, ws: &std::path::Path, args: Value) -> (bool, String) {
    let mut ctx = CallContext::new("s");
    ctx.workspace = Some(ws.to_path_buf());
    let out = p.call(Arc::new(ctx), ToolCall::new("Read", args)).await;
    (out.output.is_error, out.output.for_llm)
}

#[tokio::test]
async fn pdf_pages() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("short.pdf"), pdf(3)).unwrap();
    std::fs::write(ws.join("long.pdf"), pdf(25)).unwrap();
    std::fs::write(ws.join("broken.pdf"), b"%PDF-1.4\nnot a pdf at all").unwrap();
    let p = common::pipeline(&talon_tools::BuiltinConfig::default());
    let path = |n: &str| ws.join(n).display().to_string();

    let (err, text) = read(&p, &ws, json!({"file_path": path("short.pdf")})).await;
    assert!(!err, "{text}");
    assert!(
        text.starts_with("PDF with 3 pages\n<page number=\"1\">\nThis is page 1\n</page>"),
        "{text}"
    );
    assert!(
        text.contains("<page number=\"3\">\nThis is page 3\n</page>"),
        "{text}"
    );

    let (err, text) = read(&p, &ws, json!({"file_path": path("long.pdf")})).await;
    assert!(err);
    assert!(
        text.starts_with("This PDF has 25 pages, which is too many to read at once."),
        "{text}"
    );
    let (err, text) = read(
        &p,
        &ws,
        json!({"file_path": path("long.pdf"), "pages": "24-"}),
    )
    .await;
    assert!(!err, "{text}");
    assert!(
        text.contains("This is page 24")
            && text.contains("This is page 25")
            && !text.contains("page 23"),
        "{text}"
    );
    let (err, text) = read(
        &p,
        &ws,
        json!({"file_path": path("long.pdf"), "pages": "1-21"}),
    )
    .await;
    assert!(err && text.starts_with("At most 20 pages"), "{text}");
    let (err, text) = read(
        &p,
        &ws,
        json!({"file_path": path("long.pdf"), "pages": "30"}),
    )
    .await;
    assert!(err && text.contains("this PDF has 25 pages"), "{text}");
    let (err, text) = read(
        &p,
        &ws,
        json!({"file_path": path("long.pdf"), "pages": "two"}),
    )
    .await;
    assert!(err && text.starts_with("invalid pages value"), "{text}");
    let (err, text) = read(&p, &ws, json!({"file_path": path("broken.pdf")})).await;
    assert!(err && text.starts_with("This PDF could not be"), "{text}");
}

/// A PDF whose text is larger than the helper's output limit is refused naming that limit (it
/// was reported as the time limit: the child blocked on the full pipe until the wall clock).
#[tokio::test]
async fn more_text_than_the_output_limit_names_that_limit() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("big.pdf"), pdf_with(20, |_| "x".repeat(215_000))).unwrap();
    let p = common::pipeline(&talon_tools::BuiltinConfig::default());
    let (err, text) = read(
        &p,
        &ws,
        json!({"file_path": ws.join("big.pdf").display().to_string(), "pages": "1-20"}),
    )
    .await;
    assert!(err, "{}", &text[..text.len().min(300)]);
    assert!(text.contains("output limit (4 MiB of text)"), "{text}");
}
