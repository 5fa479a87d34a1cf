//! `Read` (Claude Code dialect): `file_path`, 1-based `offset`, `limit`; `%6d\t` numbered lines;
//! the 256 KiB whole-file guard; images as image content; notebooks as cells with outputs.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, Media, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::Jail;

use super::fs_message;
use crate::fs::read_state::ReadState;
use crate::fs::text::{DEFAULT_LINE_LIMIT, read_range};
use crate::fs::workspace::FsConfig;
use crate::fs::{extension, head, open_existing, read_all};

/// Claude Code refuses to read more than this without `offset`/`limit`.
pub const MAX_WHOLE_FILE_BYTES: u64 = 256 * 1024;
/// Largest image returned inline.
pub const MAX_IMAGE_BYTES: u64 = 20 << 20;

/// Input of [`Read`].
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// The absolute path to the file to read.
    pub file_path: String,
    /// The line number to start reading from (1-based). Only provide if the file is too large to read at once.
    #[serde(default)]
    pub offset: Option<usize>,
    /// The number of lines to read. Only provide if the file is too large to read at once.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Page range for PDF files (e.g. "1-5"). Only for PDFs; at most 20 pages per request.
    #[serde(default)]
    pub pages: Option<String>,
}

/// The `Read` tool.
#[derive(Debug, Clone)]
pub struct Read {
    pub fs: Arc<FsConfig>,
    pub state: Arc<ReadState>,
}

fn image_mime(ext: &str) -> Option<&'static str> {
    match ext {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

/// The largest notebook read.
pub const MAX_NOTEBOOK_BYTES: usize = (MAX_WHOLE_FILE_BYTES * 16) as usize;

/// A notebook's cells and outputs, parsed in the helper process (the parser inside it is
/// [`notebook_text`]): its JSON is a file an agent or a repository wrote.
fn notebook(bytes: &[u8]) -> Result<String, String> {
    crate::untrusted_parse::parse(crate::untrusted_parse::Kind::Notebook, bytes, &[])
}

/// The parser of [`notebook`], inside the helper.
pub(crate) fn notebook_text(bytes: &[u8]) -> Result<String, String> {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .map_err(|e| format!("invalid notebook JSON: {e}"))
        .and_then(|v| render_notebook(&v))
}

/// Renders a notebook's cells with their outputs.
pub fn render_notebook(json: &serde_json::Value) -> Result<String, String> {
    let cells = json
        .get("cells")
        .and_then(|c| c.as_array())
        .ok_or("not a Jupyter notebook: no \"cells\" array")?;
    let text_of = |v: Option<&serde_json::Value>| -> String {
        match v {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Array(parts)) => {
                parts.iter().filter_map(|p| p.as_str()).collect()
            }
            _ => String::new(),
        }
    };
    let mut out = String::new();
    for (i, cell) in cells.iter().enumerate() {
        let kind = cell
            .get("cell_type")
            .and_then(|t| t.as_str())
            .unwrap_or("unknown");
        let id = cell
            .get("id")
            .and_then(|t| t.as_str())
            .map(|id| format!(" id=\"{id}\""))
            .unwrap_or_default();
        out.push_str(&format!(
            "<cell index=\"{i}\"{id} type=\"{kind}\">\n{}\n",
            text_of(cell.get("source"))
        ));
        for output in cell
            .get("outputs")
            .and_then(|o| o.as_array())
            .into_iter()
            .flatten()
        {
            let text = text_of(output.get("text"))
                + &text_of(output.get("data").and_then(|d| d.get("text/plain")))
                + &output
                    .get("traceback")
                    .and_then(|t| t.as_array())
                    .map(|t| {
                        t.iter()
                            .filter_map(|l| l.as_str())
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
            if !text.is_empty() {
                out.push_str(&format!("<output>\n{text}\n</output>\n"));
            }
            if output
                .get("data")
                .and_then(|d| d.get("image/png"))
                .is_some()
            {
                out.push_str("<output>[image/png output]</output>\n");
            }
        }
        out.push_str("</cell>\n");
    }
    Ok(out)
}

impl Tool for Read {
    type Input = ReadInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "Read",
            "Reads a file from the workspace. file_path should be an absolute path. By default up to 2000 lines \
             are read from the start; use offset and limit for long files. Lines longer than 2000 characters are \
             truncated. Output is in cat -n format, with line numbers starting at 1. Reads images (PNG, JPG, GIF, \
             WEBP), PDFs (text per page; use pages, e.g. \"1-5\", for PDFs over 10 pages, at most 20 per request) \
             and Jupyter notebooks (.ipynb, all cells with their outputs). Cannot read directories.",
            SideEffect::None,
        )
        .same_as("read_file")
        .in_group("claude_code")
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<ReadInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let files = self.fs.files(ctx);
        if let Some(routed) = files.read_routed(&input.file_path).await {
            let offset = input.offset.unwrap_or(1).max(1);
            let limit = input.limit.unwrap_or(DEFAULT_LINE_LIMIT).max(1);
            // A notebook kept in memory reads as cells, like one on disk.
            if extension(std::path::Path::new(&input.file_path)) == "ipynb" {
                let rendered = match routed {
                    Ok(text) => {
                        crate::untrusted_parse::parse_async(
                            crate::untrusted_parse::Kind::Notebook,
                            text.into_bytes(),
                            Vec::new(),
                        )
                        .await
                    }
                    Err(e) => Err(e),
                };
                return match rendered {
                    Ok(text) => ToolOutput::text(text),
                    Err(e) => ToolOutput::error(e),
                };
            }
            return match routed.and_then(|text| {
                read_range(text.as_bytes(), offset - 1, limit, usize::MAX)
                    .map_err(|e| e.to_string())
            }) {
                Ok(range) if range.total == Some(0) => ToolOutput::text(
                    "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>",
                ),
                Ok(range) => ToolOutput::text(range.body),
                Err(e) => ToolOutput::error(e),
            };
        }
        let jail = or_error!(files.disk());
        super::off_thread(self, jail, &ctx.session_key, input, on_disk).await
    }
}

