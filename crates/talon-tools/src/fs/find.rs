//! The search engine behind `glob`/`Glob` and `search`/`Grep`: ripgrep's own library crates
//! (`ignore` for the parallel, gitignore-aware walk; `globset`; `grep-regex` and `grep-searcher`
//! for matching with binary detection and context), confined to the jail.
//!
//! The walk never follows symlinks and skips denied prefixes (and, when asked, VCS directories), so
//! denied paths never appear in results. Each file found is then opened through the jail with
//! symlinks forbidden ([`talon_fs::Jail::open_walked`]): a file swapped for a symlink after the
//! walk saw it is skipped, not followed.
//!
//! Tools do not call this engine: they go through the façade ([`crate::fs::files`]), which adds
//! the documents the store holds for routed names ([`Found::routed`]) to what the walk finds, so
//! a search sees the same files a read does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::types::TypesBuilder;
use ignore::{WalkBuilder, WalkState};
use talon_fs::Jail;

/// Directories of version-control systems, skipped by Claude Code's Grep.
pub const VCS_DIRS: &[&str] = &[".git", ".svn", ".hg", ".bzr", ".jj"];

/// How to walk.
#[derive(Debug, Clone)]
pub struct WalkOptions {
    /// Directory to start from (absolute, inside the jail).
    pub base: PathBuf,
    /// Include hidden files and directories.
    pub hidden: bool,
    /// Honour .gitignore / .ignore files.
    pub gitignore: bool,
    /// Skip VCS directories.
    pub skip_vcs: bool,
    /// Only files matching these globs (relative to `base`); `!glob` excludes.
    pub globs: Vec<String>,
    /// Fill [`Found::mtime`] (one stat per file; only for callers that sort by time).
    pub need_mtime: bool,
    /// Only files of these ripgrep types (`rust`, `py`, …).
    pub types: Vec<String>,
}

/// A file found by a walk.
#[derive(Debug, Clone)]
pub struct Found {
    pub path: PathBuf,
    pub mtime: SystemTime,
    /// The text of a document the store holds under this path (a context file or memory); it
    /// is searched as it is, and the disk is never opened for it.
    pub routed: Option<Arc<str>>,
}

fn compile_globs(patterns: &[String]) -> Result<(Option<GlobSet>, Option<GlobSet>), String> {
    let (mut include, mut exclude) = (GlobSetBuilder::new(), GlobSetBuilder::new());
    let (mut any_include, mut any_exclude) = (false, false);
    for pattern in patterns {
        let (negated, raw) = match pattern.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, pattern.as_str()),
        };
        // A pattern without a slash matches the file name anywhere, as rg does.
        let effective = if raw.contains('/') {
            raw.to_string()
        } else {
            format!("**/{raw}")
        };
        let glob = GlobBuilder::new(&effective)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("invalid glob {pattern:?}: {e}"))?;
        if negated {
            exclude.add(glob);
            any_exclude = true;
        } else {
            include.add(glob);
            any_include = true;
        }
    }
    let build = |b: GlobSetBuilder, any: bool| -> Result<Option<GlobSet>, String> {
        if any {
            b.build().map(Some).map_err(|e| e.to_string())
        } else {
            Ok(None)
        }
    };
    Ok((build(include, any_include)?, build(exclude, any_exclude)?))
}

