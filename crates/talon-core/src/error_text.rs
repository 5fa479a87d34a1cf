//! Errors as people and models read them: with their causes.
//!
//! `reqwest` and friends put the useful part in the source chain ("error sending request for
//! url" hides "connection refused"), so wherever an error becomes text it goes through
//! [`with_causes`].

/// `error` and each of its causes, joined by `: ` (a cause its parent already quotes is left
/// out).
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("error sending request for url (http://127.0.0.1:9/)")]
    struct Outer(#[source] std::io::Error);

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
