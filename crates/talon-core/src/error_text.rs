//! Errors as people and models read them: with their causes.
//!
//! `reqwest` and friends put the useful part in the source chain ("error sending request for
//! url" hides "connection refused"), so wherever an error becomes text it goes through
//! [`with_causes`].

/// `error` and each of its causes, joined by `: ` (a cause its parent already quotes is left
/// out), without the Rust type names some libraries put in their messages
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>] error`).
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    with_causes_by(error, |e| e.source())
}

/// [`with_causes`] following `next` from one cause to the next, for libraries that keep a
/// cause in a field their errors do not report as the source.
pub fn with_causes_by<'a>(
    error: &'a (dyn std::error::Error + 'static),
    next: impl Fn(
        &'a (dyn std::error::Error + 'static),
    ) -> Option<&'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut text = without_type_names(&error.to_string());
    let mut source = next(error);
    while let Some(cause) = source {
        let cause_text = without_type_names(&cause.to_string());
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = next(cause);
    }
    text
}

/// `text` without bracketed Rust paths (`[a::b<c::D>]`) and the space before each.
fn without_type_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('[') {
        let Some(len) = closing(&rest[start..]) else {
            break;
        };
        let inside = &rest[start + 1..start + len];
        out.push_str(&rest[..start]);
        let type_name = inside.contains("::") && !inside.contains(' ');
        if !type_name {
            out.push_str(&rest[start..=start + len]);
        } else if out.ends_with(' ') {
            out.pop();
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// The offset of the `]` closing the `[` `text` starts with, nested brackets counted.
fn closing(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("error sending request for url (http://127.0.0.1:9/)")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn type_names_are_left_out() {
        assert_eq!(
            without_type_names(
                "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::A<reqwest::Client>>] error: refused [see docs]"
            ),
            "Send message error Transport error: refused [see docs]"
        );
    }

    #[test]
    fn the_cause_is_kept() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(
            with_causes(&e),
            "error sending request for url (http://127.0.0.1:9/): connection refused"
        );
    }
}
