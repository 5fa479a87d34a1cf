//! glob / search (GoClaw) and Glob / Grep (Claude Code) over one engine, through the pipeline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use talon_core::{Pipeline, ToolCall};
use talon_tools::{BuiltinConfig, FsConfig};

struct Env {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    pipeline: Pipeline,
}

fn set_mtime(path: &std::path::Path, secs_ago: u64) {
    let t = SystemTime::now() - Duration::from_secs(secs_ago);
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(t).unwrap();
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    let files: &[(&str, &str, u64)] = &[
        (
            "src/main.rs",
            "fn main() {\n    let token = 1;\n    println!(\"hello\");\n}\n",
            300,
        ),
        (
            "src/lib.rs",
            "pub fn hello() -> &'static str {\n    \"Hello\"\n}\n",
            200,
        ),
        ("src/deep/mod.rs", "// hello from deep\n", 100),
        ("web/app.ts", "export const hello = 1;\n", 50),
        ("web/app.tsx", "export const Hello = () => null;\n", 40),
        (".hidden/h.rs", "// hello hidden\n", 30),
        ("ignored/x.rs", "// hello ignored\n", 20),
        ("private/p.rs", "// hello private\n", 10),
        (".git/config", "hello git\n", 5),
        ("bin.dat", "hello\0binary", 1),
    ];
    for (path, content, age) in files {
        let p = ws.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        set_mtime(&p, *age);
    }
    std::fs::write(ws.join(".gitignore"), "ignored/\n").unwrap();
    let config = BuiltinConfig {
        fs: FsConfig::new(vec!["private".into()], vec![]),
        store: None,
        ..BuiltinConfig::default()
    };
    let pipeline = common::pipeline(&config);
    Env {
        _dir: dir,
        ws,
        pipeline,
    }
}

impl Env {
    async fn call(&self, tool: &str, args: Value) -> (bool, String) {
        let ctx = common::context(&self.ws, "s");
        let out = self
            .pipeline
            .call(Arc::new(ctx), ToolCall::new(tool, args))
            .await;
        (out.output.is_error, out.output.for_llm)
    }

    async fn ok(&self, tool: &str, args: Value) -> String {
        let (err, text) = self.call(tool, args.clone()).await;
        assert!(!err, "{tool} {args}: {text}");
        text
    }

    fn abs(&self, rel: &str) -> String {
        self.ws.join(rel).display().to_string()
    }
}

#[tokio::test]
async fn goclaw_glob() {
    let e = env();
    let text = e.ok("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(
        text,
        ".hidden/h.rs\nignored/x.rs\nsrc/deep/mod.rs\nsrc/lib.rs\nsrc/main.rs"
    );
    let text = e
        .ok("glob", json!({"pattern": "*.{ts,tsx}", "path": "web"}))
        .await;
    assert_eq!(text, "web/app.ts\nweb/app.tsx");
    assert!(
        e.ok("glob", json!({"pattern": "*.nothing"}))
            .await
            .starts_with("No files match")
    );
    let (err, text) = e.call("glob", json!({"pattern": "[", "path": "."})).await;
    assert!(err && text.contains("invalid glob"), "{text}");
}

#[tokio::test]
async fn goclaw_search_modes() {
    let e = env();
    let text = e.ok("search", json!({"pattern": "hello"})).await;
    assert!(
        text.contains("src/main.rs:3: ") && text.contains("src/deep/mod.rs:1: // hello from deep"),
        "{text}"
    );
    assert!(
        !text.contains("ignored")
            && !text.contains(".hidden")
            && !text.contains("private")
            && !text.contains(".git"),
        "{text}"
    );
    assert!(
        !text.contains("bin.dat"),
        "binary files are skipped: {text}"
    );
    let text = e
        .ok(
            "search",
            json!({"pattern": "HELLO", "ignore_case": true, "output_mode": "files_with_matches"}),
        )
        .await;
    assert_eq!(
        text,
        "src/deep/mod.rs\nsrc/lib.rs\nsrc/main.rs\nweb/app.ts\nweb/app.tsx"
    );
    let text = e
        .ok(
            "search",
            json!({"pattern": "hello", "type": "rust", "output_mode": "count"}),
        )
        .await;
    assert_eq!(text, "src/deep/mod.rs:1\nsrc/lib.rs:1\nsrc/main.rs:1");
    let text = e
        .ok("search", json!({"pattern": "token", "context": 1}))
        .await;
    assert_eq!(
        text,
        "src/main.rs-1- fn main() {\nsrc/main.rs:2:     let token = 1;\nsrc/main.rs-3-     println!(\"hello\");"
    );
    let text = e
        .ok("search", json!({"pattern": "hello", "limit": 2}))
        .await;
    assert!(text.contains("more results not shown (limit=2)"), "{text}");
    let (err, text) = e.call("search", json!({"pattern": "("})).await;
    assert!(err && text.contains("invalid regex"), "{text}");
    let (err, text) = e
        .call("search", json!({"pattern": "x", "path": "../"}))
        .await;
    assert!(err && text.contains("outside the workspace"), "{text}");
}

