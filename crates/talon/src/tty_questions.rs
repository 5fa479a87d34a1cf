//! Answering a tool's or an MCP server's questions to the user (MCP elicitation forms, which
//! AskUserQuestion and ExitPlanMode use too) at the terminal of `talon chat` and `talon tool
//! call`.
//!
//! A form is asked one field at a time, each shown with its title, question, choices, type and
//! default. Enter takes the default (or leaves an optional field out); a required field with no
//! default is asked again. What is typed becomes the field's type: a number for `number` and
//! `integer` fields (checked against their bounds), `true`/`false` for booleans (`y`, `n`, …),
//! the picked values for choices (by number or label; other text is the user's own answer, as
//! AskUserQuestion allows), a list for multi-select fields. `/decline` declines the form,
//! `/cancel` (or the end of input) dismisses it. The server's words are shown with control
//! characters spelled out.

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

/// What a field takes.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Text; `choices` (values with what to show for each) are picked by number or label.
    Text {
        choices: Vec<(String, String)>,
    },
    /// Several of `choices`, by numbers separated by commas.
    Many {
        choices: Vec<(String, String)>,
    },
    Number {
        integer: bool,
        min: Option<f64>,
        max: Option<f64>,
    },
    Boolean,
}

/// One field of a form, as asked.
#[derive(Debug, Clone, PartialEq)]
struct Field {
    key: String,
    kind: Kind,
    default: Option<Value>,
    required: bool,
}

/// A typed line's meaning for a field.
#[derive(Debug, PartialEq)]
enum Typed {
    /// The field's value.
    Value(Value),
    /// Leave the field out (Enter on an optional field with no default).
    Skip,
    /// Not an answer for this field: why, and the field is asked again.
    Again(String),
}

/// The choices of a field: `enum` values (of the field or of its items, named by a legacy
/// `enumNames` beside them), or titled `oneOf` / `anyOf` constants (SEP-1330), each with what
/// to show beside its number.
fn choices_of(field: &Value) -> Vec<(String, String)> {
    let listed = field.get("enum").or_else(|| field.pointer("/items/enum"));
    if let Some(values) = listed.and_then(Value::as_array) {
        let names = field.get("enumNames").and_then(Value::as_array);
        return values
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let value = c.as_str()?.to_string();
                let name = names.and_then(|n| n.get(i)).and_then(Value::as_str);
                let shown = name.map_or_else(|| value.clone(), |n| format!("{n} ({value})"));
                Some((value, shown))
            })
            .collect();
    }
    let titled = ["oneOf", "anyOf"].iter().find_map(|key| {
        field
            .get(*key)
            .or_else(|| field.get("items").and_then(|items| items.get(*key)))
            .and_then(Value::as_array)
    });
    titled
        .into_iter()
        .flatten()
        .filter_map(|option| {
            let value = option.get("const")?.as_str()?.to_string();
            let shown = option
                .get("title")
                .and_then(Value::as_str)
                .map_or_else(|| value.clone(), |t| format!("{t} ({value})"));
            Some((value, shown))
        })
        .collect()
}

fn field(key: &str, schema: &Value, required: bool) -> Field {
    let bound = |name: &str| schema.get(name).and_then(Value::as_f64);
    let kind = match schema.get("type").and_then(Value::as_str) {
        Some("array") => Kind::Many {
            choices: choices_of(schema),
        },
        Some(t @ ("number" | "integer")) => Kind::Number {
            integer: t == "integer",
            min: bound("minimum"),
            max: bound("maximum"),
        },
        Some("boolean") => Kind::Boolean,
        _ => Kind::Text {
            choices: choices_of(schema),
        },
    };
    Field {
        key: key.to_string(),
        kind,
        default: schema.get("default").cloned(),
        required,
    }
}

/// A choice picked by its number or its value (any case); `None` when `part` is neither.
fn pick(part: &str, choices: &[(String, String)]) -> Option<String> {
    match part.parse::<usize>() {
        Ok(n) if (1..=choices.len()).contains(&n) => Some(choices[n - 1].0.clone()),
        _ => choices
            .iter()
            .find(|(value, _)| value.eq_ignore_ascii_case(part))
            .map(|(value, _)| value.clone()),
    }
}

/// What `line` means for `field`.
fn typed(field: &Field, line: &str) -> Typed {
    let line = line.trim();
    if line.is_empty() {
        return match (&field.default, field.required) {
            (Some(default), _) => Typed::Value(default.clone()),
            (None, false) => Typed::Skip,
            (None, true) => {
                Typed::Again("this answer is required (or type /decline or /cancel)".to_string())
            }
        };
    }
    match &field.kind {
        Kind::Text { choices } => Typed::Value(Value::String(
            pick(line, choices).unwrap_or_else(|| line.to_string()),
        )),
        Kind::Many { choices } => Typed::Value(Value::Array(
            line.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| Value::String(pick(p, choices).unwrap_or_else(|| p.to_string())))
                .collect(),
        )),
        Kind::Boolean => match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" | "on" => Typed::Value(Value::Bool(true)),
            "n" | "no" | "false" | "0" | "off" => Typed::Value(Value::Bool(false)),
            _ => Typed::Again("type y or n".to_string()),
        },
        Kind::Number { integer, min, max } => number(line, *integer, *min, *max),
    }
}

fn number(line: &str, integer: bool, min: Option<f64>, max: Option<f64>) -> Typed {
    let value = if integer {
        match line.parse::<i64>() {
            Ok(n) => json!(n),
            Err(_) => return Typed::Again(format!("{line:?} is not a whole number")),
        }
    } else {
        match line.parse::<f64>() {
            Ok(n) if n.is_finite() => json!(n),
            _ => return Typed::Again(format!("{line:?} is not a number")),
        }
    };
    let n = value.as_f64().unwrap_or_default();
    match (min, max) {
        (Some(min), _) if n < min => Typed::Again(format!("at least {min}")),
        (_, Some(max)) if n > max => Typed::Again(format!("at most {max}")),
        _ => Typed::Value(value),
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
    fn numbers_labels_and_own_words_pick_choices() {
        let f = field(
            "db",
            &json!({"type": "string", "enum": ["SQLite", "PostgreSQL"]}),
            true,
        );
        let value = |line: &str| match typed(&f, line) {
            Typed::Value(v) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(value("2\n"), json!("PostgreSQL"));
        assert_eq!(value("sqlite"), json!("SQLite"));
        assert_eq!(value("MariaDB"), json!("MariaDB"));
        assert_eq!(value("3"), json!("3"), "out of range is text");
        let many = field(
            "dbs",
            &json!({"type": "array", "items": {"enum": ["SQLite", "PostgreSQL"]}}),
            true,
        );
        assert_eq!(
            typed(&many, "1, 2"),
            Typed::Value(json!(["SQLite", "PostgreSQL"]))
        );
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
        assert_eq!(typed(&f, "2"), Typed::Value(json!("l")));
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
