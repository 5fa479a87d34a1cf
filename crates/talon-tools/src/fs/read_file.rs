//! `read_file` (GoClaw dialect): a file's lines, numbered, from a 0-based `offset`, capped, with a
//! footer saying where to continue.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::Jail;

use super::text::{DEFAULT_LINE_LIMIT, read_range};
use super::workspace::FsConfig;
use super::{binary_extension, head, open_existing};

/// Characters of output before `read_file` stops and says where to continue (GoClaw's cap).
pub const MAX_OUTPUT_CHARS: usize = 50_000;

/// Input of [`ReadFile`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileInput {
    /// File path, relative to the workspace or absolute inside it.
    pub path: String,
    /// First line to show, 0-based (default 0).
    #[serde(default)]
    pub offset: Option<usize>,
    /// Number of lines to show (default 2000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The `read_file` tool.
#[derive(Debug, Clone)]
pub struct ReadFile {
    pub fs: Arc<FsConfig>,
}

impl Tool for ReadFile {
    type Input = ReadFileInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read_file",
            "Read a text file from the workspace. Lines come numbered; use offset (0-based line) and limit to \
             page through large files, as the footer suggests. For images, PDFs and other binary files use \
             read_image / read_document.",
            SideEffect::None,
        )
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<ReadFileInput>) -> ToolOutput {
        let input = call.input();
        let offset = input.offset.unwrap_or(0);
        let limit = input.limit.unwrap_or(DEFAULT_LINE_LIMIT).max(1);
        let files = self.fs.files(call.ctx());
        if let Some(routed) = files.read_routed(&input.path).await {
            return match routed.and_then(|text| {
                read_range(text.as_bytes(), offset, limit, MAX_OUTPUT_CHARS)
                    .map_err(|e| e.to_string())
            }) {
                Ok(range) => render(range, &input.path, offset),
                Err(e) => ToolOutput::error(e),
            };
        }
        let jail = or_error!(files.disk());
        let path = input.path.clone();
        super::blocking(move || read_disk(&jail, &path, offset, limit))
            .await
            .unwrap_or_else(|| ToolOutput::error(super::SHUTTING_DOWN))
    }
}

/// The disk half of `read_file`: blocking I/O, run off the async threads.
fn read_disk(jail: &Jail, path: &str, offset: usize, limit: usize) -> ToolOutput {
    let (located, mut opened) = or_error!(open_existing(jail, path));
    let shown = jail.display(&located);
    if opened.is_dir() {
        return ToolOutput::error(format!(
            "{} is a directory; use list_files to see what it contains",
            shown.display()
        ));
    }
    let head = match head(&mut opened) {
        Ok(h) => h,
        Err(e) => return ToolOutput::error(format!("cannot read {}: {e}", shown.display())),
    };
    if binary_extension(&opened.real_abs) || super::text::is_binary(&head) {
        return ToolOutput::error(format!(
            "{} is a binary file; read_file shows text only. Use read_image for images, read_document for PDFs \
             and office documents, read_audio or read_video for media.",
            shown.display()
        ));
    }
    match read_range(&opened.file, offset, limit, MAX_OUTPUT_CHARS) {
        Ok(range) => render(range, &shown.display().to_string(), offset),
        Err(e) => ToolOutput::error(format!("cannot read {}: {e}", shown.display())),
    }
}

/// The numbered lines with the footer saying where to continue.
fn render(range: super::text::LineRange, shown: &str, offset: usize) -> ToolOutput {
    let total = range.total;
    let total_text = total.map_or_else(|| "many".to_string(), |t| t.to_string());
    if total == Some(0) {
        return ToolOutput::silent(format!("(empty file: {})", shown));
    }
    if range.first == 0 {
        return ToolOutput::error(format!(
            "offset {offset} is past the end of {}: the file has {total_text} lines (offsets are 0-based)",
            shown
        ));
    }
    let mut text = range.body;
    if range.lossy {
        text.push_str("\n[The file is not valid UTF-8; invalid bytes are shown as U+FFFD.]\n");
    }
    let more = total.is_none_or(|t| range.last < t);
    if range.capped {
        text.push_str(&format!(
                "\n[Output capped. File has {total_text} lines, showed {} (lines {}-{}). Continue at offset={}.]",
                range.last - range.first + 1,
                range.first,
                range.last,
                range.last
            ));
    } else if more || offset > 0 {
        text.push_str(&format!(
            "\n[Showing lines {}-{} of {total_text} total.",
            range.first, range.last
        ));
        if more {
            text.push_str(&format!(" Continue at offset={}.", range.last));
        }
        text.push(']');
    }
    ToolOutput::silent(text)
}