/// Splits Claude Code's `glob` parameter: whitespace and commas separate patterns, but brace
/// groups (`*.{ts,tsx}`) stay whole.
pub fn split_globs(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in raw.chars() {
        match c {
            '{' => {
                depth += 1;
                current.push(c);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The ripgrep type matcher for `types` (`rust`, `py`, …); `None` when no type is asked for.
fn type_matcher(types: &[String]) -> Result<Option<ignore::types::Types>, String> {
    if types.is_empty() {
        return Ok(None);
    }
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    for t in types {
        builder.select(t);
    }
    builder.build().map(Some).map_err(|e| {
        format!("invalid type: {e}. Use ripgrep type names such as rust, py, js, ts, go, md")
    })
}

/// Builds the parallel walker; the callback gets every regular file that passes the filters.
fn walker(jail: &Jail, options: &WalkOptions) -> Result<ignore::WalkParallel, String> {
    let mut builder = WalkBuilder::new(&options.base);
    builder
        .hidden(!options.hidden)
        .git_ignore(options.gitignore)
        .git_exclude(options.gitignore)
        .git_global(false)
        .ignore(options.gitignore)
        .parents(options.gitignore)
        .require_git(false)
        .follow_links(false)
        .threads(
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(8),
        );
    if let Some(matcher) = type_matcher(&options.types)? {
        builder.types(matcher);
    }
    let root = jail.root().to_path_buf();
    let denied = jail.deny_test();
    let skip_vcs = options.skip_vcs;
    builder.filter_entry(move |entry| {
        if skip_vcs
            && entry.file_type().is_some_and(|t| t.is_dir())
            && VCS_DIRS.iter().any(|d| entry.file_name() == *d)
        {
            return false;
        }
        match talon_fs::plain::strip_prefix(entry.path(), &root) {
            Some(rel) => !denied(rel),
            None => true,
        }
    });
    Ok(builder.build_parallel())
}

/// One walker thread's state: its results stay local and are merged once, when the thread ends.
struct Collector<'a> {
    shared: &'a Mutex<Vec<Found>>,
    local: Vec<Found>,
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
    base: &'a Path,
    need_mtime: bool,
}

impl ignore::ParallelVisitor for Collector<'_> {
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return WalkState::Continue;
        }
        let rel = talon_fs::plain::strip_prefix(entry.path(), self.base).unwrap_or(entry.path());
        if self.include.as_ref().is_some_and(|g| !g.is_match(rel))
            || self.exclude.as_ref().is_some_and(|g| g.is_match(rel))
        {
            return WalkState::Continue;
        }
        // A stat per file is only paid for by callers that sort by time.
        let mtime = if self.need_mtime {
            entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH)
        } else {
            SystemTime::UNIX_EPOCH
        };
        self.local.push(Found {
            path: entry.into_path(),
            mtime,
            routed: None,
        });
        WalkState::Continue
    }
}

impl Drop for Collector<'_> {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.lock() {
            shared.append(&mut self.local);
        }
    }
}

struct Collectors<'a> {
    shared: &'a Mutex<Vec<Found>>,
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
    base: &'a Path,
    need_mtime: bool,
}

impl<'s> ignore::ParallelVisitorBuilder<'s> for Collectors<'s> {
    fn build(&mut self) -> Box<dyn ignore::ParallelVisitor + 's> {
        Box::new(Collector {
            shared: self.shared,
            local: Vec::new(),
            include: self.include.clone(),
            exclude: self.exclude.clone(),
            base: self.base,
            need_mtime: self.need_mtime,
        })
    }
}

/// The documents (absolute path and text) that pass the walk's filters — globs relative to
/// `options.base`, types, hidden names — as the walk would pass files of those names. Callers
/// give only documents under `options.base`; ignore files do not apply (they describe the disk).
pub(crate) fn filter_documents<'a>(
    options: &WalkOptions,
    documents: impl Iterator<Item = (&'a Path, &'a Arc<str>)>,
) -> Result<Vec<Found>, String> {
    let (include, exclude) = compile_globs(&options.globs)?;
    let types = type_matcher(&options.types)?;
    let mut out = Vec::new();
    for (path, text) in documents {
        let rel = path.strip_prefix(&options.base).unwrap_or(path);
        let hidden = rel
            .components()
            .any(|c| c.as_os_str().as_encoded_bytes().starts_with(b"."));
        if (hidden && !options.hidden)
            || include.as_ref().is_some_and(|g| !g.is_match(rel))
            || exclude.as_ref().is_some_and(|g| g.is_match(rel))
            || types
                .as_ref()
                .is_some_and(|t| !t.matched(rel, false).is_whitelist())
        {
            continue;
        }
        out.push(Found {
            path: path.to_path_buf(),
            mtime: SystemTime::UNIX_EPOCH,
            routed: Some(Arc::clone(text)),
        });
    }
    Ok(out)
}

/// Every regular file under `options.base` that passes the filters, in no particular order.
pub(crate) fn find_files(jail: &Jail, options: &WalkOptions) -> Result<Vec<Found>, String> {
    let (include, exclude) = compile_globs(&options.globs)?;
    let shared = Mutex::new(Vec::new());
    let mut collectors = Collectors {
        shared: &shared,
        include,
        exclude,
        base: &options.base,
        need_mtime: options.need_mtime,
    };
    walker(jail, options)?.visit(&mut collectors);
    Ok(shared.into_inner().unwrap_or_default())
}

