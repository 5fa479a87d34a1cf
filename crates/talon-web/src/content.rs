//! Turning a fetched body into what the model reads.
//!
//! HTML: hidden elements dropped ([`crate::hidden`]), the main content extracted with
//! dom_smoothie (a port of Mozilla's Readability; the whole body when no article is found), then
//! converted to Markdown with htmd or to plain text. JSON is pretty-printed; Markdown and other
//! text are passed through. Bodies are decoded with the charset of the `Content-Type` header,
//! else a byte-order mark, else a `<meta charset>` in the page, else UTF-8.

use encoding_rs::Encoding;

/// What a body is, from its `Content-Type` (or, without one, its first bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Html,
    Json,
    /// `text/markdown`: passed through.
    Markdown,
    /// Any other text.
    Text,
    Pdf,
    /// An image, with its MIME type.
    Image(String),
    /// Anything else, with its MIME type.
    Binary(String),
}

/// The MIME type of a `Content-Type` value, lower-case, without parameters.
pub fn mime(content_type: Option<&str>) -> Option<String> {
    content_type
        .and_then(|ct| ct.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty())
}

/// Classifies a body.
pub fn kind(content_type: Option<&str>, body: &[u8]) -> Kind {
    match mime(content_type).as_deref() {
        Some("text/html" | "application/xhtml+xml") => Kind::Html,
        Some("application/json" | "text/json") => Kind::Json,
        Some(m) if m.ends_with("+json") => Kind::Json,
        Some("text/markdown" | "text/x-markdown") => Kind::Markdown,
        Some("application/pdf") => Kind::Pdf,
        Some(m) if m.starts_with("image/") => Kind::Image(m.to_string()),
        Some(m) if m.starts_with("text/") || m.ends_with("+xml") || m == "application/xml" => {
            Kind::Text
        }
        Some("application/octet-stream") | None => sniff(body),
        Some(m) => Kind::Binary(m.to_string()),
    }
}

/// Classifies a body without a useful `Content-Type` from its first bytes.
fn sniff(body: &[u8]) -> Kind {
    let head = &body[..body.len().min(512)];
    let text = String::from_utf8_lossy(head)
        .trim_start()
        .to_ascii_lowercase();
    if head.starts_with(b"%PDF-") {
        Kind::Pdf
    } else if head.starts_with(b"\x89PNG") {
        Kind::Image("image/png".into())
    } else if head.starts_with(b"\xff\xd8\xff") {
        Kind::Image("image/jpeg".into())
    } else if head.starts_with(b"GIF8") {
        Kind::Image("image/gif".into())
    } else if text.starts_with("<!doctype html") || text.starts_with("<html") {
        Kind::Html
    } else if text.starts_with('{') || text.starts_with('[') {
        Kind::Json
    } else if std::str::from_utf8(head).is_ok() {
        Kind::Text
    } else {
        Kind::Binary("application/octet-stream".into())
    }
}

/// The charset named by `content_type`'s parameters.
fn header_charset(content_type: Option<&str>) -> Option<&'static Encoding> {
    content_type?.split(';').skip(1).find_map(|param| {
        let (k, v) = param.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("charset"))
            .then(|| Encoding::for_label(v.trim().trim_matches('"').as_bytes()))
            .flatten()
    })
}

/// The charset a `<meta charset>` or `<meta http-equiv content="…charset=…">` in the first
/// 1024 bytes names.
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset=")?;
    let rest = head[at + "charset=".len()..].trim_start_matches(['"', '\'']);
    let label: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
        .collect();
    Encoding::for_label(label.as_bytes())
}

/// Decodes a text body (see the module docs for the charset order); invalid sequences become
/// U+FFFD.
pub fn decode(content_type: Option<&str>, body: &[u8], html: bool) -> String {
    let encoding = header_charset(content_type)
        .or_else(|| Encoding::for_bom(body).map(|(e, _)| e))
        .or_else(|| if html { meta_charset(body) } else { None })
        .unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = encoding.decode(body);
    text.into_owned()
}

/// `extract_mode` of the fetch tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    #[default]
    Markdown,
    Text,
}

/// A converted HTML page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The page's title, if it has one.
    pub title: Option<String>,
    /// The main content as Markdown or text.
    pub content: String,
    /// Hidden elements and comments that were dropped.
    pub hidden_removed: usize,
    /// The main content was found by Readability (else the whole body was converted).
    pub extracted: bool,
}

