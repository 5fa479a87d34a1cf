//! `AskUserQuestion`: Claude Code's multiple-choice questions to the user (1–4 questions, 2–4
//! options each, optionally several answers). The questions go to whoever can answer for the
//! caller: an MCP client that supports elicitation (as an `elicitation/create` form of enum
//! fields), or the terminal of `talon chat`. Where nobody can answer, the tool says so, and the
//! model asks in its reply instead.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

/// One choice.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionOption {
    /// The choice as shown (1–5 words).
    pub label: String,
    /// What choosing it means.
    #[serde(default)]
    pub description: String,
}

/// One question.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// The full question, ending with a question mark.
    pub question: String,
    /// A very short label for it (at most 12 characters), such as "Auth method".
    pub header: String,
    /// 2–4 choices; the user may also answer in their own words.
    pub options: Vec<QuestionOption>,
    /// Whether several choices may be picked.
    #[serde(rename = "multiSelect", default)]
    pub multi_select: bool,
}

/// Input of [`AskUserQuestion`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUserQuestionInput {
    /// 1–4 questions.
    pub questions: Vec<Question>,
}

/// The `AskUserQuestion` tool.
#[derive(Debug, Clone, Default)]
pub struct AskUserQuestion;

/// What is wrong with `questions`, if anything.
fn check(questions: &[Question]) -> Result<(), String> {
    if !(1..=4).contains(&questions.len()) {
        return Err(format!(
            "ask 1 to 4 questions at a time, not {}",
            questions.len()
        ));
    }
    for (i, q) in questions.iter().enumerate() {
        let n = i + 1;
        if q.question.trim().is_empty() {
            return Err(format!("question {n} is empty"));
        }
        if q.header.chars().count() > 12 || q.header.trim().is_empty() {
            return Err(format!(
                "question {n}: header must be 1-12 characters, not {:?}",
                q.header
            ));
        }
        if !(2..=4).contains(&q.options.len()) {
            return Err(format!(
                "question {n}: give 2 to 4 options, not {}",
                q.options.len()
            ));
        }
        let mut labels: Vec<&str> = q.options.iter().map(|o| o.label.as_str()).collect();
        labels.sort_unstable();
        labels.dedup();
        if labels.len() != q.options.len() || labels.iter().any(|l| l.trim().is_empty()) {
            return Err(format!(
                "question {n}: option labels must be distinct and not empty"
            ));
        }
    }
    Ok(())
}

/// The `elicitation/create` parameters asking `questions`: one enum field per question.
pub fn elicitation(questions: &[Question]) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        let key = format!("q{}", i + 1);
        let labels: Vec<&str> = q.options.iter().map(|o| o.label.as_str()).collect();
        let details: Vec<String> = q
            .options
            .iter()
            .map(|o| {
                if o.description.is_empty() {
                    o.label.clone()
                } else {
                    format!("{}: {}", o.label, o.description)
                }
            })
            .collect();
        let description = format!("{}\n{}", q.question, details.join("\n"));
        let field = if q.multi_select {
            json!({"type": "array", "title": q.header, "description": description,
                   "items": {"type": "string", "enum": labels}, "minItems": 1})
        } else {
            json!({"type": "string", "title": q.header, "description": description, "enum": labels})
        };
        properties.insert(key.clone(), field);
        required.push(key);
    }
    let message = if questions.len() == 1 {
        questions[0].question.clone()
    } else {
        format!("The assistant has {} questions for you.", questions.len())
    };
    json!({
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": required},
    })
}

/// The model's view of an accepted answer, in Claude Code's words.
pub fn answered(questions: &[Question], content: &Value) -> Result<String, String> {
    let mut parts = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        let answer = match content.get(format!("q{}", i + 1)) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            _ => return Err(format!("no answer to question {}", i + 1)),
        };
        parts.push(format!("\"{}\"=\"{}\"", q.question, answer));
    }
    Ok(format!(
        "User has answered your questions: {}. You can now continue with the user's answers in mind.",
        parts.join(", ")
    ))
}

