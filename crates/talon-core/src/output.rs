//! What a tool returns: text for the model, optionally different text for the user, and flags.

use serde::{Deserialize, Serialize};

/// A file or blob to hand to the user (and, for images, to models that accept them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    /// MIME type such as `image/png`.
    pub mime_type: String,
    /// Raw bytes of the media.
    #[serde(with = "bytes_as_len")]
    pub data: Vec<u8>,
    /// Optional file name to show the user.
    pub name: Option<String>,
    /// The prompt that generated this media, for media-generation tools.
    pub prompt: Option<String>,
}

mod bytes_as_len {
    //! Media bytes are not serialised into events or logs; only their length is.
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(data.len() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let _len = u64::deserialize(d)?;
        Ok(Vec::new())
    }
}

impl Media {
    /// True for `image/*` media, which MCP and some providers accept inline.
    pub fn is_image(&self) -> bool {
        self.mime_type.starts_with("image/")
    }
}

/// Token usage of tools that call an LLM themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub provider: Option<String>,
    pub model: Option<String>,
}

/// The result of a tool call.
///
/// Errors are values, not panics: a failed call returns `is_error = true` with text the model can
/// act on. Use the constructors; they encode GoClaw's result kinds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// Content sent back to the model.
    pub for_llm: String,
    /// Content shown to the user, when it differs from `for_llm`.
    pub for_user: Option<String>,
    /// The call failed; `for_llm` says why.
    pub is_error: bool,
    /// Do not show anything to the user.
    pub silent: bool,
    /// The work continues in the background; a later message carries the result.
    #[serde(rename = "async")]
    pub is_async: bool,
    /// Files to forward to the user.
    pub media: Vec<Media>,
    /// The primary work product (used as a team task's result).
    pub deliverable: Option<String>,
    /// Tokens used by an LLM the tool called.
    pub usage: Option<Usage>,
    /// Things the caller should know that did not fail the call (files a search skipped, say).
    /// The text for the model already mentions them; entry points also surface them as log
    /// messages (MCP `notifications/message` at level warning).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Where the text came from (a URL, a query, an MCP server's tool), for the untrusted-content
    /// fence the pipeline puts around the output of a tool whose spec declares
    /// [`crate::ToolSpec::untrusted_output`]; the tool's name when not set. Consumed there.
    #[serde(skip)]
    pub origin: Option<String>,
    /// Talon's own words about the result (a run's status line, "Started subagent …", a
    /// capacity refusal, the board's answer): the pipeline puts them before the untrusted-
    /// content fence, never inside it, so the model is not told to distrust Talon's guidance.
    /// Only the others' text (`for_llm`) is fenced; an output of own words alone is not.
    /// Merged into `for_llm` by the pipeline.
    #[serde(skip)]
    pub own_words: Option<String>,
    /// What the call changes about the turn it runs in (a plan approved, a stricter permission
    /// mode): the agent loop applies it, so no crate recognises these tools by name.
    #[serde(skip)]
    pub session_effect: Option<SessionEffect>,
}

/// A change a successful call makes to the turn it runs in, declared in its output and applied
/// by the agent loop. It can only narrow what the turn may do, or return to what the person
/// already allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEffect {
    /// The person approved the plan: the turn leaves plan mode for the mode before it (never
    /// looser than the configured one).
    LeavePlanMode,
    /// The turn continues in this permission mode; ignored unless it is no looser than the
    /// turn's mode now.
    PermissionMode(crate::permission::PermissionMode),
}

impl ToolOutput {
    /// A plain successful result for the model.
    pub fn text(for_llm: impl Into<String>) -> Self {
        Self {
            for_llm: for_llm.into(),
            ..Self::default()
        }
    }

    /// A successful result the user does not need to see (GoClaw's default for fs and exec).
    pub fn silent(for_llm: impl Into<String>) -> Self {
        Self {
            silent: true,
            ..Self::text(for_llm)
        }
    }

    /// A failed call; `message` should tell the model what was wrong and how to fix it.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(message)
        }
    }

    /// The same text for the model and the user.
    pub fn user(text: impl Into<String>) -> Self {
        let text = text.into();
        Self {
            for_user: Some(text.clone()),
            ..Self::text(text)
        }
    }

    /// A result in Talon's own words only (see [`ToolOutput::own_words`]): never fenced.
    pub fn own(text: impl Into<String>) -> Self {
        Self {
            own_words: Some(text.into()),
            ..Self::default()
        }
    }

    /// A failure in Talon's own words only (a limit, a refusal): never fenced.
    pub fn own_error(text: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::own(text)
        }
    }

    /// Puts Talon's `words` before the output's text (see [`ToolOutput::own_words`]).
    pub fn with_own_words(mut self, words: impl Into<String>) -> Self {
        self.own_words = Some(words.into());
        self
    }

    /// Declares what the call changes about its turn (see [`ToolOutput::session_effect`]).
    pub fn with_session_effect(mut self, effect: SessionEffect) -> Self {
        self.session_effect = Some(effect);
        self
    }

    /// Work started in the background.
    pub fn background(for_llm: impl Into<String>) -> Self {
        Self {
            is_async: true,
            ..Self::text(for_llm)
        }
    }

    /// Sets the user-facing text.
    pub fn with_user(mut self, for_user: impl Into<String>) -> Self {
        self.for_user = Some(for_user.into());
        self
    }

    /// Adds a media file.
    pub fn with_media(mut self, media: Media) -> Self {
        self.media.push(media);
        self
    }

    /// Names where the text came from, for the untrusted-content fence (see
    /// [`ToolOutput::origin`]).
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    /// Sets the deliverable.
    pub fn with_deliverable(mut self, deliverable: impl Into<String>) -> Self {
        self.deliverable = Some(deliverable.into());
        self
    }

    /// Records LLM usage.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}
