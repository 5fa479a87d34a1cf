//! Renders a migration's one source (`migrations/NNNN_name.sql`) into one engine's SQL.
//!
//! The source is plain SQL with two kinds of per-engine fragment:
//!
//! * **Tokens**, inline: `{{bigint}}`, `{{serial_pk}}`, `{{blob}}` (see [`TOKENS`]). Double
//!   braces never occur in Talon's SQL (a JSON default such as `'{}'` has single ones), so every
//!   `{{` opens a token, and an unknown or unclosed one is an error, never copied through.
//! * **Blocks**, whole lines: the lines after `-- @sqlite` are SQLite's only, after
//!   `-- @postgres` PostgreSQL's only, up to `-- @end`. A block has either section or both, in
//!   either order. The marker lines themselves are left out of the output.
//!
//! Everything else, line ends included, is copied byte for byte: the rendered text is what the
//! checksums of applied migrations were computed over. Both engines' fragments are checked
//! whichever engine is rendered, so a source renders for both or for neither.

use crate::Engine;

/// Every token: its name, then its SQLite and PostgreSQL text.
pub(crate) const TOKENS: &[(&str, &str, &str)] = &[
    ("bigint", "INTEGER", "BIGINT"),
    (
        "serial_pk",
        "INTEGER PRIMARY KEY AUTOINCREMENT",
        "BIGSERIAL PRIMARY KEY",
    ),
    ("blob", "BLOB", "BYTEA"),
];

const SQLITE: &str = "-- @sqlite";
const POSTGRES: &str = "-- @postgres";
const END: &str = "-- @end";

/// Why a migration source cannot be rendered. Lines count from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigrationSourceError {
    #[error("line {line}: unknown token {{{{{token}}}}} (known: bigint, serial_pk, blob)")]
    UnknownToken { line: usize, token: String },
    #[error("line {line}: `{{{{` has no closing `}}}}` on the same line")]
    UnclosedToken { line: usize },
    #[error(
        "line {line}: unknown marker {marker:?} (markers: `-- @sqlite`, `-- @postgres`, `-- @end`)"
    )]
    UnknownMarker { line: usize, marker: String },
    #[error("line {line}: `{marker}` a second time in the block opened on line {opened}")]
    RepeatedSection {
        line: usize,
        marker: &'static str,
        opened: usize,
    },
    #[error("line {line}: `-- @end` outside a block")]
    EndOutsideBlock { line: usize },
    #[error("the block opened on line {opened} has no `-- @end`")]
    UnterminatedBlock { opened: usize },
}

/// An open block: where it opened, which sections it has had, and whose section this is.
struct Block {
    opened: usize,
    sqlite: bool,
    postgres: bool,
    current: Engine,
}

/// `source` rendered for `engine`.
pub(crate) fn render(source: &str, engine: Engine) -> Result<String, MigrationSourceError> {
    let mut out = String::with_capacity(source.len());
    let mut block: Option<Block> = None;
    for (index, line) in source.split_inclusive('\n').enumerate() {
        let number = index + 1;
        let trimmed = line.trim();
        if trimmed.starts_with("-- @") {
            block = marker(trimmed, number, block)?;
            continue;
        }
        let rendered = tokens(line, number, engine)?;
        if block.as_ref().is_none_or(|b| b.current == engine) {
            out.push_str(&rendered);
        }
    }
    match block {
        Some(open) => Err(MigrationSourceError::UnterminatedBlock {
            opened: open.opened,
        }),
        None => Ok(out),
    }
}

/// The block after the marker line `trimmed` (line `number`).
fn marker(
    trimmed: &str,
    number: usize,
    block: Option<Block>,
) -> Result<Option<Block>, MigrationSourceError> {
    let (engine, name) = match trimmed {
        SQLITE => (Engine::Sqlite, SQLITE),
        POSTGRES => (Engine::Postgres, POSTGRES),
        END => {
            return match block {
                Some(_) => Ok(None),
                None => Err(MigrationSourceError::EndOutsideBlock { line: number }),
            };
        }
        other => {
            return Err(MigrationSourceError::UnknownMarker {
                line: number,
                marker: other.to_owned(),
            });
        }
    };
    let mut open = block.unwrap_or(Block {
        opened: number,
        sqlite: false,
        postgres: false,
        current: engine,
    });
    let seen = match engine {
        Engine::Sqlite => &mut open.sqlite,
        Engine::Postgres => &mut open.postgres,
    };
    if *seen {
        return Err(MigrationSourceError::RepeatedSection {
            line: number,
            marker: name,
            opened: open.opened,
        });
    }
    *seen = true;
    open.current = engine;
    Ok(Some(open))
}

