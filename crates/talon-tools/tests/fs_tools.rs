//! The filesystem tools in both dialects, through the pipeline, against a real workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use talon_core::{CallContext, FailedStage, ToolCall};
use talon_tools::{BuiltinConfig, FsConfig};

type Env = common::Workspace;

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws/sub")).unwrap();
    std::fs::create_dir_all(dir.path().join("ws/.talon")).unwrap();
    std::fs::create_dir_all(dir.path().join("outside")).unwrap();
    std::fs::write(dir.path().join("outside/secret.txt"), "SECRET").unwrap();
    let config = BuiltinConfig {
        fs: FsConfig::new(vec!["private".into()], vec![]),
        store: None,
        ..BuiltinConfig::default()
    };
    Env::new(dir, &config)
}

#[tokio::test]
async fn read_file_pages_with_offsets_and_footers() {
    let env = env();
    let body: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    env.write("a.txt", &body);
    let text = env
        .ok("read_file", json!({"path": "a.txt", "limit": 5}))
        .await;
    assert!(text.starts_with("     1\tline 1\n"), "{text}");
    assert!(
        text.contains("[Showing lines 1-5 of 30 total. Continue at offset=5.]"),
        "{text}"
    );
    let text = env
        .ok("read_file", json!({"path": "a.txt", "offset": 28}))
        .await;
    assert!(
        text.starts_with("    29\tline 29\n    30\tline 30\n"),
        "{text}"
    );
    assert!(
        text.contains("[Showing lines 29-30 of 30 total.]"),
        "{text}"
    );
    let err = env
        .err("read_file", json!({"path": "a.txt", "offset": 30}))
        .await;
    assert!(
        err.contains("offset 30 is past the end") && err.contains("has 30 lines"),
        "{err}"
    );

    let big: String = (0..20_000)
        .map(|i| format!("row {i:05} {}\n", "x".repeat(20)))
        .collect();
    env.write("big.txt", &big);
    let text = env.ok("read_file", json!({"path": "big.txt"})).await;
    assert!(text.len() <= read_file_cap() + 200, "{}", text.len());
    assert!(
        text.contains("[Output capped. File has 20000 lines"),
        "{}",
        &text[text.len() - 200..]
    );
    assert!(text.contains("Continue at offset="));
}

fn read_file_cap() -> usize {
    talon_tools::fs::read_file::MAX_OUTPUT_CHARS
}

#[tokio::test]
async fn bad_input_has_defined_answers() {
    let env = env();
    env.write("empty.txt", "");
    env.write("crlf.txt", "one\r\ntwo\r\n");
    env.write("latin1.txt", b"caf\xe9\n");
    env.write("long.txt", "y".repeat(10_000));
    env.write("bin.dat", b"\x00\x01\x02binary");
    env.write("photo.png", b"\x89PNG\r\n\x1a\n....");

    assert!(
        env.ok("read_file", json!({"path": "empty.txt"}))
            .await
            .starts_with("(empty file")
    );
    assert_eq!(
        env.ok("read_file", json!({"path": "crlf.txt"})).await,
        "     1\tone\n     2\ttwo\n"
    );
    let latin = env.ok("read_file", json!({"path": "latin1.txt"})).await;
    assert!(
        latin.contains("caf\u{fffd}") && latin.contains("not valid UTF-8"),
        "{latin}"
    );
    assert!(
        env.ok("read_file", json!({"path": "long.txt"}))
            .await
            .contains("[line truncated at 2000 characters]")
    );
    assert!(
        env.err("read_file", json!({"path": "bin.dat"}))
            .await
            .contains("is a binary file")
    );
    assert!(
        env.err("read_file", json!({"path": "photo.png"}))
            .await
            .contains("read_image")
    );
    assert!(
        env.err("read_file", json!({"path": "sub"}))
            .await
            .contains("is a directory; use list_files")
    );
    assert!(
        env.err("read_file", json!({"path": "a\u{0}b"}))
            .await
            .contains("NUL")
    );
    assert!(
        env.err("read_file", json!({"path": "missing.txt"}))
            .await
            .contains("does not exist")
    );
    assert!(
        env.err("read_file", json!({"path": "../outside/secret.txt"}))
            .await
            .contains("outside the workspace")
    );
    assert!(
        env.err("read_file", json!({"path": ".talon/state"}))
            .await
            .contains("denied")
    );
}

