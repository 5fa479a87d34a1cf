//! Answering a tool's or an MCP server's questions to the user (MCP elicitation forms, which
//! AskUserQuestion and ExitPlanMode use too) at the terminal of `talon chat` and `talon tool
//! call`.
//!
//! A form is asked one field at a time, each shown with its title, question, choices, type and
//! default; what a typed line means is [`talon_core::questions::form`]'s. `/decline` declines the form,
//! `/cancel` (or the end of input) dismisses it. The server's words are shown with control
//! characters spelled out.

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use talon_core::questions::form::{Field, Kind, Typed, field, typed};
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

/// Lines of a message start with this, so none can pass for the form's own text.
const GUTTER: &str = "  | ";

/// The text shown before the fields: the tool's or server's message, behind [`GUTTER`], with
/// control, bidi and invisible characters spelled out (see [`talon_core::visible`]), and how
/// to answer.
fn render_message(params: &Value) -> String {
    let mut out = String::from("\n? a question for you:\n");
    if let Some(message) = params.get("message").and_then(Value::as_str)
        && !message.is_empty()
    {
        out.push_str(&visible_lines(message, GUTTER));
        out.push('\n');
    }
    out.push_str("(Enter takes the default; /decline declines, /cancel dismisses)\n");
    out
}

/// A value as the form shows it: text as it is, anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => visible(s),
        other => visible(&other.to_string()),
    }
}

/// One field's text: title, question, numbered choices, then what to type.
///
/// The numbers always pick the values listed beside them: a choice's line is the matching
/// line of the description only when that line starts with the choice itself (AskUserQuestion
/// writes `label: what it means`); otherwise the choice is shown as it is, so a description
/// cannot show one option while its number sends another.
fn render_field(field: &Field, schema: &Value) -> String {
    let choices = match &field.kind {
        Kind::Text { choices } | Kind::Many { choices } => choices.as_slice(),
        _ => &[],
    };
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut lines = description.lines();
    let question = lines
        .next()
        .filter(|q| !q.trim().is_empty())
        .unwrap_or(&field.key);
    let details: Vec<&str> = lines.collect();
    let matches_choices = !choices.is_empty()
        && details.len() == choices.len()
        && details
            .iter()
            .zip(choices)
            .all(|(line, (value, _))| line.starts_with(value.as_str()));
    let mut out = String::from("\n");
    if let Some(title) = schema.get("title").and_then(Value::as_str) {
        out.push_str(&format!("[{}] ", visible(title)));
    }
    out.push_str(&visible(question));
    out.push('\n');
    if !matches_choices && !details.is_empty() {
        out.push_str(&visible_lines(&details.join("\n"), GUTTER));
        out.push('\n');
    }
    for (i, (_, label)) in choices.iter().enumerate() {
        let label = if matches_choices { details[i] } else { label };
        out.push_str(&format!("  {}. {}\n", i + 1, visible(label)));
    }
    let what = match &field.kind {
        Kind::Many { .. } => "numbers separated by commas, or your own answer",
        Kind::Text { choices } if !choices.is_empty() => "a number, or your own answer",
        Kind::Text { .. } => "your answer",
        Kind::Number { integer: true, .. } => "a whole number",
        Kind::Number { .. } => "a number",
        Kind::Boolean => "y or n",
    };
    out.push_str(what);
    match (&field.default, field.required) {
        (Some(default), _) => out.push_str(&format!(" [default: {}]", shown(default))),
        (None, false) => out.push_str(" [optional]"),
        (None, true) => {}
    }
    out.push_str(": ");
    out
}

/// Asks the form in `params` on `tty`: the elicitation result.
fn ask_on(
    params: &Value,
    tty: &mut impl Write,
    input: &mut impl BufRead,
) -> std::io::Result<Value> {
    let empty = Map::new();
    let schema = params.get("requestedSchema").unwrap_or(&Value::Null);
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    tty.write_all(render_message(params).as_bytes())?;
    let mut content = Map::new();
    for (key, field_schema) in properties {
        let field = field(key, field_schema, required.contains(&key.as_str()));
        tty.write_all(render_field(&field, field_schema).as_bytes())?;
        loop {
            tty.flush()?;
            let mut line = String::new();
            if input.read_line(&mut line)? == 0 {
                return Ok(json!({"action": "cancel"}));
            }
            match line.trim() {
                "/decline" => return Ok(json!({"action": "decline"})),
                "/cancel" => return Ok(json!({"action": "cancel"})),
                _ => {}
            }
            match typed(&field, &line) {
                Typed::Value(value) => {
                    content.insert(key.clone(), value);
                    break;
                }
                Typed::Skip => break,
                Typed::Again(why) => tty.write_all(format!("  ({why}) ").as_bytes())?,
            }
        }
    }
    Ok(json!({"action": "accept", "content": content}))
}

