//! Read on PDFs: text per page, the pages parameter, and the limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use serde_json::{Value, json};
use talon_core::{CallContext, Pipeline, Registry, ToolCall};

/// A real PDF with `pages` pages, page N saying "This is page N".
fn pdf(pages: usize) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Courier",
    });
    let resources_id = doc.add_object(dictionary! {
        "Font" => dictionary! { "F1" => font_id },
    });
    let mut kids: Vec<Object> = Vec::new();
    for n in 1..=pages {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 24.into()]),
                Operation::new("Td", vec![100.into(), 600.into()]),
                Operation::new(
                    "Tj",
                    vec![Object::string_literal(format!("This is page {n}"))],
                ),
                Operation::new("ET", vec![]),
            ],
        };
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "Contents" => content_id,
        });
        kids.push(page_id.into());
    }
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => kids,
            "Count" => pages as i64,
            "Resources" => resources_id,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

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
    let registry = Arc::new(Registry::new());
    talon_tools::register_builtin(&registry, &talon_tools::BuiltinConfig::default()).unwrap();
    let p = Pipeline::builder(registry)
        .rate_limiter(None)
        .build()
        .unwrap();
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