#[tokio::test]
async fn huge_sparse_file_is_read_by_range_without_loading_it() {
    let env = env();
    let path = env.ws().join("huge.log");
    {
        let mut f = std::fs::File::create(&path).unwrap();
        let mut head = String::from("first\nsecond\n");
        while head.len() < 16 * 1024 {
            head.push_str("filler line of text\n");
        }
        std::io::Write::write_all(&mut f, head.as_bytes()).unwrap();
        f.set_len(2 << 30).unwrap(); // 2 GiB, sparse
    }
    let text = env
        .ok("read_file", json!({"path": "huge.log", "limit": 2}))
        .await;
    assert!(
        text.starts_with("     1\tfirst\n     2\tsecond\n"),
        "{text}"
    );
    let err = env
        .err("Read", json!({"file_path": env.abs("huge.log")}))
        .await;
    assert!(
        err.starts_with("File content (2097152KB) exceeds maximum allowed size (256KB)."),
        "{err}"
    );
}

#[tokio::test]
async fn write_file_and_edit_keep_modes_and_line_endings() {
    let env = env();
    env.ok(
        "write_file",
        json!({"path": "new/dir/f.txt", "content": "a\nb\n"}),
    )
    .await;
    assert_eq!(env.read("new/dir/f.txt"), "a\nb\n");
    env.ok(
        "write_file",
        json!({"path": "new/dir/f.txt", "content": "c\n", "append": true}),
    )
    .await;
    assert_eq!(env.read("new/dir/f.txt"), "a\nb\nc\n");

    env.write("script.sh", "echo one\r\necho two\r\n");
    std::fs::set_permissions(
        env.ws().join("script.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let out = env.ok("edit", json!({"path": "script.sh", "old_string": "echo two\n", "new_string": "echo 2\necho 3\n"})).await;
    assert!(out.contains("replaced 1 occurrence"), "{out}");
    assert_eq!(env.read("script.sh"), "echo one\r\necho 2\r\necho 3\r\n");
    assert_eq!(
        std::fs::metadata(env.ws().join("script.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );

    let ambiguous = env
        .err(
            "edit",
            json!({"path": "script.sh", "old_string": "echo", "new_string": "print"}),
        )
        .await;
    assert!(ambiguous.contains("found 3 times"), "{ambiguous}");
    env.ok("edit", json!({"path": "script.sh", "old_string": "echo", "new_string": "print", "replace_all": true})).await;
    assert_eq!(env.read("script.sh"), "print one\r\nprint 2\r\nprint 3\r\n");
    assert!(
        env.err(
            "edit",
            json!({"path": "script.sh", "old_string": "zzz", "new_string": "y"})
        )
        .await
        .contains("not found")
    );
    assert!(
        env.err(
            "edit_file",
            json!({"path": "script.sh", "old_string": "x", "new_string": "x"})
        )
        .await
        .contains("identical")
    );
    assert!(
        env.err(
            "edit",
            json!({"path": "latin.bin", "old_string": "x", "new_string": "y"})
        )
        .await
        .contains("does not exist")
    );
    env.write("latin.txt", b"caf\xe9");
    assert!(
        env.err(
            "edit",
            json!({"path": "latin.txt", "old_string": "caf", "new_string": "y"})
        )
        .await
        .contains("not UTF-8")
    );

    symlink("../outside/secret.txt", env.ws().join("escape")).unwrap();
    assert!(
        env.err("write_file", json!({"path": "escape", "content": "PWNED"}))
            .await
            .contains("outside the workspace")
    );
    assert!(
        env.err(
            "edit",
            json!({"path": "escape", "old_string": "SECRET", "new_string": "x"})
        )
        .await
        .contains("outside the workspace")
    );
    assert_eq!(
        std::fs::read_to_string(env.dir.path().join("outside/secret.txt")).unwrap(),
        "SECRET"
    );
}

#[tokio::test]
async fn list_files_hides_denied_entries_and_caps() {
    let env = env();
    env.write("private/keys.txt", "k");
    env.write("sub/inner/deep.txt", "d");
    env.write("top.txt", "t");
    let text = env.ok("list_files", json!({})).await;
    assert!(
        text.contains("[FILE] top.txt (1 bytes)") && text.contains("[DIR]  sub/"),
        "{text}"
    );
    assert!(
        !text.contains("private") && !text.contains(".talon"),
        "{text}"
    );
    let text = env.ok("list_files", json!({"recursive": true})).await;
    assert!(text.contains("\n    [FILE] deep.txt (1 bytes)"), "{text}");
    for i in 0..20 {
        env.write(&format!("many/f{i:02}.txt"), "x");
    }
    let text = env
        .ok("list_files", json!({"path": "many", "limit": 5}))
        .await;
    assert!(
        text.contains("... 15 more entries not shown (limit=5)"),
        "{text}"
    );
    assert!(
        env.err("list_files", json!({"path": "private"}))
            .await
            .contains("denied")
    );
}

#[tokio::test]
async fn claude_read_formats_and_reminders() {
    let env = env();
    env.write("a.py", "import os\nprint(1)\n");
    env.write("empty.txt", "");
    let text = env.ok("Read", json!({"file_path": env.abs("a.py")})).await;
    assert_eq!(text, "     1\timport os\n     2\tprint(1)\n");
    let text = env
        .ok(
            "Read",
            json!({"file_path": env.abs("a.py"), "offset": 2, "limit": 1}),
        )
        .await;
    assert_eq!(text, "     2\tprint(1)\n");
    let text = env
        .ok("Read", json!({"file_path": env.abs("a.py"), "offset": 9}))
        .await;
    assert_eq!(
        text,
        "<system-reminder>Warning: the file exists but is shorter than the provided offset (9). The file has 2 lines.</system-reminder>"
    );
    assert_eq!(
        env.ok("Read", json!({"file_path": env.abs("empty.txt")}))
            .await,
        "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
    );
    env.write("big.txt", "z".repeat(300 * 1024));
    let err = env
        .err("Read", json!({"file_path": env.abs("big.txt")}))
        .await;
    assert!(
        err.starts_with("File content (300KB) exceeds maximum allowed size (256KB)."),
        "{err}"
    );
    assert!(
        env.ok("Read", json!({"file_path": env.abs("big.txt"), "limit": 1}))
            .await
            .contains("[line truncated")
    );

    env.write("pic.png", b"\x89PNG\r\n\x1a\nfakepng");
    let out = env
        .call("Read", json!({"file_path": env.abs("pic.png")}))
        .await;
    assert!(
        out.output.for_llm.starts_with("Image file read: "),
        "{}",
        out.output.for_llm
    );
    assert_eq!(out.output.media[0].mime_type, "image/png");
    assert_eq!(out.output.media[0].data, b"\x89PNG\r\n\x1a\nfakepng");

    let notebook = json!({"cells": [
        {"cell_type": "markdown", "id": "m1", "source": ["# Title\n"]},
        {"cell_type": "code", "id": "c1", "source": "print(2+2)", "outputs": [{"output_type": "stream", "text": ["4\n"]}]}
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    env.write("nb.ipynb", notebook.to_string());
    let text = env
        .ok("Read", json!({"file_path": env.abs("nb.ipynb")}))
        .await;
    assert!(
        text.contains("<cell index=\"1\" id=\"c1\" type=\"code\">\nprint(2+2)")
            && text.contains("<output>\n4\n"),
        "{text}"
    );
}

/// Every Claude Code error string, table-driven.
#[tokio::test]
async fn claude_error_strings() {
    let env = env();
    env.write("f.txt", "alpha beta alpha\n");
    env.write("nb.ipynb", r#"{"cells": []}"#);
    env.write("bin.dat", b"\x00\x00\x00");
    env.write("private/x.txt", "x");
    let f = env.abs("f.txt");
    let cases: Vec<(&str, Value, String)> = vec![
        ("Edit", json!({"file_path": f, "old_string": "a", "new_string": "a"}), "No changes to make: old_string and new_string are exactly the same.".into()),
        ("Edit", json!({"file_path": env.abs("private/x.txt"), "old_string": "x", "new_string": "y"}), "File is in a directory that is denied by your permission settings.".into()),
        ("Read", json!({"file_path": env.abs("private/x.txt")}), "File is in a directory that is denied by your permission settings.".into()),
        ("Edit", json!({"file_path": f, "old_string": "", "new_string": "y"}), "Cannot create new file - file already exists.".into()),
        ("Edit", json!({"file_path": env.abs("nope.txt"), "old_string": "x", "new_string": "y"}), format!("File does not exist. Current working directory: {}", env.ws().display())),
        ("Read", json!({"file_path": env.abs("nope.txt")}), format!("File does not exist. Current working directory: {}", env.ws().display())),
        ("Edit", json!({"file_path": env.abs("nb.ipynb"), "old_string": "x", "new_string": "y"}), "File is a Jupyter Notebook. Use the NotebookEdit to edit this file.".into()),
        ("Edit", json!({"file_path": f, "old_string": "alpha", "new_string": "y"}), "File has not been read yet. Read it first before writing to it.".into()),
        ("Write", json!({"file_path": f, "content": "new"}), "File has not been read yet. Read it first before writing to it.".into()),
        ("Read", json!({"file_path": env.abs("bin.dat")}), "This tool cannot read binary files. The file appears to be a binary .dat file. Please use appropriate tools for binary file analysis.".into()),
    ];
    for (tool, args, expected) in cases {
        let got = env.err(tool, args.clone()).await;
        assert_eq!(got, expected, "{tool} {args}");
    }

    env.ok("Read", json!({"file_path": f})).await;
    let err = env
        .err(
            "Edit",
            json!({"file_path": f, "old_string": "gamma", "new_string": "y"}),
        )
        .await;
    assert_eq!(err, "String to replace not found in file.\nString: gamma");
    let err = env
        .err(
            "Edit",
            json!({"file_path": f, "old_string": "alpha", "new_string": "y"}),
        )
        .await;
    assert_eq!(
        err,
        "Found 2 matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: alpha"
    );
    // Modified on disk after the read.
    std::thread::sleep(std::time::Duration::from_millis(20));
    env.write("f.txt", "changed by someone else\n");
    let err = env
        .err(
            "Edit",
            json!({"file_path": f, "old_string": "changed", "new_string": "y"}),
        )
        .await;
    assert_eq!(
        err,
        "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it."
    );
    let err = env
        .err("Write", json!({"file_path": f, "content": "x"}))
        .await;
    assert_eq!(
        err,
        "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it."
    );
}

#[tokio::test]
async fn claude_edit_and_write_after_read() {
    let env = env();
    env.write("code.rs", "fn main() {\r\n    println!(\"hi\");\r\n}\r\n");
    let f = env.abs("code.rs");
    env.ok("Read", json!({"file_path": f})).await;
    let out = env
        .ok(
            "Edit",
            json!({"file_path": f, "old_string": "\"hi\"", "new_string": "\"hello\""}),
        )
        .await;
    assert!(out.starts_with(&format!("The file {f} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n")), "{out}");
    assert!(out.contains("     2\t    println!(\"hello\");"), "{out}");
    assert_eq!(
        env.read("code.rs"),
        "fn main() {\r\n    println!(\"hello\");\r\n}\r\n",
        "CRLF kept"
    );
    // The session's own edit counts as a read: a second edit needs no new Read.
    env.ok(
        "Edit",
        json!({"file_path": f, "old_string": "main", "new_string": "start"}),
    )
    .await;
    // Another session has not read the file.
    let other = env
        .call_as(
            "s2",
            "Edit",
            json!({"file_path": f, "old_string": "start", "new_string": "x"}),
        )
        .await;
    assert_eq!(
        other.output.for_llm,
        "File has not been read yet. Read it first before writing to it."
    );

    let created = env
        .ok(
            "Write",
            json!({"file_path": env.abs("dir/new.txt"), "content": "fresh"}),
        )
        .await;
    assert_eq!(
        created,
        format!("File created successfully at: {}", env.abs("dir/new.txt"))
    );
    env.ok("Write", json!({"file_path": f, "content": "replaced\n"}))
        .await;
    assert_eq!(env.read("code.rs"), "replaced\r\n", "Write keeps CRLF");
    let made = env
        .ok(
            "Edit",
            json!({"file_path": env.abs("made.txt"), "old_string": "", "new_string": "via edit"}),
        )
        .await;
    assert!(made.starts_with("File created successfully at: "));
    assert_eq!(env.read("made.txt"), "via edit");
}

#[tokio::test]
async fn write_tools_are_permission_gated_in_default_mode() {
    let env = env();
    let mut ctx = CallContext::new("s");
    ctx.workspace = Some(env.ws());
    let out = env
        .pipeline
        .call(
            Arc::new(ctx),
            ToolCall::new("write_file", json!({"path": "x", "content": "y"})),
        )
        .await;
    assert_eq!(out.failed_stage, Some(FailedStage::Permission));
    assert!(!Path::new(&env.abs("x")).exists());
}

#[tokio::test]
async fn no_workspace_is_a_clear_error() {
    let env = env();
    let out = env
        .pipeline
        .call(
            Arc::new(CallContext::new("s")),
            ToolCall::new("read_file", json!({"path": "a"})),
        )
        .await;
    assert!(
        out.output
            .for_llm
            .starts_with("no workspace is configured for this call"),
        "{}",
        out.output.for_llm
    );
}

#[tokio::test]
async fn a_workspace_replaced_on_disk_is_reopened() {
    let env = env();
    env.write("a.txt", "old");
    assert!(
        env.ok("read_file", json!({"path": "a.txt"}))
            .await
            .contains("old")
    );
    let ws = env.ws();
    std::fs::rename(&ws, env.dir.path().join("ws-moved")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "new").unwrap();
    let text = env.ok("read_file", json!({"path": "a.txt"})).await;
    assert!(
        text.contains("new"),
        "the cached jail of the old directory must not be used: {text}"
    );
}
