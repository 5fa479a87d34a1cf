//! A fetched web page converted outside the gateway's address space.
//!
//! HTML is parsed (html5ever), scored for its main content (Readability) and turned into Markdown
//! or text: work whose time and memory the page's author chooses. So it runs in the parsers'
//! helper process ([`crate::untrusted_parse`]), bounded in memory, CPU and wall time like a PDF,
//! and a page built to exhaust the reader costs one failed fetch, not the gateway.
//!
//! The helper answers with one line of JSON (the title, how many hidden parts were dropped,
//! whether Readability found the article) and then the converted text as it is, cut to fit the
//! helper's output limit on a character boundary.

use serde_json::{Value, json};
use talon_web::content::{self, Mode, Page};

use crate::untrusted_parse::{self, Kind, OUTPUT_LIMIT};

/// The longest decoded page the helper reads (a 5 MiB body decodes to at most three times its
/// size: every invalid byte becomes U+FFFD).
pub const MAX_HTML_CHARS: usize = 16 << 20;
/// The longest title kept.
const MAX_TITLE_CHARS: usize = 1000;

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Markdown => "markdown",
        Mode::Text => "text",
    }
}

/// Converts the decoded page `html` fetched from `url` in the helper process.
pub async fn convert_page(html: String, url: &str, mode: Mode) -> Result<Page, String> {
    let args = vec![mode_name(mode).to_string(), url.to_string()];
    let out = untrusted_parse::parse_async(Kind::Html, html.into_bytes(), args).await?;
    let (head, text) = out
        .split_once('\n')
        .ok_or("the web page's converter answered without its header")?;
    let head: Value = serde_json::from_str(head)
        .map_err(|e| format!("the web page's converter answered an unreadable header: {e}"))?;
    Ok(Page {
        title: head["title"].as_str().map(str::to_string),
        content: text.to_string(),
        hidden_removed: head["hidden_removed"]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0),
        extracted: head["extracted"].as_bool().unwrap_or(false),
    })
}

/// The parser itself, inside the helper: `args` are the mode and the page's URL.
pub(crate) fn convert(bytes: &[u8], args: &[String]) -> Result<String, String> {
    let source = String::from_utf8_lossy(bytes);
    let mode = match args.first().map(String::as_str) {
        Some("text") => Mode::Text,
        _ => Mode::Markdown,
    };
    let page = content::html(&source, args.get(1).map(String::as_str), mode);
    let title: Option<String> = page
        .title
        .map(|t| t.chars().take(MAX_TITLE_CHARS).collect());
    let head = json!({
        "title": title,
        "hidden_removed": page.hidden_removed,
        "extracted": page.extracted,
    })
    .to_string();
    let room = OUTPUT_LIMIT.saturating_sub(head.len() + 1);
    let mut text = page.content;
    if text.len() > room {
        let cut = (0..=room)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
    }
    Ok(format!("{head}\n{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_answers_a_header_line_and_the_text() {
        let html = "<html><head><title>T\nitle</title></head><body><p>Hello <b>there</b>.</p>\
                    <div style=\"display:none\">secret</div></body></html>";
        let out = convert(
            html.as_bytes(),
            &["text".into(), "https://example.org/".into()],
        )
        .expect("converts");
        let (head, text) = out.split_once('\n').expect("a header line");
        let head: Value = serde_json::from_str(head).expect("JSON");
        assert_eq!(head["hidden_removed"], 1);
        assert!(text.contains("Hello there."), "{text}");
        assert!(!text.contains("secret"), "{text}");
    }
}
