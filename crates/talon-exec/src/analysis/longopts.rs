//! Long options as `getopt_long` reads them.
//!
//! GNU programs accept any unambiguous prefix of a long option (`sort --co=sh` is
//! `--compress-program=sh`, `grep --rec` is `--recursive`), so comparing option text with a
//! name misses abbreviations, and a prefix check with a minimum length misses short ones. Here
//! an option is resolved against the program's whole option table, as `getopt_long` does: an
//! exact name wins, else the one option the text is a prefix of. Two rules follow from it:
//!
//! * A check for a dangerous option ([`may_be`]) treats every text that could expand to it as
//!   that option (an ambiguous abbreviation errors out in the program, so refusing it costs
//!   nothing).
//! * A judgement that options are harmless ([`resolve`] giving [`Long::Is`]) needs the text to
//!   resolve to exactly one known option; an ambiguous or unknown one is not harmless.

/// What a `--…` word resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Long<'a> {
    /// This option (exact, or the only one the text abbreviates).
    Is(&'a str),
    /// The text abbreviates several options.
    Ambiguous,
    /// The text names no option of the table.
    Unknown,
}

/// Resolves `arg` (`--name`, `--name=value`, `--abbrev`) against `table`; `None` when `arg` is
/// not a long option.
pub(crate) fn resolve<'a>(arg: &str, table: &[&'a str]) -> Option<Long<'a>> {
    let key = arg.strip_prefix("--")?;
    let key = key.split_once('=').map_or(key, |(k, _)| k);
    if key.is_empty() {
        return None;
    }
    if let Some(exact) = table.iter().find(|name| **name == key) {
        return Some(Long::Is(exact));
    }
    let mut found = table.iter().filter(|name| name.starts_with(key));
    Some(match (found.next(), found.next()) {
        (Some(one), None) => Long::Is(one),
        (Some(_), Some(_)) => Long::Ambiguous,
        _ => Long::Unknown,
    })
}

/// True when `arg` may be the long option `name` of a program with options `table`: its exact
/// name or any abbreviation of it that is not exactly another option.
pub(crate) fn may_be(arg: &str, name: &str, table: &[&str]) -> bool {
    let Some(key) = arg.strip_prefix("--") else {
        return false;
    };
    let key = key.split_once('=').map_or(key, |(k, _)| k);
    !key.is_empty() && name.starts_with(key) && !(key != name && table.contains(&key))
}

/// True when every long option among `args` resolves to one option of `table` that is not in
/// `dangerous`.
pub(crate) fn all_harmless(args: &[String], table: &[&str], dangerous: &[&str]) -> bool {
    args.iter().all(|a| match resolve(a, table) {
        None => true,
        Some(Long::Is(name)) => !dangerous.contains(&name),
        Some(Long::Ambiguous | Long::Unknown) => false,
    })
}

/// True when the short-option cluster `arg` (`-us`, `-d X`) holds an option in `wanted`
/// before an option in `with_arg` takes the rest of the word as its value.
pub(crate) fn cluster_has(arg: &str, wanted: &str, with_arg: &str) -> bool {
    let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
        return false;
    };
    for c in cluster.chars() {
        if wanted.contains(c) {
            return true;
        }
        if with_arg.contains(c) {
            return false;
        }
    }
    false
}

/// GNU coreutils `rm`.
pub(crate) const RM: &[&str] = &[
    "force",
    "interactive",
    "one-file-system",
    "no-preserve-root",
    "preserve-root",
    "recursive",
    "dir",
    "verbose",
    "help",
    "version",
];

/// GNU coreutils `sort`.
pub(crate) const SORT: &[&str] = &[
    "ignore-leading-blanks",
    "check",
    "compress-program",
    "debug",
    "dictionary-order",
    "field-separator",
    "files0-from",
    "general-numeric-sort",
    "human-numeric-sort",
    "ignore-case",
    "ignore-nonprinting",
    "key",
    "merge",
    "month-sort",
    "numeric-sort",
    "output",
    "parallel",
    "random-sort",
    "random-source",
    "reverse",
    "sort",
    "stable",
    "buffer-size",
    "temporary-directory",
    "unique",
    "version-sort",
    "zero-terminated",
    "help",
    "version",
];