impl Tool for AskUserQuestion {
    type Input = AskUserQuestionInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "AskUserQuestion",
            "Ask the user 1-4 multiple-choice questions (2-4 options each; multiSelect for \
             several answers) when you need their decision to continue: preferences, unclear \
             requirements, choices between approaches. The user may answer in their own words.",
            SideEffect::Blocking,
        )
        .in_group("interaction")
    }

    async fn execute(&self, call: Authorized<AskUserQuestionInput>) -> ToolOutput {
        let questions = &call.input().questions;
        if let Err(e) = check(questions) {
            return ToolOutput::error(e);
        }
        let Some(client) = call.ctx().client.clone() else {
            return ToolOutput::error(
                "Nobody can answer questions here (this client has no way to ask its user). Ask \
                 your questions in your reply instead.",
            );
        };
        match client.0.elicit(elicitation(questions)).await {
            Ok(result) => match result.get("action").and_then(Value::as_str) {
                Some("accept") => {
                    match answered(questions, result.get("content").unwrap_or(&Value::Null)) {
                        Ok(text) => ToolOutput::text(text),
                        Err(e) => ToolOutput::error(format!("The answer was incomplete: {e}")),
                    }
                }
                Some("decline") => ToolOutput::error(
                    "The user declined to answer. Continue without their answers, or ask differently.",
                ),
                _ => ToolOutput::error("The user dismissed the questions without answering."),
            },
            Err(e) => ToolOutput::error(format!("The questions could not be asked: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(header: &str, labels: &[&str], multi: bool) -> Question {
        Question {
            question: format!("Which {header}?"),
            header: header.into(),
            options: labels
                .iter()
                .map(|l| QuestionOption {
                    label: (*l).into(),
                    description: format!("use {l}"),
                })
                .collect(),
            multi_select: multi,
        }
    }

    #[test]
    fn questions_become_an_enum_form_and_answers_a_sentence() {
        let questions = [
            q("Database", &["SQLite", "PostgreSQL"], false),
            q("Extras", &["Redis", "NATS", "None"], true),
        ];
        assert_eq!(check(&questions), Ok(()));
        let params = elicitation(&questions);
        assert_eq!(params["message"], "The assistant has 2 questions for you.");
        let props = &params["requestedSchema"]["properties"];
        assert_eq!(props["q1"]["enum"], json!(["SQLite", "PostgreSQL"]));
        assert_eq!(props["q1"]["title"], "Database");
        assert!(
            props["q1"]["description"]
                .as_str()
                .unwrap_or_default()
                .contains("SQLite: use SQLite")
        );
        assert_eq!(
            props["q2"]["items"]["enum"],
            json!(["Redis", "NATS", "None"])
        );
        let text = answered(
            &questions,
            &json!({"q1": "PostgreSQL", "q2": ["Redis", "NATS"]}),
        );
        assert_eq!(
            text.as_deref(),
            Ok(
                "User has answered your questions: \"Which Database?\"=\"PostgreSQL\", \"Which Extras?\"=\"Redis, NATS\". You can now continue with the user's answers in mind."
            )
        );
        assert!(answered(&questions, &json!({"q1": "SQLite"})).is_err());
    }

    #[test]
    fn bad_questions_say_what_to_fix() {
        assert!(check(&[]).unwrap_err().contains("1 to 4"));
        assert!(
            check(&[q("A", &["x"], false)])
                .unwrap_err()
                .contains("2 to 4 options")
        );
        assert!(
            check(&[q("Much too long header", &["x", "y"], false)])
                .unwrap_err()
                .contains("1-12")
        );
        assert!(
            check(&[q("Dup", &["x", "x"], false)])
                .unwrap_err()
                .contains("distinct")
        );
    }
}