/// Sorts by path bytes (much cheaper than `Path`'s component-wise order, and the same order for
/// the paths a walk produces under one base).
pub fn sort_by_path(found: &mut [Found]) {
    use std::os::unix::ffi::OsStrExt;
    found.sort_unstable_by(|a, b| {
        a.path
            .as_os_str()
            .as_bytes()
            .cmp(b.path.as_os_str().as_bytes())
    });
}

/// A glob pattern for `Glob`/`glob`, matched against paths relative to the base.
pub fn path_glob(pattern: &str) -> Result<GlobSet, String> {
    let glob: Glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("invalid glob pattern {pattern:?}: {e}"))?;
    GlobSetBuilder::new()
        .add(glob)
        .build()
        .map_err(|e| e.to_string())
}

/// What to search for.
#[derive(Debug, Clone)]
pub struct GrepOptions {
    pub pattern: String,
    pub case_insensitive: bool,
    pub multiline: bool,
    pub before: usize,
    pub after: usize,
    /// Stop reading a file after its first match (files-with-matches mode).
    pub first_match_only: bool,
    /// Longest line shown (longer ones are elided), like rg's `--max-columns`.
    pub max_columns: usize,
}

/// One output line of a file's matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepLine {
    pub number: u64,
    pub text: String,
    /// A context line rather than a match.
    pub context: bool,
}

/// Matches in one file.
#[derive(Debug, Clone)]
pub struct FileMatches {
    pub path: PathBuf,
    pub mtime: SystemTime,
    /// A document of the store, not a file on disk (it has no modification time to look up).
    pub routed: bool,
    pub matched_lines: u64,
    pub lines: Vec<GrepLine>,
}

struct Collect<'a> {
    lines: &'a mut Vec<GrepLine>,
    matched: &'a mut u64,
    first_only: bool,
    max_columns: usize,
}

impl Collect<'_> {
    fn push(&mut self, number: Option<u64>, bytes: &[u8], context: bool) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let text = if text.chars().count() > self.max_columns {
            format!(
                "[Omitted long line with {} characters]",
                text.chars().count()
            )
        } else {
            text.to_string()
        };
        self.lines.push(GrepLine {
            number: number.unwrap_or(0),
            text,
            context,
        });
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        *self.matched += 1;
        if !self.first_only {
            // A multi-line match is shown line by line.
            let mut number = m.line_number();
            for line in m.lines() {
                self.push(number, line, false);
                number = number.map(|n| n + 1);
            }
        }
        Ok(!self.first_only)
    }

    fn context(&mut self, _searcher: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if !matches!(c.kind(), SinkContextKind::Other) {
            self.push(c.line_number(), c.bytes(), true);
        }
        Ok(true)
    }
}

/// Builds the matcher; the error says what is wrong with the pattern.
pub fn matcher(options: &GrepOptions) -> Result<RegexMatcher, String> {
    let mut builder = RegexMatcherBuilder::new();
    builder
        .case_insensitive(options.case_insensitive)
        .multi_line(true);
    if options.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder
        .build(&options.pattern)
        .map_err(|e| format!("invalid regex {:?}: {e}", options.pattern))
}

/// Files a search could not read, by reason. They are reported to the model, never silently
/// dropped: a search that skipped files must not read as "no matches there".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Hard links refused by the jail's policy.
    pub hard_links: usize,
    /// Files that changed into something unsafe since the walk (a symlink swapped in), vanished,
    /// or could not be read.
    pub unreadable: usize,
}

impl Skipped {
    fn add(&mut self, other: Skipped) {
        self.hard_links += other.hard_links;
        self.unreadable += other.unreadable;
    }

