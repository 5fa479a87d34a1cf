//! Answering a tool's questions to the user (AskUserQuestion's enum form, as MCP elicitation
//! parameters) at the terminal of `talon chat`: each question with numbered choices, answered by
//! number or in the user's own words; an empty answer declines.

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;

use serde_json::{Map, Value, json};
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

fn ask(params: &Value) -> Result<Value, String> {
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|e| format!("no terminal to ask on: {e}"))?;
    let mut reader = BufReader::new(tty.try_clone().map_err(|e| e.to_string())?);
    let message = params.get("message").and_then(Value::as_str).unwrap_or("");
    let empty = Map::new();
    let properties = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut out = format!("\n? {message}\n");
    let mut content = Map::new();
    for (key, field) in properties {
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
        let question = description.lines().next().unwrap_or(key);
        out.push_str(&format!("\n{question}\n"));
        for (i, line) in description.lines().skip(1).enumerate() {
            out.push_str(&format!("  {}. {line}\n", i + 1));
        }
        out.push_str(if many {
            "numbers separated by commas, or your own answer (empty: decline): "
        } else {
            "a number, or your own answer (empty: decline): "
        });
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
}