fn ask(params: &Value) -> Result<Value, String> {
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|e| format!("no terminal to ask on: {e}"))?;
    let _asking = crate::prompt::Asking::start(&mut tty);
    let mut reader = BufReader::new(tty.try_clone().map_err(|e| e.to_string())?);
    ask_on(params, &mut tty, &mut reader).map_err(|e| format!("the terminal prompt failed: {e}"))
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

    /// The form `params` answered with `typed` lines: the result and what the terminal showed.
    fn answer(params: &Value, typed: &str) -> (Value, String) {
        let mut screen = Vec::new();
        let mut input = std::io::Cursor::new(typed.as_bytes().to_vec());
        let result = ask_on(params, &mut screen, &mut input).expect("asks");
        (result, String::from_utf8(screen).expect("text"))
    }

    fn form(properties: Value, required: &[&str]) -> Value {
        json!({"message": "Tell me", "requestedSchema": {
            "type": "object", "properties": properties, "required": required}})
    }

    #[test]
    fn enter_takes_the_defaults_and_the_form_shows_them() {
        let params = form(
            json!({
                "name": {"type": "string", "default": "Ada"},
                "age": {"type": "integer", "default": 36},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
            }),
            &[],
        );
        let (result, screen) = answer(&params, "\n\n\n\n\n");
        assert_eq!(
            result,
            json!({"action": "accept", "content": {
                "name": "Ada", "age": 36, "score": 95.5, "status": "active", "verified": true}})
        );
        for shown in [
            "[default: Ada]",
            "[default: 36]",
            "[default: 95.5]",
            "[default: active]",
            "y or n [default: true]",
        ] {
            assert!(screen.contains(shown), "{shown} missing from {screen}");
        }
    }

    #[test]
    fn typed_numbers_and_booleans_are_sent_as_numbers_and_booleans() {
        let params = form(
            json!({
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean"},
                "note": {"type": "string"},
            }),
            &["age", "ratio", "ok"],
        );
        // Wrong input is asked again with the reason; the optional note is left out.
        let (result, screen) = answer(&params, "old\n200\n42\n0.25\nmaybe\nyes\n\n");
        assert_eq!(
            result,
            json!({"action": "accept", "content": {"age": 42, "ratio": 0.25, "ok": true}})
        );
        assert!(screen.contains("\"old\" is not a whole number"), "{screen}");
        assert!(screen.contains("at most 150"), "{screen}");
        assert!(screen.contains("type y or n"), "{screen}");
        assert!(screen.contains("[optional]"), "{screen}");
    }

    #[test]
    fn a_required_field_is_asked_again_and_the_form_can_be_declined_or_dismissed() {
        let params = form(json!({"q": {"type": "string"}}), &["q"]);
        let (result, screen) = answer(&params, "\n/decline\n");
        assert_eq!(result, json!({"action": "decline"}));
        assert!(screen.contains("this answer is required"), "{screen}");
        let (result, _) = answer(&params, "/cancel\n");
        assert_eq!(result, json!({"action": "cancel"}));
        let (result, _) = answer(&params, "");
        assert_eq!(
            result,
            json!({"action": "cancel"}),
            "the end of input dismisses"
        );
    }

    #[test]
    fn titled_choices_send_their_values() {
        let f = field(
            "size",
            &json!({"type": "string", "oneOf": [
                {"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]}),
            true,
        );
        let text = render_field(&f, &json!({}));
        assert!(text.contains("  1. Small (s)\n  2. Large (l)\n"), "{text}");
    }

    #[test]
    fn fields_show_their_title_question_and_the_choices_their_numbers_send() {
        let asked = json!({"type": "string", "title": "Database",
            "description": "Which database?\nSQLite: small\nPostgreSQL: big",
            "enum": ["SQLite", "PostgreSQL"]});
        let text = render_field(&field("q1", &asked, true), &asked);
        assert_eq!(
            text,
            "\n[Database] Which database?\n  1. SQLite: small\n  2. PostgreSQL: big\na number, or your own answer: "
        );
        // A description listing other options than the values the numbers send is shown as
        // text; the numbered list is the values themselves.
        let spoof = json!({"type": "string", "description": "Continue?\nCancel\nKeep my files",
            "enum": ["delete everything", "format disk"]});
        let text = render_field(&field("q", &spoof, true), &spoof);
        assert!(
            text.contains(
                "  | Cancel\n  | Keep my files\n  1. delete everything\n  2. format disk\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn escapes_in_messages_titles_options_and_defaults_are_spelled_out() {
        let params = json!({"message": "Pick\x1b]52;c;ZXZpbA==\x07 one\nsecond line"});
        assert!(
            render_message(&params).starts_with(
                "\n? a question for you:\n  | Pick\\x1b]52;c;ZXZpbA==\\x07 one\n  | second line\n"
            ),
            "{}",
            render_message(&params)
        );
        let schema = json!({"type": "array", "title": "T\u{202e}x",
            "description": "Q\x1b[2J?", "items": {"enum": ["a\u{9b}31m", "b"]},
            "default": ["\x1b[31m"]});
        let f = field("k", &schema, true);
        assert_eq!(
            typed(&f, "1"),
            Typed::Value(json!(["a\u{9b}31m"])),
            "the values sent are unchanged"
        );
        let text = render_field(&f, &schema);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("[T\\u{202e}x] Q\\x1b[2J?"), "{text}");
        assert!(text.contains("1. a\\u{9b}31m"), "{text}");
    }
}
