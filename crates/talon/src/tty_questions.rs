//! Answering a tool's questions to the user (AskUserQuestion's enum form, as MCP elicitation
//! parameters) at the terminal of `talon chat`: each question with numbered choices, answered by
//! number or in the user's own words; an empty answer declines.

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use talon_core::visible::{visible, visible_lines};
use talon_core::{ClientHandle, ClientRequests, context::ClientFuture};

/// Asks on `/dev/tty`, one form at a time.
#[derive(Debug, Default)]
pub struct TtyQuestions {
    turn: Arc<std::sync::Mutex<()>>,
}

impl TtyQuestions {
    /// A handle, if this process has a terminal to ask on.
    pub fn detect() -> Option<ClientHandle> {
        crate::prompt::TtyPrompter::detect()
            .map(|_| ClientHandle(Arc::new(TtyQuestions::default())))
    }
}

/// One typed answer to a field: choice numbers (`2`, `1,3`) or labels pick options; other
/// text is the user's own answer. `None` when empty.
pub fn parse_choice(line: &str, choices: &[String], many: bool) -> Option<Value> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let pick = |part: &str| -> String {
        let part = part.trim();
        match part.parse::<usize>() {
            Ok(n) if (1..=choices.len()).contains(&n) => choices[n - 1].clone(),
            _ => choices
                .iter()
                .find(|c| c.eq_ignore_ascii_case(part))
                .cloned()
                .unwrap_or_else(|| part.to_string()),
        }
    };
    Some(if many {
        Value::Array(
            line.split(',')
                .filter(|p| !p.trim().is_empty())
                .map(|p| Value::String(pick(p)))
                .collect(),
        )
    } else {
        Value::String(pick(line))
    })
}

/// Lines of a message start with this, so none can pass for the form's own text.
const GUTTER: &str = "  | ";

/// The text shown before the fields: the tool's or server's message, behind [`GUTTER`], with
/// control, bidi and invisible characters spelled out (see [`talon_core::visible`]).
fn render_message(params: &Value) -> String {
    match params.get("message").and_then(Value::as_str) {
        Some(message) if !message.is_empty() => {
            format!(
                "\n? a question for you:\n{}\n",
                visible_lines(message, GUTTER)
            )
        }
        _ => "\n? a question for you:\n".to_string(),
    }
}

/// One field: its text (title, question, numbered choices, what to type) and its choices.
///
/// The numbers always pick the values listed beside them: a choice's line is the matching
/// line of the description only when that line starts with the choice itself (AskUserQuestion
/// writes `label: what it means`); otherwise the choice is shown as it is, so a description
/// cannot show one option while its number sends another.
fn render_field(key: &str, field: &Value) -> (String, Vec<String>, bool) {
    let many = field.get("type").and_then(Value::as_str) == Some("array");
    let choices: Vec<String> = field
        .get("enum")
        .or_else(|| field.pointer("/items/enum"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect();
    let description = field
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut lines = description.lines();
    let question = lines.next().filter(|q| !q.trim().is_empty()).unwrap_or(key);
    let details: Vec<&str> = lines.collect();
    let matches_choices = details.len() == choices.len()
        && details
            .iter()
            .zip(&choices)
            .all(|(line, choice)| line.starts_with(choice.as_str()));
    let mut out = String::from("\n");
    if let Some(title) = field.get("title").and_then(Value::as_str) {
        out.push_str(&format!("[{}] ", visible(title)));
    }
    out.push_str(&visible(question));
    out.push('\n');
    if !matches_choices && !details.is_empty() {
        out.push_str(&visible_lines(&details.join("\n"), GUTTER));
        out.push('\n');
    }
    for (i, choice) in choices.iter().enumerate() {
        let shown = if matches_choices { details[i] } else { choice };
        out.push_str(&format!("  {}. {}\n", i + 1, visible(shown)));
    }
    out.push_str(if many {
        "numbers separated by commas, or your own answer (empty: decline): "
    } else if choices.is_empty() {
        "your answer (empty: decline): "
    } else {
        "a number, or your own answer (empty: decline): "
    });
    (out, choices, many)
}

fn ask(params: &Value) -> Result<Value, String> {
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|e| format!("no terminal to ask on: {e}"))?;
    let _asking = crate::prompt::Asking::start(&mut tty);
    let mut reader = BufReader::new(tty.try_clone().map_err(|e| e.to_string())?);
    let empty = Map::new();
    let properties = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut out = render_message(params);
    let mut content = Map::new();
    for (key, field) in properties {
        let (text, choices, many) = render_field(key, field);
        out.push_str(&text);
        tty.write_all(out.as_bytes()).map_err(|e| e.to_string())?;
        tty.flush().map_err(|e| e.to_string())?;
        out.clear();
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|e| e.to_string())?;
        match parse_choice(&line, &choices, many) {
            Some(answer) => {
                content.insert(key.clone(), answer);
            }
            None => return Ok(json!({"action": "decline"})),
        }
    }
    Ok(json!({"action": "accept", "content": content}))
}