#[tokio::test]
async fn claude_glob_sorted_by_mtime_and_capped() {
    let e = env();
    let text = e.ok("Glob", json!({"pattern": "**/*.rs"})).await;
    let expected: Vec<String> = [
        "src/main.rs",
        "src/lib.rs",
        "src/deep/mod.rs",
        ".hidden/h.rs",
        "ignored/x.rs",
    ]
    .iter()
    .map(|p| e.abs(p))
    .collect();
    assert_eq!(
        text,
        expected.join("\n"),
        "oldest first, hidden and gitignored included, denied hidden"
    );
    assert_eq!(
        e.ok("Glob", json!({"pattern": "*.none"})).await,
        "No files found"
    );
    for i in 0..120 {
        std::fs::write(
            e.ws.join(format!("many/f{i:03}.txt"))
                .parent()
                .map(|p| {
                    std::fs::create_dir_all(p).unwrap();
                    p.join(format!("f{i:03}.txt"))
                })
                .unwrap(),
            "x",
        )
        .unwrap();
    }
    let text = e.ok("Glob", json!({"pattern": "many/*.txt"})).await;
    assert_eq!(text.lines().count(), 101);
    assert!(
        text.ends_with("(Results are truncated. Consider using a more specific path or pattern.)")
    );
    let (err, text) = e
        .call("Glob", json!({"pattern": "*", "path": e.abs("nope")}))
        .await;
    assert!(err);
    assert_eq!(text, format!("Directory does not exist: {}", e.abs("nope")));
    let (_, text) = e
        .call(
            "Glob",
            json!({"pattern": "*", "path": e.abs("src/main.rs")}),
        )
        .await;
    assert_eq!(
        text,
        format!("Path is not a directory: {}", e.abs("src/main.rs"))
    );
}

#[tokio::test]
async fn claude_grep_modes_and_flags() {
    let e = env();
    // files_with_matches (default): newest first; hidden included; gitignored, VCS and denied skipped.
    let text = e.ok("Grep", json!({"pattern": "hello", "-i": true})).await;
    let expected: Vec<String> = [
        ".hidden/h.rs",
        "web/app.tsx",
        "web/app.ts",
        "src/deep/mod.rs",
        "src/lib.rs",
        "src/main.rs",
    ]
    .iter()
    .map(|p| e.abs(p))
    .collect();
    assert_eq!(text, format!("Found 6 files\n{}", expected.join("\n")));
    assert_eq!(
        e.ok("Grep", json!({"pattern": "zzz"})).await,
        "No files found"
    );

    let text = e
        .ok(
            "Grep",
            json!({"pattern": "token", "output_mode": "content", "-C": 1}),
        )
        .await;
    let m = e.abs("src/main.rs");
    assert_eq!(
        text,
        format!("{m}-1-fn main() {{\n{m}:2:    let token = 1;\n{m}-3-    println!(\"hello\");")
    );
    let text = e
        .ok(
            "Grep",
            json!({"pattern": "token", "output_mode": "content", "-n": false}),
        )
        .await;
    assert_eq!(text, format!("{m}:    let token = 1;"));
    assert_eq!(
        e.ok("Grep", json!({"pattern": "zzz", "output_mode": "content"}))
            .await,
        "No matches found"
    );

    let text = e
        .ok(
            "Grep",
            json!({"pattern": "hello", "output_mode": "count", "glob": "*.rs"}),
        )
        .await;
    assert!(
        text.ends_with("\n\nFound 4 total occurrences across 4 files."),
        "{text}"
    );

    let text = e.ok("Grep", json!({"pattern": "hello", "-i": true, "output_mode": "content", "head_limit": 2, "offset": 1})).await;
    assert_eq!(
        text.lines().filter(|l| l.starts_with('/')).count(),
        2,
        "{text}"
    );
    assert!(
        text.ends_with("[Showing results with pagination = limit: 2, offset: 1]"),
        "{text}"
    );

    let text = e.ok("Grep", json!({"pattern": "fn main\\(\\) \\{.*token", "multiline": true, "output_mode": "files_with_matches"})).await;
    assert_eq!(text, format!("Found 1 file\n{m}"));
    let text = e
        .ok("Grep", json!({"pattern": "hello", "type": "ts"}))
        .await;
    assert_eq!(text, format!("Found 1 file\n{}", e.abs("web/app.ts")));
    let text = e
        .ok(
            "Grep",
            json!({"pattern": "Hello", "path": e.abs("src/lib.rs"), "output_mode": "content"}),
        )
        .await;
    assert_eq!(text, format!("{}:2:    \"Hello\"", e.abs("src/lib.rs")));
}

#[tokio::test]
async fn long_lines_are_elided() {
    let e = env();
    std::fs::write(
        e.ws.join("min.js"),
        format!("var a='{}needle';\n", "x".repeat(1000)),
    )
    .unwrap();
    let text = e
        .ok(
            "Grep",
            json!({"pattern": "needle", "output_mode": "content"}),
        )
        .await;
    assert!(
        text.ends_with("[Omitted long line with 1015 characters]"),
        "{text}"
    );
}
