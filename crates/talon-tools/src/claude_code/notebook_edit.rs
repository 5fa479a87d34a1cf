//! `NotebookEdit` (Claude Code dialect): replace, insert or delete a Jupyter notebook cell by
//! `cell_id`, keeping every other part of the notebook as it was. A notebook under a routed name
//! (`memory/*.ipynb`) is the store's document and is changed there, as `Edit` changes one.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::{Jail, WriteMode};

use super::fs_message;
use crate::fs::read_state::ReadState;
use crate::fs::workspace::FsConfig;
use crate::fs::{MAX_EDIT_BYTES, extension, open_existing, read_all};

/// Cell kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    Code,
    Markdown,
}

/// What to do with the cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EditMode {
    #[default]
    Replace,
    Insert,
    Delete,
}

/// Input of [`NotebookEdit`].
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotebookEditInput {
    /// The absolute path to the Jupyter notebook file to edit (must be absolute, not relative).
    pub notebook_path: String,
    /// The ID of the cell to edit. When inserting a new cell, the new cell will be inserted after the cell with this ID, or at the beginning if not specified.
    #[serde(default)]
    pub cell_id: Option<String>,
    /// The new source for the cell.
    pub new_source: String,
    /// The type of the cell (code or markdown). If not specified, it defaults to the current cell type. If using edit_mode=insert, this is required.
    #[serde(default)]
    pub cell_type: Option<CellType>,
    /// The type of edit to make (replace, insert, delete). Defaults to replace.
    #[serde(default)]
    pub edit_mode: Option<EditMode>,
}

/// Claude Code's refusal of a file that is not a notebook.
const NOT_A_NOTEBOOK: &str = "File must be a Jupyter notebook (.ipynb file). For editing other file types, use the Edit tool.";

/// The `NotebookEdit` tool.
#[derive(Debug, Clone)]
pub struct NotebookEdit {
    pub fs: Arc<FsConfig>,
    pub state: Arc<ReadState>,
}

/// Jupyter stores source as a list of lines, each but the last ending in "\n".
fn source_lines(source: &str) -> Value {
    let mut lines: Vec<Value> = source
        .split_inclusive('\n')
        .map(|l| Value::String(l.to_string()))
        .collect();
    if lines.is_empty() {
        lines.push(Value::String(String::new()));
    }
    Value::Array(lines)
}

fn new_cell_id(cells: &[Value]) -> String {
    let mut n = cells.len();
    loop {
        let id = format!("cell-{n}");
        if !cells
            .iter()
            .any(|c| c.get("id").and_then(Value::as_str) == Some(&id))
        {
            return id;
        }
        n += 1;
    }
}

fn cell_index(cells: &[Value], id: &str) -> Option<usize> {
    cells
        .iter()
        .position(|c| c.get("id").and_then(Value::as_str) == Some(id))
        // Cells without ids (nbformat < 4.5) are addressed as "cell-N".
        .or_else(|| {
            id.strip_prefix("cell-")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n < cells.len())
        })
}

fn make_cell(kind: CellType, id: String, source: &str) -> Value {
    let mut cell = Map::new();
    cell.insert(
        "cell_type".into(),
        json!(if kind == CellType::Code {
            "code"
        } else {
            "markdown"
        }),
    );
    cell.insert("id".into(), json!(id));
    cell.insert("metadata".into(), json!({}));
    cell.insert("source".into(), source_lines(source));
    if kind == CellType::Code {
        cell.insert("execution_count".into(), Value::Null);
        cell.insert("outputs".into(), json!([]));
    }
    Value::Object(cell)
}

/// Applies the edit to the notebook JSON; returns the message for the model.
pub fn apply(notebook: &mut Value, input: &NotebookEditInput) -> Result<String, String> {
    let cells = notebook
        .get_mut("cells")
        .and_then(Value::as_array_mut)
        .ok_or("Notebook is not valid: it has no \"cells\" array.")?;
    let mode = input.edit_mode.unwrap_or_default();
    let found = match &input.cell_id {
        Some(id) => Some(
            cell_index(cells, id)
                .ok_or_else(|| format!("Cell with ID \"{id}\" not found in notebook."))?,
        ),
        None => None,
    };
    match mode {
        EditMode::Insert => {
            let kind = input
                .cell_type
                .ok_or("Cell type is required when using edit_mode=insert.")?;
            let id = new_cell_id(cells);
            let at = found.map_or(0, |i| i + 1);
            cells.insert(at, make_cell(kind, id.clone(), &input.new_source));
            Ok(format!("Inserted cell {id} with {}", input.new_source))
        }
        EditMode::Delete => {
            let index = found.ok_or("Cell ID must be specified when deleting a cell.")?;
            cells.remove(index);
            Ok(format!(
                "Deleted cell {}",
                input.cell_id.as_deref().unwrap_or_default()
            ))
        }
        EditMode::Replace => {
            let index = found.ok_or("Cell ID must be specified when replacing a cell.")?;
            let cell = cells[index]
                .as_object_mut()
                .ok_or("Notebook is not valid: a cell is not an object.")?;
            cell.insert("source".into(), source_lines(&input.new_source));
            if let Some(kind) = input.cell_type {
                let name = if kind == CellType::Code {
                    "code"
                } else {
                    "markdown"
                };
                cell.insert("cell_type".into(), json!(name));
            }
            if cell.get("cell_type").and_then(Value::as_str) == Some("code") {
                // The old outputs belong to the old source.
                cell.insert("execution_count".into(), Value::Null);
                cell.insert("outputs".into(), json!([]));
            } else {
                cell.remove("execution_count");
                cell.remove("outputs");
            }
            Ok(format!(
                "Updated cell {} with {}",
                input.cell_id.as_deref().unwrap_or_default(),
                input.new_source
            ))
        }
    }
}