/// `sort` options that write files or run programs.
pub(crate) const SORT_DANGEROUS: &[&str] = &["output", "compress-program", "temporary-directory"];

/// GNU `grep`.
pub(crate) const GREP: &[&str] = &[
    "extended-regexp",
    "fixed-strings",
    "basic-regexp",
    "perl-regexp",
    "regexp",
    "file",
    "ignore-case",
    "no-ignore-case",
    "word-regexp",
    "line-regexp",
    "null-data",
    "no-messages",
    "invert-match",
    "version",
    "help",
    "max-count",
    "byte-offset",
    "line-number",
    "line-buffered",
    "with-filename",
    "no-filename",
    "label",
    "only-matching",
    "quiet",
    "silent",
    "binary-files",
    "text",
    "directories",
    "devices",
    "recursive",
    "dereference-recursive",
    "include",
    "exclude",
    "exclude-from",
    "exclude-dir",
    "files-without-match",
    "files-with-matches",
    "count",
    "initial-tab",
    "null",
    "before-context",
    "after-context",
    "context",
    "color",
    "colour",
    "binary",
    "no-group-separator",
    "group-separator",
];

/// `grep` options that walk directory trees.
pub(crate) const GREP_DANGEROUS: &[&str] = &["recursive", "dereference-recursive", "directories"];

/// GNU coreutils `date`.
pub(crate) const DATE: &[&str] = &[
    "date",
    "debug",
    "file",
    "iso-8601",
    "resolution",
    "rfc-email",
    "rfc-3339",
    "reference",
    "set",
    "universal",
    "utc",
    "uct",
    "help",
    "version",
];

/// `file` (from the `file` package).
pub(crate) const FILE: &[&str] = &[
    "apple",
    "brief",
    "compile",
    "checking-printout",
    "debug",
    "dereference",
    "exclude",
    "exclude-quiet",
    "extension",
    "files-from",
    "help",
    "keep-going",
    "list",
    "magic-file",
    "mime",
    "mime-type",
    "mime-encoding",
    "no-buffer",
    "no-dereference",
    "no-pad",
    "no-sandbox",
    "parameter",
    "preserve-date",
    "print0",
    "raw",
    "separator",
    "special-files",
    "uncompress",
    "uncompress-noreport",
    "version",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getopt_long_resolution() {
        assert_eq!(resolve("--co=sh", SORT), Some(Long::Is("compress-program")));
        assert_eq!(resolve("--ou=x", SORT), Some(Long::Is("output")));
        assert_eq!(resolve("--rec", GREP), Some(Long::Is("recursive")));
        assert_eq!(resolve("--r", GREP), Some(Long::Ambiguous));
        assert_eq!(resolve("--nope", GREP), Some(Long::Unknown));
        assert_eq!(resolve("--file", GREP), Some(Long::Is("file")));
        assert_eq!(resolve("--null", GREP), Some(Long::Is("null")));
        assert_eq!(resolve("-r", GREP), None);
        assert_eq!(resolve("--", GREP), None);
    }

    #[test]
    fn dangerous_abbreviations() {
        assert!(may_be("--r", "recursive", RM));
        assert!(may_be("--f=1", "force", RM));
        assert!(may_be("--compress-program", "compress-program", SORT));
        assert!(!may_be("--dir", "dir-x", &["dir", "dir-x"]));
        assert!(!may_be("--verbose", "recursive", RM));
        assert!(all_harmless(
            &["--rev".into(), "-n".into()],
            SORT,
            SORT_DANGEROUS
        ));
        assert!(!all_harmless(&["--co=sh".into()], SORT, SORT_DANGEROUS));
        assert!(!all_harmless(&["--zz".into()], SORT, SORT_DANGEROUS));
        assert!(cluster_has("-us", "s", "dfrI"));
        assert!(!cluster_has("-dsunday", "s", "dfrI"));
        assert!(!cluster_has("--set", "s", "dfrI"));
    }
}