impl ClientRequests for TtyQuestions {
    fn elicit(&self, params: Value) -> ClientFuture {
        let turn = Arc::clone(&self.turn);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let _turn = turn
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                ask(&params)
            })
            .await
            .map_err(|e| format!("the terminal prompt failed: {e}"))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_labels_and_own_words() {
        let choices = vec!["SQLite".to_string(), "PostgreSQL".to_string()];
        assert_eq!(
            parse_choice("2\n", &choices, false),
            Some(json!("PostgreSQL"))
        );
        assert_eq!(
            parse_choice("sqlite", &choices, false),
            Some(json!("SQLite"))
        );
        assert_eq!(
            parse_choice("MariaDB", &choices, false),
            Some(json!("MariaDB"))
        );
        assert_eq!(
            parse_choice("1, 2", &choices, true),
            Some(json!(["SQLite", "PostgreSQL"]))
        );
        assert_eq!(parse_choice("  \n", &choices, false), None);
        assert_eq!(
            parse_choice("3", &choices, false),
            Some(json!("3")),
            "out of range is text"
        );
    }

    #[test]
    fn fields_show_their_title_question_and_the_choices_their_numbers_send() {
        let asked = json!({"type": "string", "title": "Database",
            "description": "Which database?\nSQLite: small\nPostgreSQL: big",
            "enum": ["SQLite", "PostgreSQL"]});
        let (text, choices, many) = render_field("q1", &asked);
        assert_eq!(
            text,
            "\n[Database] Which database?\n  1. SQLite: small\n  2. PostgreSQL: big\na number, or your own answer (empty: decline): "
        );
        assert_eq!(choices, ["SQLite", "PostgreSQL"]);
        assert!(!many);
        // A description listing other options than the values the numbers send is shown as
        // text; the numbered list is the values themselves.
        let spoof = json!({"type": "string", "description": "Continue?\nCancel\nKeep my files",
            "enum": ["delete everything", "format disk"]});
        let (text, _, _) = render_field("q", &spoof);
        assert!(
            text.contains(
                "  | Cancel\n  | Keep my files\n  1. delete everything\n  2. format disk\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn escapes_in_messages_titles_and_options_are_spelled_out() {
        let params = json!({"message": "Pick\x1b]52;c;ZXZpbA==\x07 one\nsecond line"});
        assert_eq!(
            render_message(&params),
            "\n? a question for you:\n  | Pick\\x1b]52;c;ZXZpbA==\\x07 one\n  | second line\n"
        );
        let field = json!({"type": "array", "title": "T\u{202e}x",
            "description": "Q\x1b[2J?", "items": {"enum": ["a\u{9b}31m", "b"]}});
        let (text, choices, many) = render_field("k", &field);
        assert!(many);
        assert_eq!(
            choices,
            ["a\u{9b}31m", "b"],
            "the values sent are unchanged"
        );
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("[T\\u{202e}x] Q\\x1b[2J?"), "{text}");
        assert!(text.contains("1. a\\u{9b}31m"), "{text}");
    }
}