    /// A footer line for the search's output, or `None` when nothing was skipped.
    pub fn footer(&self) -> Option<String> {
        let plural = |n: usize| if n == 1 { "file" } else { "files" };
        let mut parts = Vec::new();
        if self.hard_links > 0 {
            parts.push(format!(
                "{} {} skipped because {} (their other names may be outside the workspace; set [fs] allow_hard_links = true to search them)",
                self.hard_links,
                plural(self.hard_links),
                if self.hard_links == 1 {
                    "it is a hard link"
                } else {
                    "they are hard links"
                }
            ));
        }
        if self.unreadable > 0 {
            parts.push(format!(
                "{} {} skipped because {} could not be read safely (changed, removed or unreadable during the search)",
                self.unreadable,
                plural(self.unreadable),
                if self.unreadable == 1 { "it" } else { "they" }
            ));
        }
        (!parts.is_empty()).then(|| format!("[{}]", parts.join("; ")))
    }

    /// Appends the footer to the model's text and adds it as a warning, when files were skipped.
    pub fn annotate(&self, mut output: talon_core::ToolOutput) -> talon_core::ToolOutput {
        if let Some(footer) = self.footer() {
            if !output.for_llm.is_empty() {
                output.for_llm.push_str("\n\n");
            }
            output.for_llm.push_str(&footer);
            output.warnings.push(footer);
        }
        output
    }
}

/// What a search found, and what it had to skip.
#[derive(Debug, Default)]
pub struct GrepReport {
    pub matches: Vec<FileMatches>,
    pub skipped: Skipped,
}

/// Searches `files` in parallel. Files the jail refuses (hard links under the default policy) or
/// that cannot be opened safely are skipped and counted in [`GrepReport::skipped`]; documents of
/// the store are searched in memory.
pub(crate) fn grep(
    jail: &Jail,
    files: Vec<Found>,
    options: &GrepOptions,
) -> Result<GrepReport, String> {
    let matcher = matcher(options)?;
    let results = Mutex::new(Vec::new());
    let skipped_total = Mutex::new(Skipped::default());
    let queue = Mutex::new(files);
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut skipped = Skipped::default();
                let mut searcher = SearcherBuilder::new()
                    .line_number(true)
                    .before_context(options.before)
                    .after_context(options.after)
                    .multi_line(options.multiline)
                    .binary_detection(BinaryDetection::quit(0))
                    .build();
                loop {
                    let next = queue.lock().ok().and_then(|mut q| q.pop());
                    let Some(found) = next else { break };
                    let (mut lines, mut matched) = (Vec::new(), 0u64);
                    let sink = Collect {
                        lines: &mut lines,
                        matched: &mut matched,
                        first_only: options.first_match_only,
                        max_columns: options.max_columns,
                    };
                    let searched = match &found.routed {
                        Some(text) => searcher.search_slice(&matcher, text.as_bytes(), sink),
                        None => {
                            let opened = found
                                .path
                                .to_str()
                                .ok_or(None)
                                .and_then(|p| jail.locate(p).map_err(Some))
                                .and_then(|l| jail.open_walked(&l).map_err(Some));
                            let file = match opened {
                                Ok(file) => file,
                                Err(Some(talon_fs::FsError::HardLink { .. })) => {
                                    skipped.hard_links += 1;
                                    continue;
                                }
                                Err(_) => {
                                    skipped.unreadable += 1;
                                    continue;
                                }
                            };
                            searcher.search_file(&matcher, &file, sink)
                        }
                    };
                    if searched.is_err() {
                        skipped.unreadable += 1;
                        continue;
                    }
                    if matched == 0 {
                        continue;
                    }
                    if let Ok(mut r) = results.lock() {
                        r.push(FileMatches {
                            routed: found.routed.is_some(),
                            path: found.path,
                            mtime: found.mtime,
                            matched_lines: matched,
                            lines,
                        });
                    }
                }
                if let Ok(mut total) = skipped_total.lock() {
                    total.add(skipped);
                }
            });
        }
    });
    Ok(GrepReport {
        matches: results.into_inner().unwrap_or_default(),
        skipped: skipped_total.into_inner().unwrap_or_default(),
    })
}

/// Modification time of a path (for sorting results; not a security decision).
pub fn mtime_of(path: &Path) -> SystemTime {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// A path shown relative to the workspace root when inside it.
pub fn relative_to<'a>(path: &'a Path, root: &Path) -> &'a Path {
    talon_fs::plain::strip_prefix(path, root).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_splitting_keeps_braces() {
        assert_eq!(
            split_globs("*.rs, *.{ts,tsx} !target/**"),
            vec!["*.rs", "*.{ts,tsx}", "!target/**"]
        );
    }
}
