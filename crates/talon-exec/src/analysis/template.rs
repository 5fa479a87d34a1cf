//! Where a custom tool's placeholders may stand in its command template.
//!
//! Each placeholder is rendered as one single-quoted word (`talon_core::script_template`). That
//! is safe only where bash reads a word: in `echo "you said: {{.msg}}"` the single quotes are
//! literal inside the double quotes, so a value's `$(…)` runs and its `"` ends them (an outside
//! review ran commands that way with `exec` denied). The template is parsed with the shell parser
//! the analysis uses, every placeholder stands in for a marker word, and each marker must be
//! (part of) a plain word whose every enclosing node is one where a quoted word stays data:
//! a command's argument, a redirection's target, an assignment's value, a `for` list, a `case`
//! subject. Refused: inside any quotes, a here-document, a comment, an expansion, arithmetic or a
//! `[[ ]]` test (whose `-eq` evaluates its operands as arithmetic), and as the command's name (a
//! value must not choose the program).

use tree_sitter::Node;

/// Node kinds a placeholder's word may stand inside.
const WORD_SAFE: &[&str] = &[
    "program",
    "list",
    "pipeline",
    "command",
    "redirected_statement",
    "file_redirect",
    "herestring_redirect",
    "concatenation",
    "subshell",
    "compound_statement",
    "if_statement",
    "elif_clause",
    "else_clause",
    "while_statement",
    "do_group",
    "for_statement",
    "case_statement",
    "case_item",
    "negated_command",
    "variable_assignment",
    "function_definition",
];

/// Why a placeholder cannot stand where the template puts it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misplaced {
    #[error("the command template does not parse as a shell command")]
    Unparsable,
    #[error(
        "placeholder {{{{.{name}}}}} is {place}; Talon quotes every value as one word itself, so write the placeholder as a word of its own outside any quotes (e.g. echo \"you said:\" {{{{.{name}}}}})"
    )]
    Quoted { name: String, place: &'static str },
    #[error(
        "placeholder {{{{.{name}}}}} is the command's name: a value must never choose the program that runs; name the program in the template and pass the value as an argument"
    )]
    CommandName { name: String },
}

/// Checks each placeholder of `template` (`{{.name}}`) stands where one quoted word is data.
pub fn check_placeholders(template: &str) -> Result<(), Misplaced> {
    let names = talon_core::script_template::placeholders(template);
    if names.is_empty() {
        return Ok(());
    }
    // A marker per name that is a plain word to the parser and occurs nowhere else.
    let salt = std::process::id();
    let marker = |i: usize| format!("TALONPLACEHOLDER{salt}X{i}X");
    let script = talon_core::script_template::substitute(template, |name| {
        marker(names.iter().position(|n| n == name).unwrap_or(0))
    });
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .map_err(|_| Misplaced::Unparsable)?;
    let tree = parser.parse(&script, None).ok_or(Misplaced::Unparsable)?;
    if tree.root_node().has_error() {
        return Err(Misplaced::Unparsable);
    }
    for (i, name) in names.iter().enumerate() {
        let wanted = marker(i);
        for (start, _) in script.match_indices(&wanted) {
            let node = tree
                .root_node()
                .descendant_for_byte_range(start, start + wanted.len())
                .ok_or(Misplaced::Unparsable)?;
            check_node(node, name)?;
        }
    }
    Ok(())
}

fn check_node(node: Node<'_>, name: &str) -> Result<(), Misplaced> {
    // The outermost place that is not a plain word names the refusal: `"$(echo {{.x}})"` is
    // inside double quotes, `[[ {{.n}} -eq 1 ]]` inside a test.
    let mut outermost = (node.kind() != "word").then(|| node.kind());
    let mut named = false;
    let mut at = node;
    while let Some(parent) = at.parent() {
        if parent.kind() == "command_name" {
            named = true;
        } else if !WORD_SAFE.contains(&parent.kind()) {
            outermost = Some(parent.kind());
        }
        at = parent;
    }
    match outermost {
        Some(kind) => Err(Misplaced::Quoted {
            name: name.to_string(),
            place: place_of(kind),
        }),
        None if named => Err(Misplaced::CommandName {
            name: name.to_string(),
        }),
        None => Ok(()),
    }
}

/// How the refusal names a node kind.
fn place_of(kind: &str) -> &'static str {
    match kind {
        "string" | "string_content" => "inside double quotes",
        "raw_string" => "inside single quotes",
        "ansi_c_string" => "inside $'…' quotes",
        "translated_string" => "inside $\"…\" quotes",
        "heredoc_body" | "heredoc_redirect" | "heredoc_content" => "inside a here-document",
        "comment" => "inside a comment",
        "command_substitution" => "inside a command substitution",
        "process_substitution" => "inside a process substitution",
        "arithmetic_expansion"
        | "c_style_for_statement"
        | "binary_expression"
        | "unary_expression"
        | "postfix_expression"
        | "parenthesized_expression" => "inside arithmetic",
        "test_command" => "inside a [[ ]] or [ ] test",
        "expansion" | "simple_expansion" | "variable_name" | "subscript" => {
            "inside a variable expansion"
        }
        "declaration_command" | "unset_command" => "an argument of declare, local, export or unset",
        _ => "in a place the shell does not read as a plain word",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_and_parts_of_words_are_fine() {
        for ok in [
            "echo {{.msg}}",
            "wc -l < {{.path}}",
            "grep -n -- {{.pattern}} src/{{.file}}.rs",
            "X={{.v}} env | head -n {{.n}}",
            "for f in {{.a}} {{.b}}; do echo \"$f\"; done",
            "case {{.mode}} in fast) echo f;; *) echo s;; esac",
            "cat <<< {{.text}}",
            "if test -n {{.x}}; then (cd dir && ls {{.y}}); fi",
        ] {
            check_placeholders(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn quoted_and_evaluated_places_are_refused_with_the_fix() {
        for (bad, place) in [
            ("echo \"you said: {{.msg}}\"", "double quotes"),
            ("echo '{{.msg}}'", "single quotes"),
            ("echo $'{{.msg}}'", "$'…'"),
            ("cat <<EOF\n{{.msg}}\nEOF", "here-document"),
            ("echo $(( {{.n}} + 1 ))", "arithmetic"),
            ("[[ {{.n}} -eq 1 ]] && echo one", "test"),
            ("echo ${x:-{{.v}}}", "expansion"),
            ("echo x # {{.msg}}", "comment"),
            ("echo \"$(echo {{.msg}})\"", "double quotes"),
            ("declare {{.v}}", "declare"),
        ] {
            let err = check_placeholders(bad).expect_err(bad).to_string();
            assert!(err.contains(place), "{bad}: {err}");
        }
        let err = check_placeholders("echo \"you said: {{.msg}}\"").unwrap_err();
        assert!(
            err.to_string().contains("echo \"you said:\" {{.msg}}"),
            "{err}"
        );
    }

    #[test]
    fn a_value_never_names_the_program() {
        for bad in ["{{.prog}} --help", "ls | {{.prog}}", "X=1 {{.prog}}"] {
            assert!(
                matches!(check_placeholders(bad), Err(Misplaced::CommandName { .. })),
                "{bad}"
            );
        }
    }
}
