//! Words bash evaluates a second time.
//!
//! A word is *literal* when its value is known before the shell runs, but a literal value is
//! not always inert: bash evaluates some values again. A value used as a variable name is
//! parsed as `name[subscript]` and the subscript is expanded (`unset 'a[$(cmd)]'` runs `cmd`);
//! a value used as arithmetic expands the subscripts of the variables it names; `declare`
//! parses a quoted `name=(…)` as a compound assignment. The parser sees such a word as quoted
//! text and the commands inside it would never become segments, so neither the deny groups nor
//! the rules could see them.
//!
//! The rule, applied to every segment as it is pushed ([`Walker::note_evaluated_words`]): a
//! word in a position bash evaluates (a name, an arithmetic expression, a declaration's
//! argument) is unknown when its value holds command-substitution syntax, and a name is also
//! unknown when its value is only known at run time. Values that are only stored
//! (`x='$(…)'`) are noted by the walker, and made unknown when something in the same script
//! evaluates values again (arithmetic, `${!x}`, a substring offset, a nameref).

use tree_sitter::Node;

use super::parse::{Pending, Walker, Word};
use super::walk::has_subst_syntax;
use super::words;

/// How bash uses a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    /// A variable name, possibly with a subscript (`unset`, `read`, `printf -v`, `[[ -v`).
    Name,
    /// An arithmetic expression (`let`, `[[ … -eq … ]]`).
    Arithmetic,
    /// An argument `declare` parses again (`name`, `name=value`, `name=(…)`).
    Declaration,
}

/// The declaration builtins, which parse their arguments as assignments.
const DECLARATIONS: &[&str] = &["declare", "typeset", "local", "export", "readonly"];

/// `[[`/`test` operators whose operands are arithmetic.
const ARITH_TESTS: &[&str] = &["-eq", "-ne", "-lt", "-le", "-gt", "-ge"];

impl Walker {
    /// Applies the rule of this module to one segment about to be pushed.
    pub(crate) fn note_evaluated_words(&mut self, p: &Pending) {
        let Some(program) = p.words.first().filter(|w| w.literal) else {
            return;
        };
        let args = p.words.get(1..).unwrap_or(&[]);
        let positions = positions(&program.text, args);
        if positions
            .iter()
            .any(|&(_, pos)| pos == Position::Arithmetic)
        {
            self.arith = true;
        }
        for (index, position) in positions {
            let Some(word) = args.get(index) else {
                continue;
            };
            if word.literal && has_subst_syntax(&word.text) {
                if position == Position::Declaration && is_parsed_assignment(p, word) {
                    // `declare x='$(…)'`: the grammar saw the assignment; its value is only
                    // stored (noted by the walker), its name was walked.
                    continue;
                }
                self.unknown(format!(
                    "`{}` evaluates `{}` again, which can run the command substitution in it",
                    program.text, word.text
                ));
            } else if !word.literal && position == Position::Name {
                self.unknown(format!(
                    "`{}` uses `{}` as a variable name; a name known only at run time can \
                     hold a subscript that runs commands",
                    program.text, word.text
                ));
            }
        }
        if matches!(program.text.as_str(), "mapfile" | "readarray")
            && let Some(callback) = option_values(args, "dnOsucC", "C").first()
        {
            let code = args.get(*callback).map_or("", |w| w.text.as_str());
            self.unknown(format!("`{} -C` runs `{code}` as a command", program.text));
        }
    }