/// The disk half of `Read`: blocking I/O, run off the async threads.
fn on_disk(this: &Read, jail: &Jail, session: &str, input: &ReadInput) -> ToolOutput {
    let root = jail.root().to_path_buf();
    let (_, mut opened) = match open_existing(jail, &input.file_path) {
        Ok(v) => v,
        Err(e) => return ToolOutput::error(fs_message(&e, &root)),
    };
    if opened.is_dir() {
        return ToolOutput::error(format!(
            "{} is a directory, not a file. Use Glob or Bash (ls) to list a directory.",
            input.file_path
        ));
    }
    let size = opened.stat.st_size.max(0) as u64;
    let ext = extension(&opened.real_abs);
    if let Some(mime) = image_mime(&ext) {
        if size == 0 {
            return ToolOutput::error("Empty image files cannot be processed.");
        }
        if size > MAX_IMAGE_BYTES {
            return ToolOutput::error(format!(
                "Image is too large ({size} bytes; the limit is {MAX_IMAGE_BYTES})."
            ));
        }
        return match read_all(&mut opened) {
            Ok(data) => ToolOutput::text(format!(
                "Image file read: {} ({size} bytes)",
                opened.real_abs.display()
            ))
            .with_media(Media {
                mime_type: mime.into(),
                data,
                name: opened
                    .real_abs
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned()),
                prompt: None,
            }),
            Err(e) => ToolOutput::error(format!("cannot read {}: {e}", input.file_path)),
        };
    }
    if ext == "ipynb" {
        if size > MAX_NOTEBOOK_BYTES as u64 {
            return ToolOutput::error(format!("Notebook is too large to render ({size} bytes)."));
        }
        let rendered = read_all(&mut opened)
            .map_err(|e| e.to_string())
            .and_then(|bytes| notebook(&bytes).map(|r| (bytes, r)));
        return match rendered {
            Ok((bytes, text)) => {
                this.state
                    .record(session, &opened.real_abs, opened.mtime_ns(), Some(&bytes));
                ToolOutput::text(text)
            }
            Err(e) => ToolOutput::error(e),
        };
    }
    if ext == "pdf" {
        let result = read_all(&mut opened)
            .map_err(|e| format!("cannot read {}: {e}", input.file_path))
            .and_then(|bytes| crate::fs::pdf::read(&bytes, input.pages.as_deref()));
        return match result {
            Ok(text) => ToolOutput::text(text),
            Err(e) => ToolOutput::error(e),
        };
    }
    if input.pages.is_some() {
        return ToolOutput::error("The pages parameter is only for PDF files.");
    }
    let head = match head(&mut opened) {
        Ok(h) => h,
        Err(e) => return ToolOutput::error(format!("cannot read {}: {e}", input.file_path)),
    };
    if crate::fs::text::is_binary(&head) {
        return ToolOutput::error(format!(
            "This tool cannot read binary files. The file appears to be a binary .{ext} file. Please use appropriate tools for binary file analysis."
        ));
    }
    let whole = input.offset.is_none() && input.limit.is_none();
    if whole && size > MAX_WHOLE_FILE_BYTES {
        return ToolOutput::error(format!(
            "File content ({}KB) exceeds maximum allowed size (256KB). Please use offset and limit parameters to read specific portions of the file, or use the GrepTool to search for specific content.",
            size.div_ceil(1024)
        ));
    }
    let offset = input.offset.unwrap_or(1).max(1);
    let limit = input.limit.unwrap_or(DEFAULT_LINE_LIMIT).max(1);
    let range = match read_range(&opened.file, offset - 1, limit, usize::MAX) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(format!("cannot read {}: {e}", input.file_path)),
    };
    let digest_source = if whole {
        use std::io::Seek;
        let _ = opened.file.seek(std::io::SeekFrom::Start(0));
        read_all(&mut opened).ok()
    } else {
        None
    };
    this.state.record(
        session,
        &opened.real_abs,
        opened.mtime_ns(),
        digest_source.as_deref(),
    );
    if range.total == Some(0) {
        return ToolOutput::text(
            "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>",
        );
    }
    if range.first == 0 {
        return ToolOutput::text(format!(
            "<system-reminder>Warning: the file exists but is shorter than the provided offset ({offset}). The file has {} lines.</system-reminder>",
            range
                .total
                .map_or_else(|| "many".to_string(), |t| t.to_string())
        ));
    }
    let mut text = range.body;
    if range.lossy {
        text.push_str("<system-reminder>The file is not valid UTF-8; invalid bytes are shown as U+FFFD.</system-reminder>\n");
    }
    ToolOutput::text(text)
}
