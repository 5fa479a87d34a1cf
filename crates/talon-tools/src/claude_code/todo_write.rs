//! `TodoWrite`: Claude Code's per-session task list.
//!
//! The model sends the whole list every time (a full overwrite). Every item needs `content`,
//! `status` and `activeForm`, as in current Claude Code, and at most one item may be
//! `in_progress`. Lists are kept per session key; the least recently written sessions are
//! forgotten beyond [`MAX_SESSIONS`], so memory stays bounded.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

pub use crate::session_map::MAX_SESSIONS;
use crate::session_map::SessionMap;

/// The result text Claude Code returns, which models are trained to expect.
pub const SUCCESS: &str = "Todos have been modified successfully. Ensure that you continue to use the todo list to \
track your progress. Please proceed with the current tasks if applicable";

/// A todo's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// One todo item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Todo {
    /// What needs doing, in the imperative ("Run the tests").
    pub content: String,
    /// pending, in_progress or completed.
    pub status: TodoStatus,
    /// The same task in the present continuous, shown while it runs ("Running the tests").
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

/// Input of [`TodoWrite`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoWriteInput {
    /// The complete, updated todo list (replaces the previous one).
    pub todos: Vec<Todo>,
}

/// The `TodoWrite` tool.
#[derive(Default)]
pub struct TodoWrite {
    lists: SessionMap<Vec<Todo>>,
}

impl std::fmt::Debug for TodoWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TodoWrite").finish_non_exhaustive()
    }
}

/// Checks the rules the schema cannot express.
pub fn validate(todos: &[Todo]) -> Result<(), String> {
    for (i, todo) in todos.iter().enumerate() {
        if todo.content.trim().is_empty() {
            return Err(format!("todos[{i}].content must not be empty"));
        }
        if todo.active_form.trim().is_empty() {
            return Err(format!(
                "todos[{i}].activeForm must not be empty: give the task in the present continuous, e.g. \"Running the tests\""
            ));
        }
    }
    let in_progress: Vec<usize> = todos
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == TodoStatus::InProgress)
        .map(|(i, _)| i)
        .collect();
    if in_progress.len() > 1 {
        return Err(format!(
            "at most one todo can be in_progress at a time; todos {in_progress:?} are. Mark the others pending or completed."
        ));
    }
    Ok(())
}

/// The list as the user sees it.
pub fn render(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return "Todo list cleared.".into();
    }
    todos
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (mark, text) = match t.status {
                TodoStatus::Pending => ("[ ]", &t.content),
                TodoStatus::InProgress => ("[~]", &t.active_form),
                TodoStatus::Completed => ("[x]", &t.content),
            };
            format!("{}. {mark} {text}", i + 1)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl TodoWrite {
    /// The current list of a session (empty if none).
    pub fn list(&self, session_key: &str) -> Vec<Todo> {
        self.lists.get(session_key).unwrap_or_default()
    }

    fn store(&self, session_key: &str, todos: Vec<Todo>) {
        self.lists.insert(session_key, todos);
    }
}

impl Tool for TodoWrite {
    type Input = TodoWriteInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "TodoWrite",
            "Create and update a structured task list for the current session. Send the complete list \
             each time; it replaces the previous one. Use it for work with several steps: add the steps, mark \
             exactly one as in_progress before starting it, and mark it completed as soon as it is done. Each \
             item needs content (imperative: \"Run the tests\"), status (pending, in_progress, completed) and \
             activeForm (present continuous: \"Running the tests\").",
            SideEffect::None,
        )
        .in_group("claude_code")
        .in_group("interaction")
    }

    async fn execute(&self, call: Authorized<TodoWriteInput>) -> ToolOutput {
        let (input, ctx) = call.into_parts();
        if let Err(message) = validate(&input.todos) {
            return ToolOutput::error(message);
        }
        let rendered = render(&input.todos);
        self.store(&ctx.session_key, input.todos);
        ToolOutput::text(SUCCESS).with_user(rendered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn todo(content: &str, status: TodoStatus) -> Todo {
        Todo {
            content: content.into(),
            status,
            active_form: format!("{content}ing"),
        }
    }

    #[test]
    fn validation_rules() {
        use TodoStatus::*;
        assert!(
            validate(&[
                todo("a", InProgress),
                todo("b", Pending),
                todo("c", Completed)
            ])
            .is_ok()
        );
        let err =
            validate(&[todo("a", InProgress), todo("b", InProgress)]).expect_err("two in progress");
        assert!(
            err.starts_with("at most one todo can be in_progress at a time; todos [0, 1]"),
            "{err}"
        );
        let mut blank = todo("x", Pending);
        blank.active_form = " ".into();
        assert!(
            validate(&[blank])
                .expect_err("blank")
                .starts_with("todos[0].activeForm must not be empty")
        );
        assert!(
            validate(&[todo("", Pending)])
                .expect_err("blank")
                .starts_with("todos[0].content")
        );
        assert!(validate(&[]).is_ok());
    }

    #[test]
    fn rendering() {
        use TodoStatus::*;
        assert_eq!(
            render(&[
                todo("Build", Completed),
                todo("Test", InProgress),
                todo("Ship", Pending)
            ]),
            "1. [x] Build\n2. [~] Testing\n3. [ ] Ship"
        );
        assert_eq!(render(&[]), "Todo list cleared.");
    }

    #[test]
    fn memory_is_bounded() {
        let tool = TodoWrite::default();
        for i in 0..(MAX_SESSIONS + 5) {
            tool.store(&format!("s{i}"), vec![todo("x", TodoStatus::Pending)]);
        }
        assert!(
            tool.list("s0").is_empty(),
            "the oldest session was forgotten"
        );
        assert_eq!(tool.list(&format!("s{}", MAX_SESSIONS + 4)).len(), 1);
    }
}
