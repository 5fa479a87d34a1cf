//! Commands made from a template and a call's arguments (custom tools).
//!
//! A custom tool is a shell command with `{{.name}}` placeholders (GoClaw's syntax; spaces
//! inside the braces are allowed). Each placeholder becomes the argument's value as one
//! single-quoted shell word, every `'` in it written `'\''`, so no value can end the quoting
//! and add a command of its own: `{{.path}}` with `x'; rm -rf ~; '` runs `'x'\''; rm -rf ~; '\'''`,
//! one word. The pipeline renders the command before its permission step
//! ([`crate::ToolSpec::script_template`]); the checker judges the rendered command and the tool
//! runs exactly that text.
//!
//! Values: a string as it is, a number or boolean as JSON writes it, an array or object as
//! compact JSON, an absent or `null` argument as the empty word `''`. A value with a NUL byte
//! cannot be passed to a shell and is refused. Text between braces that is not a placeholder
//! (`{{ x }}`, `${{a}}` without the dot) stays as written.
//!
//! A single-quoted word is safe only where the shell reads it as a word: inside double quotes
//! (`echo "you said: {{.msg}}"`) the quotes are literal and a value's `$(…)` runs. So a template
//! is checked when it is defined (`talon_exec::analysis::template`) and each placeholder must
//! stand as a word of its own (or part of one) outside any quoting, here-document, arithmetic or
//! test, and never as the command's name.

use serde_json::Value;

/// The names of the placeholders in `template`, in order of first appearance.
pub fn placeholders(template: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for piece in pieces(template) {
        if let Piece::Placeholder(name) = piece
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_string());
        }
    }
    names
}

/// `template` with each placeholder replaced by its argument in `args`, shell-quoted; the error
/// says which argument cannot be passed and why.
pub fn render(template: &str, args: &Value) -> Result<String, String> {
    let mut refused = None;
    let out = substitute(template, |name| {
        let value = match args.get(name) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        if value.contains('\0') && refused.is_none() {
            refused = Some(format!(
                "argument {name:?} contains a NUL byte, which cannot be passed to a command; remove it"
            ));
        }
        quote(&value)
    });
    refused.map_or(Ok(out), Err)
}

/// `template` with each placeholder replaced by what `with` returns for its name, as it is (no
/// quoting): for checking where placeholders stand (`talon_exec::analysis::template`).
pub fn substitute(template: &str, mut with: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template) {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Placeholder(name) => out.push_str(&with(name)),
        }
    }
    out
}

/// `value` as one single-quoted shell word.
pub fn quote(value: &str) -> String {
    let mut word = String::with_capacity(value.len() + 2);
    word.push('\'');
    for c in value.chars() {
        if c == '\'' {
            word.push_str("'\\''");
        } else {
            word.push(c);
        }
    }
    word.push('\'');
    word
}

enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// `template` cut into literal text and placeholders.
fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            break;
        };
        match placeholder_name(&after[..end]) {
            Some(name) => {
                if start > 0 {
                    pieces.push(Piece::Text(&rest[..start]));
                }
                pieces.push(Piece::Placeholder(name));
                rest = &after[end + 2..];
            }
            None => {
                // Not a placeholder: keep the braces as text and look further on.
                pieces.push(Piece::Text(&rest[..start + 2]));
                rest = after;
            }
        }
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    pieces
}

/// `name` of ` .name `, if the text between braces is a placeholder.
fn placeholder_name(inner: &str) -> Option<&str> {
    let name = inner.trim().strip_prefix('.')?;
    let mut bytes = name.bytes();
    let first = bytes.next()?;
    let ok = (first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_become_one_quoted_word_each() {
        let args = json!({"path": "a b", "n": 3, "flag": true, "list": [1, "x"]});
        assert_eq!(
            render("ls {{.path}} -n {{ .n }} {{.flag}} {{.list}}", &args).unwrap(),
            "ls 'a b' -n '3' 'true' '[1,\"x\"]'"
        );
    }

    #[test]
    fn a_quote_in_a_value_cannot_end_the_word() {
        let args = json!({"q": "x'; rm -rf ~; echo '"});
        let rendered = render("grep {{.q}} file", &args).unwrap();
        assert_eq!(rendered, "grep 'x'\\''; rm -rf ~; echo '\\''' file");
    }

    #[test]
    fn absent_and_null_arguments_are_empty_words() {
        assert_eq!(
            render("a {{.x}} {{.y}}", &json!({"y": null})).unwrap(),
            "a '' ''"
        );
    }

    #[test]
    fn nul_bytes_are_refused_with_the_argument_named() {
        let err = render("echo {{.v}}", &json!({"v": "a\u{0}b"})).unwrap_err();
        assert!(err.contains("\"v\"") && err.contains("NUL"), "{err}");
    }

    #[test]
    fn text_that_is_not_a_placeholder_stays() {
        let args = json!({"a": "1"});
        assert_eq!(
            render("echo ${{a}} {{ a }} {{.a}} {{.}} {{.a", &args).unwrap(),
            "echo ${{a}} {{ a }} '1' {{.}} {{.a"
        );
        assert_eq!(
            placeholders("{{.b}} {{.a}} {{ .b }} {{x}}"),
            vec!["b".to_string(), "a".to_string()]
        );
    }
}
