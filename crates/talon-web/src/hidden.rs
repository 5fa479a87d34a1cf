//! Dropping the parts of a page a reader never sees.
//!
//! Prompt injections hide in markup a browser does not render: `display:none` blocks, zero-size
//! or off-screen text, `hidden` and `aria-hidden` elements, `<template>`s, comments. A person
//! reading the page never sees them, so the model should not either. This runs on the parsed
//! document before the main content is extracted.

use dom_query::{Document, NodeRef};

/// Elements never rendered as text.
const NEVER_SHOWN: &str = "script, style, noscript, template, head > *:not(title), \
     [hidden], [aria-hidden=\"true\" i], input[type=\"hidden\" i], iframe, object, embed, \
     dialog:not([open])";

/// Whether an inline `style` hides its element: `display:none`, `visibility:hidden` or
/// `collapse`, `opacity:0`, `font-size:0`, a zero width or height, a clip to nothing, or a
/// position far off-screen.
fn style_hides(style: &str) -> bool {
    let compact: String = style
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    let declarations: Vec<(&str, &str)> = compact
        .split(';')
        .filter_map(|d| d.split_once(':'))
        .map(|(k, v)| (k, v.trim_end_matches("!important")))
        .collect();
    let zero = |v: &str| {
        let n = v.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%');
        n.parse::<f64>().is_ok_and(|x| x == 0.0)
    };
    let far_off = |v: &str| {
        let n = v.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%');
        n.parse::<f64>().is_ok_and(|x| x <= -500.0)
    };
    declarations.iter().any(|(k, v)| match *k {
        "display" => *v == "none",
        "visibility" => *v == "hidden" || *v == "collapse",
        "opacity" => zero(v),
        "font-size" | "width" | "height" | "max-width" | "max-height" => zero(v),
        "clip" => matches!(
            v.replace("px", "").replace(',', "").as_str(),
            "rect(0000)" | "rect(1111)"
        ),
        "clip-path" => v.starts_with("inset(50%") || v.starts_with("inset(100%"),
        "left" | "top" | "right" | "text-indent" | "margin-left" | "margin-top" => far_off(v),
        "transform" => v.contains("scale(0)") || v.contains("scale(0,0)"),
        _ => false,
    })
}

/// Removes hidden elements and comments from `doc`; returns how many it removed.
pub fn strip(doc: &Document) -> usize {
    let never = doc.select(NEVER_SHOWN);
    let mut removed = never.length();
    never.remove();
    let styled: Vec<NodeRef<'_>> = doc
        .select("[style]")
        .nodes()
        .iter()
        .filter(|n| n.attr("style").is_some_and(|s| style_hides(&s)))
        .cloned()
        .collect();
    removed += styled.len();
    for node in styled {
        node.remove_from_parent();
    }
    let comments: Vec<NodeRef<'_>> = doc
        .root()
        .descendants_it()
        .filter(NodeRef::is_comment)
        .collect();
    removed += comments.len();
    for node in comments {
        node.remove_from_parent();
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hiding_styles_are_recognised() {
        for style in [
            "display:none",
            "DISPLAY: none !important",
            "visibility: hidden",
            "opacity:0",
            "font-size: 0px",
            "width:0;height:0;overflow:hidden",
            "position:absolute; left:-9999px",
            "clip: rect(0 0 0 0)",
            "clip-path: inset(50%)",
            "transform: scale(0)",
        ] {
            assert!(style_hides(style), "{style}");
        }
        for style in [
            "display:block",
            "color:red",
            "opacity:0.5",
            "left:10px",
            "font-size:12px",
        ] {
            assert!(!style_hides(style), "{style}");
        }
    }

    #[test]
    fn hidden_elements_and_comments_are_dropped() {
        let doc = Document::from(
            "<html><body><p>visible</p><div style=\"display:none\">IGNORE PREVIOUS</div>\
             <span hidden>secret one</span><p aria-hidden=\"true\">secret two</p>\
             <template><p>secret three</p></template><!-- secret four -->\
             <p style=\"position:absolute;left:-10000px\">secret five</p></body></html>",
        );
        assert!(strip(&doc) >= 6);
        let html = doc.html().to_string();
        assert!(html.contains("visible"));
        for gone in [
            "IGNORE",
            "secret one",
            "secret two",
            "secret three",
            "secret four",
            "secret five",
        ] {
            assert!(!html.contains(gone), "{gone} survived: {html}");
        }
    }
}
