//! Fixtures shared by the tool integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use serde_json::Value;
use talon_core::permission::PermissionMode;
use talon_core::{CallContext, CallOutcome, Pipeline, Registry, ToolCall};
use talon_tools::BuiltinConfig;

pub mod http;

/// A pipeline over the built-in tools registered with `config`, without rate limits.
pub fn pipeline(config: &BuiltinConfig) -> Pipeline {
    let registry = Arc::new(Registry::new());
    talon_tools::register_builtin(&registry, config).unwrap();
    pipeline_over(registry)
}

/// A pipeline over `registry`, without rate limits.
pub fn pipeline_over(registry: Arc<Registry>) -> Pipeline {
    use_parse_helper();
    Pipeline::builder(registry)
        .rate_limiter(None)
        .script_analyzer(Arc::new(talon_tools::runtime::script::ShellAnalyzer))
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

/// A workspace `ws` and a directory `outside` beside it (both canonical), under the target
/// directory: the sandbox's private /tmp would hide a directory beside a workspace in /tmp.
pub struct Beside {
    pub dir: tempfile::TempDir,
    pub ws: std::path::PathBuf,
    pub outside: std::path::PathBuf,
}

/// A fresh [`Beside`] whose workspace holds the directory `sub` (a relative path).
pub fn beside(sub: &str) -> Beside {
    let dir = tempfile::tempdir_in(sandbox_visible_tmp()).unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, outside) = (root.join("ws"), root.join("outside"));
    std::fs::create_dir_all(ws.join(sub)).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    Beside { dir, ws, outside }
}

/// A temporary directory whose `ws` is the workspace, and a pipeline over the built-in tools,
/// for calling tools as session `s1` (or another) would and looking at the disk after.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub pipeline: Pipeline,
}

impl Workspace {
    /// The tools of `config` over `dir`, which holds the workspace `ws`.
    pub fn new(dir: tempfile::TempDir, config: &BuiltinConfig) -> Self {
        let pipeline = pipeline(config);
        Workspace { dir, pipeline }
    }

    pub fn ws(&self) -> std::path::PathBuf {
        std::fs::canonicalize(self.dir.path().join("ws")).unwrap()
    }

    pub fn abs(&self, rel: &str) -> String {
        self.ws().join(rel).display().to_string()
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.ws().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws().join(rel)).unwrap()
    }

    pub async fn call_as(&self, session: &str, tool: &str, args: Value) -> CallOutcome {
        let ctx = context(&self.ws(), session);
        self.pipeline
            .call(Arc::new(ctx), ToolCall::new(tool, args))
            .await
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallOutcome {
        self.call_as("s1", tool, args).await
    }

    /// The answer of a call that passed every stage.
    pub async fn ok(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args.clone()).await;
        assert_eq!(
            out.failed_stage, None,
            "{tool} {args}: {}",
            out.output.for_llm
        );
        out.output.for_llm
    }

    /// The answer of a call that failed.
    pub async fn err(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args.clone()).await;
        assert!(
            out.output.is_error,
            "{tool} {args} should fail: {}",
            out.output.for_llm
        );
        out.output.for_llm
    }
}

/// Points `talon_tools::untrusted_parse` at this crate's parsers' helper (reading a PDF, a
/// notebook or a fetched web page needs it).
pub fn use_parse_helper() {
    talon_tools::untrusted_parse::set_helper(
        env!("CARGO_BIN_EXE_talon-parse-helper").into(),
        Vec::new(),
    );
}

/// A real PDF with `pages` pages, page N saying "This is page N". Reading it needs the parsers'
/// helper process.
pub fn pdf(pages: usize) -> Vec<u8> {
    pdf_with(pages, |n| format!("This is page {n}"))
}

/// A real PDF with `pages` pages, page N holding `text(N)`.
pub fn pdf_with(pages: usize, text: impl Fn(usize) -> String) -> Vec<u8> {
    use_parse_helper();
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
                Operation::new("Tj", vec![Object::string_literal(text(n))]),
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

/// A directory for fixtures that sandboxed commands must see: the target directory's scratch
/// space, unless that lies under `/tmp` (a clone or `CARGO_TARGET_DIR` there), which the sandbox
/// replaces with a private `/tmp`; then `/var/tmp`.
pub fn sandbox_visible_tmp() -> std::path::PathBuf {
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    if target.starts_with("/tmp") {
        std::path::PathBuf::from("/var/tmp")
    } else {
        target.to_path_buf()
    }
}