/// Jupyter's own layout: one-space indentation and a trailing newline.
pub fn serialize(notebook: &Value) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(notebook, &mut ser).map_err(|e| e.to_string())?;
    out.push(b'\n');
    Ok(out)
}

impl Tool for NotebookEdit {
    type Input = NotebookEditInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "NotebookEdit",
            "Replaces, inserts or deletes a cell in a Jupyter notebook (.ipynb), addressed by cell_id. Read the \
             notebook first. edit_mode=insert adds a new cell after cell_id (or at the start) and needs \
             cell_type; edit_mode=delete removes the cell.",
            SideEffect::Mutating,
        )
        .in_group("claude_code")
        .in_group("fs")
    }

    async fn execute(&self, call: Authorized<NotebookEditInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let files = self.fs.files(ctx);
        // The store's compare-and-set keeps racing edits from being lost, as for `Edit` of a
        // routed file; `change` may run again, so the message is kept from its last run.
        let said = std::sync::Mutex::new(String::new());
        let routed = files
            .edit_routed(&input.notebook_path, |current| {
                if extension(std::path::Path::new(&input.notebook_path)) != "ipynb" {
                    return Err(NOT_A_NOTEBOOK.to_string());
                }
                let mut notebook: Value = serde_json::from_str(current)
                    .map_err(|e| format!("Notebook is not valid JSON: {e}"))?;
                let message = apply(&mut notebook, input)?;
                let text = String::from_utf8(serialize(&notebook)?).map_err(|e| e.to_string())?;
                if let Ok(mut said) = said.lock() {
                    *said = message;
                }
                Ok(text)
            })
            .await;
        if let Some(result) = routed {
            return match result {
                Ok(_) => ToolOutput::text(said.into_inner().unwrap_or_default()),
                Err(e) => ToolOutput::error(e),
            };
        }
        let jail = or_error!(files.disk());
        super::off_thread(self, jail, &ctx.session_key, input, on_disk).await
    }
}

/// The disk half of `NotebookEdit`: blocking I/O, run off the async threads.
fn on_disk(
    this: &NotebookEdit,
    jail: &Jail,
    session: &str,
    input: &NotebookEditInput,
) -> ToolOutput {
    let root = jail.root().to_path_buf();
    let (located, mut opened) = match open_existing(jail, &input.notebook_path) {
        Ok(v) => v,
        Err(e) => return ToolOutput::error(fs_message(&e, &root)),
    };
    if extension(&opened.real_abs) != "ipynb" {
        return ToolOutput::error(NOT_A_NOTEBOOK);
    }
    if opened.stat.st_size.max(0) as u64 > MAX_EDIT_BYTES {
        return ToolOutput::error(format!(
            "Notebook is larger than {} MiB.",
            MAX_EDIT_BYTES >> 20
        ));
    }
    let raw = match read_all(&mut opened) {
        Ok(r) => r,
        Err(e) => {
            return ToolOutput::error(format!("cannot read {}: {e}", input.notebook_path));
        }
    };
    let freshness = this
        .state
        .check(session, &opened.real_abs, opened.mtime_ns(), &raw);
    if let Some(refusal) = super::stale(freshness) {
        return refusal;
    }
    let mut notebook: Value = match serde_json::from_slice(&raw) {
        Ok(v) => v,
        Err(e) => return ToolOutput::error(format!("Notebook is not valid JSON: {e}")),
    };
    let message = or_error!(apply(&mut notebook, input));
    let bytes = or_error!(serialize(&notebook));
    match jail.write(&located, &bytes, WriteMode::ParentMustExist) {
        Ok(report) => {
            if let Ok((_, reopened)) = open_existing(jail, &input.notebook_path) {
                this.state
                    .record(session, &report.real_abs, reopened.mtime_ns(), Some(&bytes));
            }
            ToolOutput::text(message)
        }
        Err(e) => ToolOutput::error(fs_message(&e, &root)),
    }
}
