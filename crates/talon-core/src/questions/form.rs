//! Reading a person's typed answers into an elicitation form's fields (the MCP form schema
//! that AskUserQuestion and ExitPlanMode use too): what a field takes, and what a typed line
//! means for it. Kept apart from any terminal so every place a person types an answer reads it
//! the same way; how a form is shown is the asker's.
//!
//! Enter takes the default (or leaves an optional field out); a required field with no default
//! is asked again. What is typed becomes the field's type: a number for `number` and `integer`
//! fields (checked against their bounds), `true`/`false` for booleans (`y`, `n`, …), the picked
//! values for choices (by number or label; other text is the person's own answer, as
//! AskUserQuestion allows), a list for multi-select fields.

use serde_json::{Map, Value, json};

/// What a field takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
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
pub struct Field {
    pub key: String,
    pub kind: Kind,
    pub default: Option<Value>,
    pub required: bool,
}

/// A typed line's meaning for a field.
#[derive(Debug, PartialEq)]
pub enum Typed {
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

/// The field `key` of a form, from its schema.
pub fn field(key: &str, schema: &Value, required: bool) -> Field {
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

/// What the typed `line` means for `field`.
pub fn typed(field: &Field, line: &str) -> Typed {
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

/// Why `FIELD=VALUE` pairs are not an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairsError {
    #[error("give the answer as FIELD=VALUE (the fields of the question's form), or decline it")]
    Empty,
    #[error("{0:?} is not FIELD=VALUE")]
    NotAPair(String),
}

/// An answer's content from `FIELD=VALUE` pairs (`talon questions answer`): a value that is a
/// JSON number or boolean is taken as one, anything else as a string.
pub fn pairs(fields: &[String]) -> Result<Map<String, Value>, PairsError> {
    if fields.is_empty() {
        return Err(PairsError::Empty);
    }
    fields
        .iter()
        .map(|field| {
            let (name, value) = field
                .split_once('=')
                .ok_or_else(|| PairsError::NotAPair(field.clone()))?;
            let value = match serde_json::from_str::<Value>(value) {
                Ok(v @ (Value::Bool(_) | Value::Number(_))) => v,
                _ => Value::String(value.to_string()),
            };
            Ok((name.to_string(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn titled_choices_send_their_values() {
        let f = field(
            "size",
            &json!({"type": "string", "oneOf": [
                {"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]}),
            true,
        );
        assert_eq!(typed(&f, "2"), Typed::Value(json!("l")));
        assert_eq!(
            f.kind,
            Kind::Text {
                choices: vec![
                    ("s".into(), "Small (s)".into()),
                    ("l".into(), "Large (l)".into())
                ]
            }
        );
    }

    #[test]
    fn pairs_become_an_answers_content() {
        let pairs =
            |fields: &[&str]| pairs(&fields.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let content = pairs(&["q1=PostgreSQL", "n=3", "ok=true"]).expect("parses");
        assert_eq!(
            Value::Object(content),
            json!({"q1": "PostgreSQL", "n": 3, "ok": true})
        );
        assert_eq!(
            pairs(&["nothing"]),
            Err(PairsError::NotAPair("nothing".into()))
        );
        assert_eq!(pairs(&[]), Err(PairsError::Empty));
    }
}