    /// Quoted text in a place bash evaluates again (a subscript is arithmetic, and so is an
    /// offset) loses its quotes before the evaluation: `${a['b[$(cmd)]']}` runs `cmd`.
    pub(crate) fn quoted_subst(&mut self, node: Node<'_>, src: &str, place: &str) {
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if matches!(n.kind(), "raw_string" | "string" | "ansi_c_string") {
                let value = words::resolve(n, src);
                if value.literal && has_subst_syntax(&value.text) {
                    self.unknown(format!(
                        "quoted text with command-substitution syntax in {place} (bash \
                         evaluates it again)"
                    ));
                    return;
                }
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
    }
}

/// A declaration word the grammar parsed as `name=value` (its text is one of the segment's
/// own assignments).
fn is_parsed_assignment(p: &Pending, word: &Word) -> bool {
    p.assignments
        .iter()
        .any(|a| word.text.strip_prefix(a.name.as_str()) == Some(&format!("={}", a.value)))
}

/// The argument indices (into `args`) that `program` evaluates, and how.
fn positions(program: &str, args: &[Word]) -> Vec<(usize, Position)> {
    let all_operands = |pos| {
        args.iter()
            .enumerate()
            .filter(|(_, w)| !(w.literal && w.text.starts_with('-')))
            .map(|(i, _)| (i, pos))
            .collect::<Vec<_>>()
    };
    match program {
        "[[" | "[" | "test" => test_positions(args),
        "let" => (0..args.len()).map(|i| (i, Position::Arithmetic)).collect(),
        "unset" => all_operands(Position::Name),
        p if DECLARATIONS.contains(&p) => all_operands(Position::Declaration),
        "read" => {
            let mut out = named_options(args, "adinNptu", "a");
            out.extend(operands(args, "adinNptu").map(|i| (i, Position::Name)));
            out
        }
        "mapfile" | "readarray" => operands(args, "dnOsucC")
            .map(|i| (i, Position::Name))
            .collect(),
        "printf" => named_options(args, "v", "v"),
        "wait" => named_options(args, "p", "p"),
        "getopts" => operands(args, "")
            .skip(1)
            .take(1)
            .map(|i| (i, Position::Name))
            .collect(),
        _ => Vec::new(),
    }
}

/// `-v NAME` and `-R NAME` take names; the operands of `-eq` and friends are arithmetic.
fn test_positions(args: &[Word]) -> Vec<(usize, Position)> {
    let mut out = Vec::new();
    for (i, word) in args.iter().enumerate() {
        if !word.literal {
            continue;
        }
        if matches!(word.text.as_str(), "-v" | "-R") {
            out.push((i + 1, Position::Name));
        } else if ARITH_TESTS.contains(&word.text.as_str()) {
            if let Some(before) = i.checked_sub(1) {
                out.push((before, Position::Arithmetic));
            }
            out.push((i + 1, Position::Arithmetic));
        }
    }
    out
}

/// The indices of the values of options in `wanted` (attached or in the next word), for a
/// builtin whose options with a value are `with_value`; marked as names.
fn named_options(args: &[Word], with_value: &str, wanted: &str) -> Vec<(usize, Position)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if !word.literal || !word.text.starts_with('-') || word.text == "-" {
            break;
        }
        if word.text == "--" {
            break;
        }
        for (pos, c) in word.text.char_indices().skip(1) {
            if !with_value.contains(c) {
                continue;
            }
            let attached = pos + c.len_utf8() < word.text.len();
            if wanted.contains(c) {
                if attached {
                    out.push((i - 1, Position::Name));
                } else {
                    out.push((i, Position::Name));
                }
            }
            if !attached {
                i += 1;
            }
            break;
        }
    }
    out
}

/// Like [`named_options`], as plain indices.
fn option_values(args: &[Word], with_value: &str, wanted: &str) -> Vec<usize> {
    named_options(args, with_value, wanted)
        .into_iter()
        .map(|(i, _)| i)
        .collect()
}

/// The indices of the operands after a builtin's options (`with_value` options take a value).
fn operands<'a>(args: &'a [Word], with_value: &'a str) -> impl Iterator<Item = usize> + 'a {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        if !word.literal || !word.text.starts_with('-') || word.text == "-" {
            break;
        }
        i += 1;
        if word.text == "--" {
            break;
        }
        if let Some((pos, c)) = word
            .text
            .char_indices()
            .skip(1)
            .find(|(_, c)| with_value.contains(*c))
            && pos + c.len_utf8() == word.text.len()
        {
            i += 1;
        }
    }
    (i..args.len()).filter(move |&k| args.get(k).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split(' ').map(Word::literal).collect()
    }

    #[test]
    fn option_values_and_operands() {
        let args = words("-r -a arr -p prompt name other");
        assert_eq!(option_values(&args, "adinNptu", "a"), [2]);
        assert_eq!(operands(&args, "adinNptu").collect::<Vec<_>>(), [5, 6]);
        let args = words("-vNAME %s x");
        assert_eq!(option_values(&args, "v", "v"), [0]);
        let args = words("-v NAME %s x");
        assert_eq!(option_values(&args, "v", "v"), [1]);
        let args = words("-t -C cb -c 1 arr");
        assert_eq!(option_values(&args, "dnOsucC", "C"), [2]);
        assert_eq!(operands(&args, "dnOsucC").collect::<Vec<_>>(), [5]);
    }

    #[test]
    fn tests_mark_names_and_arithmetic() {
        let args = words("-v a[x] && x -eq 1 ]]");
        assert_eq!(
            test_positions(&args),
            [
                (1, Position::Name),
                (3, Position::Arithmetic),
                (5, Position::Arithmetic)
            ]
        );
    }
}
