//! Fixtures shared by the tool integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, Pipeline, Registry};
use talon_tools::BuiltinConfig;

pub mod http;

/// A pipeline over the built-in tools registered with `config`, without rate limits.
pub fn pipeline(config: &BuiltinConfig) -> Pipeline {
    let registry = Arc::new(Registry::new());
    talon_tools::register_builtin(&registry, config).unwrap();
    Pipeline::builder(registry)
        .rate_limiter(None)
        .build()
        .unwrap()
}

/// A call context in `workspace` for `session`, with every tool allowed to run.
pub fn context(workspace: &Path, session: &str) -> CallContext {
    let mut ctx = CallContext::new(session);
    ctx.workspace = Some(workspace.to_path_buf());
    ctx.permission_mode = PermissionMode::BypassPermissions;
    ctx
}

/// A real PDF with `pages` pages, page N saying "This is page N".
pub fn pdf(pages: usize) -> Vec<u8> {
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
