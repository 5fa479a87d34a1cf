//! The conversation in a provider-neutral form: each provider module translates it to and from
//! its own wire format, so the loop and the store never see provider JSON.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the person (or the calling agent) said, and images they showed (an API client's
    /// image parts).
    User {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
    },
    /// What the model answered: text, tool calls, or both.
    Assistant {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallRequest>,
    },
    /// The results of the previous assistant message's tool calls, one per call, in its order.
    ToolResults { results: Vec<ToolResult> },
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User {
            text: text.into(),
            images: Vec::new(),
        }
    }
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The provider's call id (`call_…`, `toolu_…`); every call gets exactly one result.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text, possibly invalid (the pipeline says so).
    pub arguments: String,
}

/// The result of one tool call, as sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
    /// Images the tool returned (base64 data with their MIME type); providers that accept images
    /// in tool results get them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// An image in a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    pub mime_type: String,
    /// Base64 (standard alphabet, padded).
    pub data: String,
}

/// `messages` as sent to a model: the images of tool results before the latest user message
/// (earlier turns) are replaced by a note in the result's text. An image is shown to the model
/// in the turn its tool returned it; re-sending every image of a session with every request
/// would make each request grow with the session (images are megabytes each).
pub fn with_earlier_images_omitted(messages: &[Message]) -> Cow<'_, [Message]> {
    let current = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .unwrap_or(0);
    let earlier_images = messages[..current].iter().any(|m| {
        matches!(m, Message::ToolResults { results } if results.iter().any(|r| !r.images.is_empty()))
    });
    if !earlier_images {
        return Cow::Borrowed(messages);
    }
    let mut out = messages.to_vec();
    for message in &mut out[..current] {
        let Message::ToolResults { results } = message else {
            continue;
        };
        for result in results.iter_mut().filter(|r| !r.images.is_empty()) {
            let kinds: Vec<&str> = result.images.iter().map(|i| i.mime_type.as_str()).collect();
            result.content.push_str(&format!(
                "\n[{} image(s) ({}) shown in an earlier turn are not repeated; call the tool again to see them]",
                kinds.len(),
                kinds.join(", ")
            ));
            result.images.clear();
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result_with_image(id: &str) -> Message {
        Message::ToolResults {
            results: vec![ToolResult {
                call_id: id.into(),
                content: "a screenshot".into(),
                is_error: false,
                images: vec![Image {
                    mime_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                }],
            }],
        }
    }

    fn images(messages: &[Message]) -> usize {
        messages
            .iter()
            .map(|m| match m {
                Message::ToolResults { results } => results.iter().map(|r| r.images.len()).sum(),
                _ => 0,
            })
            .sum()
    }

    /// Issue 22 item 16: an MCP image stays in the session, but is sent to the model only in the
    /// turn its tool returned it, not again with every later request (of either provider).
    #[test]
    fn h22_16_images_of_earlier_turns_are_not_resent() {
        use crate::provider::{ChatRequest, anthropic, openai};
        let call = |id: &str| Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCallRequest {
                id: id.into(),
                name: "mcp__shot__take".into(),
                arguments: "{}".into(),
            }],
        };
        let sent_images = |messages: &[Message]| {
            let request = ChatRequest {
                model: "m",
                system: None,
                messages,
                tools: &[],
                max_tokens: 100,
                sampling: &crate::provider::Sampling::DEFAULT,
            };
            let count = |body: serde_json::Value| body.to_string().matches("iVBORw0KGgo=").count();
            (
                count(anthropic::request_body(&request)),
                count(openai::request_body(&request)),
            )
        };
        let mut conversation = vec![Message::user("take a screenshot"), call("1")];
        conversation.push(result_with_image("1"));
        assert_eq!(
            sent_images(&conversation),
            (1, 1),
            "within its turn the image is sent"
        );
        conversation.push(Message::Assistant {
            text: "done".into(),
            tool_calls: Vec::new(),
        });
        conversation.push(Message::user("and another"));
        conversation.push(call("2"));
        conversation.push(result_with_image("2"));
        assert_eq!(
            sent_images(&conversation),
            (1, 1),
            "only the current turn's image is sent"
        );
        let sent = with_earlier_images_omitted(&conversation);
        let Some(Message::ToolResults { results }) = sent.get(2) else {
            panic!("the first turn's results moved");
        };
        assert!(
            results[0]
                .content
                .contains("1 image(s) (image/png) shown in an earlier turn")
        );
        // The conversation itself is unchanged.
        assert_eq!(images(&conversation), 2);
    }
}