/// Converts an HTML page: hidden parts dropped, main content extracted, then Markdown or text.
pub fn html(source: &str, url: Option<&str>, mode: Mode) -> Page {
    let doc = dom_query::Document::from(source);
    let hidden_removed = crate::hidden::strip(&doc);
    let title = {
        let t = doc.select("title").text().trim().to_string();
        (!t.is_empty()).then_some(t)
    };
    let config = dom_smoothie::Config {
        text_mode: dom_smoothie::TextMode::Formatted,
        ..dom_smoothie::Config::default()
    };
    let article = dom_smoothie::Readability::with_document(doc, url, Some(config))
        .ok()
        .and_then(|mut r| r.parse().ok())
        .filter(|a| a.text_content.trim().len() >= 80);
    let (content, extracted, title) = match article {
        Some(a) => {
            let title = Some(a.title.trim().to_string())
                .filter(|t| !t.is_empty())
                .or(title);
            let content = match mode {
                Mode::Markdown => to_markdown(&a.content),
                Mode::Text => a.text_content.trim().to_string(),
            };
            (content, true, title)
        }
        None => {
            // Readability found no article (and consumed the document): the whole visible
            // body instead. Rare, so the page is parsed again rather than serialised up front.
            let fallback_html = visible_body(source);
            let content = match mode {
                Mode::Markdown => to_markdown(&fallback_html),
                Mode::Text => text_of(&fallback_html),
            };
            (content, false, title)
        }
    };
    Page {
        title,
        content: tidy(&content),
        hidden_removed,
        extracted,
    }
}

/// The body of `source` (the whole document if it has none) with its hidden parts dropped.
fn visible_body(source: &str) -> String {
    let doc = dom_query::Document::from(source);
    crate::hidden::strip(&doc);
    let body = doc.select("body").html().to_string();
    if body.is_empty() {
        doc.html().to_string()
    } else {
        body
    }
}

/// HTML to Markdown with htmd (scripts and styles are already gone).
pub fn to_markdown(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec!["script", "style", "noscript", "template", "head"])
        .build();
    converter.convert(html).unwrap_or_else(|_| text_of(html))
}

/// The text of an HTML fragment, one block per line.
fn text_of(html: &str) -> String {
    let doc = dom_query::Document::from(html);
    doc.select("br").replace_with_html("\n");
    for block in [
        "p",
        "div",
        "li",
        "tr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
        "blockquote",
    ] {
        doc.select(block).append_html("\n");
    }
    doc.root().text().to_string()
}

/// Collapses runs of blank lines and trailing spaces.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

/// Pretty-prints JSON; invalid JSON is returned as it is.
pub fn json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charsets_come_from_the_header_then_bom_then_meta() {
        let latin1 = b"caf\xe9";
        assert_eq!(
            decode(Some("text/plain; charset=ISO-8859-1"), latin1, false),
            "café"
        );
        let meta = b"<html><head><meta charset=\"windows-1252\"></head><body>caf\xe9</body></html>";
        assert!(decode(Some("text/html"), meta, true).contains("café"));
        let bom = b"\xef\xbb\xbfcaf\xc3\xa9";
        assert_eq!(decode(None, bom, false), "café");
        assert_eq!(decode(None, b"caf\xc3\xa9", false), "café");
    }

    #[test]
    fn kinds_from_type_and_bytes() {
        assert_eq!(kind(Some("text/html; charset=utf-8"), b""), Kind::Html);
        assert_eq!(kind(Some("application/ld+json"), b""), Kind::Json);
        assert_eq!(kind(None, b"%PDF-1.7"), Kind::Pdf);
        assert_eq!(kind(None, b"<!DOCTYPE html><html>"), Kind::Html);
        assert_eq!(
            kind(Some("image/png"), b""),
            Kind::Image("image/png".into())
        );
        assert_eq!(
            kind(Some("application/zip"), b""),
            Kind::Binary("application/zip".into())
        );
    }

    #[test]
    fn json_is_pretty_printed() {
        assert_eq!(
            json("{\"a\":[1,2]}"),
            "{\n  \"a\": [\n    1,\n    2\n  ]\n}"
        );
        assert_eq!(json("not json"), "not json");
    }
}