/// `line` with its tokens replaced by `engine`'s text.
fn tokens(line: &str, number: usize, engine: Engine) -> Result<String, MigrationSourceError> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(MigrationSourceError::UnclosedToken { line: number });
        };
        let name = &after[..end];
        let Some((_, sqlite, postgres)) = TOKENS.iter().find(|(known, _, _)| *known == name) else {
            return Err(MigrationSourceError::UnknownToken {
                line: number,
                token: name.to_owned(),
            });
        };
        out.push_str(match engine {
            Engine::Sqlite => sqlite,
            Engine::Postgres => postgres,
        });
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{MigrationSourceError as E, render};
    use crate::Engine::{Postgres, Sqlite};

    fn both(source: &str) -> (String, String) {
        (
            render(source, Sqlite).unwrap_or_else(|e| panic!("{e}")),
            render(source, Postgres).unwrap_or_else(|e| panic!("{e}")),
        )
    }

    #[test]
    fn tokens_become_each_engines_type() {
        let (sqlite, postgres) = both(
            "CREATE TABLE t (id {{serial_pk}}, n {{bigint}}, b {{blob}}, j TEXT DEFAULT '{}');\n",
        );
        assert_eq!(
            sqlite,
            "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER, b BLOB, j TEXT DEFAULT '{}');\n"
        );
        assert_eq!(
            postgres,
            "CREATE TABLE t (id BIGSERIAL PRIMARY KEY, n BIGINT, b BYTEA, j TEXT DEFAULT '{}');\n"
        );
    }

    #[test]
    fn blocks_keep_one_engines_lines_and_drop_the_markers() {
        let source = "a\n-- @sqlite\ns1\ns2\n-- @postgres\np\n-- @end\nb\n  -- @postgres\nq {{bigint}}\n  -- @end\nc";
        let (sqlite, postgres) = both(source);
        assert_eq!(sqlite, "a\ns1\ns2\nb\nc");
        assert_eq!(postgres, "a\np\nb\nq BIGINT\nc");
    }

    #[test]
    fn text_outside_fragments_is_copied_byte_for_byte() {
        let source = "-- no newline at the end, CRLF, '{}' and }} stay\r\n\r\nx }} {";
        assert_eq!(both(source), (source.to_owned(), source.to_owned()));
        assert_eq!(both(""), (String::new(), String::new()));
    }

    #[test]
    fn malformed_sources_are_errors_on_both_engines() {
        let cases = [
            (
                "a\nid {{int}}\n",
                E::UnknownToken {
                    line: 2,
                    token: "int".into(),
                },
            ),
            (
                "id {{ bigint }}\n",
                E::UnknownToken {
                    line: 1,
                    token: " bigint ".into(),
                },
            ),
            ("id {{bigint\n}}\n", E::UnclosedToken { line: 1 }),
            ("-- @sqlite\nx\n", E::UnterminatedBlock { opened: 1 }),
            (
                "-- @sqlite\n-- @postgres\n",
                E::UnterminatedBlock { opened: 1 },
            ),
            ("x\n-- @end\n", E::EndOutsideBlock { line: 2 }),
            (
                "-- @postgresql\n",
                E::UnknownMarker {
                    line: 1,
                    marker: "-- @postgresql".into(),
                },
            ),
            (
                "-- @sqlite\na\n-- @postgres\nb\n-- @sqlite\n-- @end\n",
                E::RepeatedSection {
                    line: 5,
                    marker: "-- @sqlite",
                    opened: 1,
                },
            ),
            // A token in the other engine's section is checked all the same.
            (
                "-- @postgres\nx {{bytea}}\n-- @end\n",
                E::UnknownToken {
                    line: 2,
                    token: "bytea".into(),
                },
            ),
        ];
        for (source, expected) in cases {
            assert_eq!(render(source, Sqlite), Err(expected.clone()), "{source:?}");
            assert_eq!(render(source, Postgres), Err(expected), "{source:?}");
        }
    }

    #[test]
    fn errors_name_the_line_and_what_to_write() {
        let e = render("x\ny {{int}}\n", Sqlite).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: unknown token {{int}} (known: bigint, serial_pk, blob)"
        );
        for (name, _, _) in super::TOKENS {
            assert!(e.to_string().contains(name), "{e} does not list {name}");
        }
        let e = render("-- @sqlite\n", Sqlite).unwrap_err();
        assert_eq!(e.to_string(), "the block opened on line 1 has no `-- @end`");
    }
}
