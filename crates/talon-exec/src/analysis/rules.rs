//! Claude Code's `Bash(…)` permission rules (research/sandbox.md §3), on analysed segments.
//!
//! * `Bash` and `Bash(*)` match any command; `Bash(git status)` matches exactly that;
//!   `Bash(npm run test:*)` is the legacy prefix form (`npm run test`, `npm run test --watch`,
//!   `npm run test:unit`, never `npm run testx`); `*` elsewhere matches any text, and a trailing
//!   ` *` also matches nothing (`Bash(ls *)` matches `ls` and `ls -la`, never `lsof`).
//! * Deny rules first, then ask rules, then allow rules; the first list that matches decides.
//! * A compound command is allowed only if every segment is: matched by an allow rule, or inert
//!   (an assignment, a test, `true`). Any unresolved part means not allowed.
//! * Rules match a segment after its transparent wrappers (`timeout`, `nice`, `env`, `sh -c` …)
//!   are stripped, as Claude Code strips `timeout nice nohup …`; privileged wrappers (`sudo`) and
//!   assignments that change what programs run (`LD_PRELOAD=`, `PATH=`) stay part of the text an
//!   allow rule must match. Deny and ask rules also match the text with every wrapper kept.
//! * An allow rule only covers a segment that writes files through a redirection if the rule
//!   itself has that redirection (`Bash(echo:*)` does not allow `echo x > ~/.bashrc`).

use std::sync::LazyLock;

use regex::Regex;

use super::{
    Analysis, Redirect, RedirectKind, Segment, SegmentKind, analyze, join_words, shell_quote,
};

/// A word that stands for `*` while a rule is analysed.
const WILDCARD: &str = "TALONRULEWILDCARD";

/// Why a rule was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// Only shell rules are handled here.
    #[error("`{0}` is not a Bash rule (expected `Bash`, `Bash(…)` or `exec(…)`)")]
    NotBash(String),
    /// A rule stands for one simple command.
    #[error("the rule `{rule}` must be one simple command that can be analysed: {why}")]
    Unsupported {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        why: String,
    },
}

/// One permission rule.
#[derive(Debug, Clone)]
pub struct Rule {
    source: String,
    matcher: Matcher,
}

#[derive(Debug, Clone)]
enum Matcher {
    Any,
    Pattern { regex: Regex, redirects: bool },
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Rule {
    /// Parses `Bash`, `Bash(*)`, `Bash(spec)` (or `exec(spec)`, GoClaw's tool name).
    pub fn parse(rule: &str) -> Result<Self, RuleError> {
        let text = rule.trim();
        let spec = ["Bash", "exec", "bash"].iter().find_map(|tool| {
            let rest = text.strip_prefix(tool)?;
            if rest.is_empty() {
                return Some("");
            }
            rest.strip_prefix('(')?.strip_suffix(')')
        });
        let Some(spec) = spec.map(str::trim) else {
            return Err(RuleError::NotBash(rule.to_owned()));
        };
        let unsupported = |why: &str| RuleError::Unsupported {
            rule: rule.to_owned(),
            why: why.to_owned(),
        };
        if spec.is_empty() || spec == "*" {
            return Ok(Self {
                source: rule.to_owned(),
                matcher: Matcher::Any,
            });
        }
        let (body, legacy) = match spec.strip_suffix(":*") {
            Some(prefix) => (prefix, true),
            None => (spec, false),
        };
        let analysis = analyze(&mark_wildcards(body));
        if let Some(why) = &analysis.unknown {
            return Err(unsupported(why));
        }
        let [segment] = analysis.segments.as_slice() else {
            return Err(unsupported("it has more or fewer than one command"));
        };
        let forms = Forms::of(segment);
        let redirects = !forms.redirects.is_empty();
        let text = if redirects {
            forms.with_redirects(&forms.allow)
        } else {
            forms.allow.clone()
        };
        let mut pattern = regex::escape(&text).replace(WILDCARD, ".*");
        if legacy {
            pattern.push_str("(?:[ :].*)?");
        } else if let Some(stripped) = pattern.strip_suffix(" .*") {
            pattern = format!("{stripped}(?: .*)?");
        }
        let regex =
            Regex::new(&format!("^(?s:{pattern})$")).map_err(|e| unsupported(&e.to_string()))?;
        Ok(Self {
            source: rule.to_owned(),
            matcher: Matcher::Pattern { regex, redirects },
        })
    }

    /// The rule as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether this rule allows `segment` (allow semantics: transparent wrappers stripped,
    /// file writes only through rules that name them).
    pub fn allows(&self, segment: &Segment) -> bool {
        let forms = Forms::of(segment);
        match &self.matcher {
            Matcher::Any => true,
            Matcher::Pattern {
                regex,
                redirects: true,
            } => regex.is_match(&forms.with_redirects(&forms.allow)),
            Matcher::Pattern {
                regex,
                redirects: false,
            } => !forms.writes && regex.is_match(&forms.allow),
        }
    }

    /// Whether this rule, as a deny or ask rule, covers `segment` in any of its forms.
    pub fn covers(&self, segment: &Segment) -> bool {
        let forms = Forms::of(segment);
        match &self.matcher {
            Matcher::Any => true,
            Matcher::Pattern { regex, .. } => forms
                .all
                .iter()
                .any(|text| regex.is_match(text) || regex.is_match(&forms.with_redirects(text))),
        }
    }
}

/// Replaces unquoted `*` with [`WILDCARD`].
fn mark_wildcards(spec: &str) -> String {
    let mut out = String::with_capacity(spec.len());
    let mut single = false;
    let mut double = false;
    let mut escaped = false;
    for c in spec.chars() {
        match c {
            _ if escaped => {
                escaped = false;
                out.push(c);
            }
            '\\' if !single => {
                escaped = true;
                out.push(c);
            }
            '\'' if !double => {
                single = !single;
                out.push(c);
            }
            '"' if !single => {
                double = !double;
                out.push(c);
            }
            '*' if !single && !double => out.push_str(WILDCARD),
            _ => out.push(c),
        }
    }
    out
}

/// The texts of a segment that rules are matched against.
struct Forms {
    /// What an allow rule must match.
    allow: String,
    /// What deny and ask rules may match (every wrapper kept, each stripped in turn).
    all: Vec<String>,
    /// The segment's redirections, canonically.
    redirects: String,
    /// It writes files through redirections.
    writes: bool,
}

impl Forms {
    fn of(segment: &Segment) -> Self {
        let argv = segment.command_line();
        let mut prefix: Vec<String> = segment
            .assignments
            .iter()
            .filter(|a| sensitive_name(&a.name))
            .map(assignment_text)
            .collect();
        for wrapper in segment.wrappers.iter().filter(|w| w.privileged) {
            prefix.push(join_words(&wrapper.argv, &[]));
        }
        prefix.push(argv.clone());
        let allow = join_nonempty(&prefix);
        let mut all = vec![allow.clone(), argv.clone()];
        for k in 0..segment.wrappers.len() {
            let mut words: Vec<String> = segment.wrappers[k..]
                .iter()
                .map(|w| join_words(&w.argv, &[]))
                .collect();
            words.push(argv.clone());
            all.push(join_nonempty(&words));
        }
        let assignments: Vec<String> = segment.assignments.iter().map(assignment_text).collect();
        if !assignments.is_empty() {
            all.push(join_nonempty(&[
                assignments.join(" "),
                all.last().cloned().unwrap_or_default(),
            ]));
        }
        all.dedup();
        let redirects: Vec<String> = segment.redirects.iter().filter_map(redirect_text).collect();
        Self {
            allow,
            all,
            redirects: redirects.join(" "),
            writes: segment.writes_files(),
        }
    }

    fn with_redirects(&self, text: &str) -> String {
        join_nonempty(&[text.to_owned(), self.redirects.clone()])
    }
}

fn join_nonempty(parts: &[String]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

fn assignment_text(a: &super::Assignment) -> String {
    if a.dynamic {
        format!("{}={}", a.name, a.value)
    } else {
        format!("{}={}", a.name, shell_quote(&a.value))
    }
}

fn redirect_text(r: &Redirect) -> Option<String> {
    if matches!(r.kind, RedirectKind::HereDoc | RedirectKind::HereString) {
        return None;
    }
    let fd = r.fd.map(|f| f.to_string()).unwrap_or_default();
    let target = if r.dynamic {
        r.target.clone()
    } else {
        shell_quote(&r.target)
    };
    Some(format!("{fd}{} {target}", r.op))
}

static SENSITIVE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(LD_|DYLD_|GIT_|NODE_|PYTHON|PERL|RUBY|JAVA|_JAVA|JDK_|BASH|CARGO_|RUSTC|RUSTDOC|NPM_CONFIG_|npm_config_|GCONV|MALLOC_|LESS|GLIBC_)|^(ENV|PATH|IFS|PS4|PROMPT_COMMAND|SHELLOPTS|CDPATH|PAGER|EDITOR|VISUAL|BROWSER|MANPAGER|SYSTEMD_PAGER|SSH_ASKPASS|SUDO_ASKPASS|CC|CXX|CPP|LD|AR|MAKEFLAGS|MAKE|SHELL|HOME|XDG_CONFIG_HOME|ZDOTDIR|HISTFILE|TERMINFO|LOCPATH|NLSPATH|RUSTFLAGS|TMPDIR)$",
    )
    .ok()
});

/// Variables that change what a program loads or runs (`LD_PRELOAD`, `PATH`, `GIT_SSH_COMMAND`,
/// `NODE_OPTIONS` …): an assignment of one is part of what an allow rule must match.
pub fn sensitive_name(name: &str) -> bool {
    let base = name.split('[').next().unwrap_or(name);
    SENSITIVE.as_ref().is_none_or(|r| r.is_match(base))
}

/// Whether a segment runs nothing that needs a rule: assignments of ordinary variables, tests,
/// `true`/`false`/`:`, and `export`/`local`/`declare`/`readonly`/`unset` of ordinary names.
pub fn is_inert(segment: &Segment) -> bool {
    if segment.writes_files() || segment.is_privileged() {
        return false;
    }
    if segment.assignments.iter().any(|a| sensitive_name(&a.name)) {
        return false;
    }
    match segment.kind {
        SegmentKind::Assignment | SegmentKind::Test => return true,
        SegmentKind::Command => {}
    }
    if !segment.wrappers.is_empty() {
        return false;
    }
    let Some(program) = segment.argv.first() else {
        return true;
    };
    match program.as_str() {
        "true" | "false" | ":" => true,
        "export" | "local" | "declare" | "typeset" | "readonly" | "unset" => {
            let args = segment.args();
            !args.is_empty()
                && args.iter().enumerate().all(|(i, arg)| {
                    if segment.is_dynamic(i + 1) && !arg.contains('=') {
                        return false;
                    }
                    if let Some(flags) = arg.strip_prefix('-') {
                        return !flags.is_empty() && flags.chars().all(|c| "xrailgu".contains(c));
                    }
                    let name = arg.split('=').next().unwrap_or(arg);
                    super::words::is_name(name.split('[').next().unwrap_or(name))
                        && !sensitive_name(name)
                })
        }
        _ => false,
    }
}

/// What the rules say about a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleVerdict {
    /// A deny rule matched a segment.
    Deny {
        /// The rule.
        rule: String,
        /// The segment it matched.
        segment: String,
    },
    /// An ask rule matched a segment (and no deny rule did).
    Ask {
        /// The rule.
        rule: String,
        /// The segment it matched.
        segment: String,
    },
    /// Every segment is allowed by an allow rule or inert.
    Allow,
    /// The analysis is unknown: no rule can allow it.
    Unknown(String),
    /// Some segments match no allow rule.
    NoMatch {
        /// Those segments, as command lines.
        unmatched: Vec<String>,
    },
}

/// Deny, ask and allow rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleSet {
    /// Refuse what these match.
    pub deny: Vec<Rule>,
    /// Ask about what these match.
    pub ask: Vec<Rule>,
    /// Allow what these match.
    pub allow: Vec<Rule>,
}

impl RuleSet {
    /// Parses three lists of rule strings.
    pub fn parse<S: AsRef<str>>(deny: &[S], ask: &[S], allow: &[S]) -> Result<Self, RuleError> {
        let parse = |list: &[S]| {
            list.iter()
                .map(|r| Rule::parse(r.as_ref()))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            deny: parse(deny)?,
            ask: parse(ask)?,
            allow: parse(allow)?,
        })
    }

    /// Evaluates `analysis`: deny, then ask, then allow.
    pub fn evaluate(&self, analysis: &Analysis) -> RuleVerdict {
        for (list, deny) in [(&self.deny, true), (&self.ask, false)] {
            for segment in &analysis.segments {
                if let Some(rule) = list.iter().find(|r| r.covers(segment)) {
                    let (rule, segment) = (rule.source.clone(), segment.command_line());
                    return if deny {
                        RuleVerdict::Deny { rule, segment }
                    } else {
                        RuleVerdict::Ask { rule, segment }
                    };
                }
            }
        }
        if let Some(why) = &analysis.unknown {
            return RuleVerdict::Unknown(why.clone());
        }
        let unmatched: Vec<String> = analysis
            .segments
            .iter()
            .filter(|s| !is_inert(s) && !self.allow.iter().any(|r| r.allows(s)))
            .map(Segment::command_line)
            .collect();
        if unmatched.is_empty() {
            RuleVerdict::Allow
        } else {
            RuleVerdict::NoMatch { unmatched }
        }
    }
}

/// The whole command, normalised: what "allow always" stores. Never a base name: approving
/// `git status` does not approve `git push --force` or `git status; rm -rf ~`.
pub fn normalise(analysis: &Analysis) -> String {
    analysis.normalized.clone()
}

/// The key "allow always" may store for `analysis`; `None` when the analysis is unknown
/// (an unknown command is never allowed without a person, so approving it "always" is refused).
pub fn always_allow_key(analysis: &Analysis) -> Option<String> {
    (!analysis.is_unknown()).then(|| normalise(analysis))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(rules: &[&str], command: &str) -> bool {
        let set = RuleSet::parse::<&str>(&[], &[], rules).expect("valid rules");
        set.evaluate(&analyze(command)) == RuleVerdict::Allow
    }

    #[test]
    fn prefix_rules_respect_word_boundaries() {
        let rule = ["Bash(npm run test:*)"];
        assert!(allowed(&rule, "npm run test"));
        assert!(allowed(&rule, "npm run test:unit"));
        assert!(allowed(&rule, "npm run test --watch"));
        assert!(!allowed(&rule, "npm run testx"));
        assert!(!allowed(&rule, "npm run build"));
    }

    #[test]
    fn exact_any_and_star_rules() {
        assert!(allowed(&["Bash(git status)"], "git   status"));
        assert!(!allowed(&["Bash(git status)"], "git status --short"));
        assert!(allowed(&["Bash"], "anything --at all"));
        assert!(allowed(&["Bash(*)"], "rm x"));
        assert!(allowed(&["Bash(ls *)"], "ls -la"));
        assert!(allowed(&["Bash(ls *)"], "ls"));
        assert!(!allowed(&["Bash(ls *)"], "lsof"));
        assert!(allowed(&["Bash(git * main)"], "git checkout main"));
        assert!(allowed(&["Bash(echo '*')"], "echo '*'"));
        assert!(!allowed(&["Bash(echo '*')"], "echo hi"));
    }

    #[test]
    fn every_segment_must_match() {
        let rules = ["Bash(git status)", "Bash(npm test)"];
        assert!(allowed(&rules, "git status && npm test"));
        assert!(!allowed(&rules, "git status && rm -rf x"));
        assert!(!allowed(&["Bash(safe:*)"], "safe && other"));
        assert!(!allowed(&["Bash(echo:*)"], "echo $(rm -rf x)"));
        assert!(allowed(&["Bash(echo:*)", "Bash(id)"], "echo $(id)"));
        assert!(allowed(&["Bash(npm test)"], "X=1 npm test"));
        assert!(allowed(
            &["Bash(npm test)"],
            "cd_ok=1; [[ -f package.json ]] && npm test"
        ));
    }

    #[test]
    fn wrappers_privilege_and_assignments() {
        assert!(allowed(&["Bash(npm test)"], "timeout 60 npm test"));
        assert!(allowed(&["Bash(npm test)"], "sh -c 'npm test'"));
        assert!(!allowed(&["Bash(npm test)"], "sudo npm test"));
        assert!(allowed(&["Bash(sudo npm test)"], "sudo npm test"));
        assert!(!allowed(
            &["Bash(npm test)"],
            "LD_PRELOAD=/tmp/x.so npm test"
        ));
        assert!(!allowed(
            &["Bash(npm test)"],
            "PATH=/tmp/evil:$PATH npm test"
        ));
        assert!(!allowed(
            &["Bash(npm test)"],
            "export NODE_OPTIONS=--require=/tmp/x.js; npm test"
        ));
        assert!(!allowed(&["Bash(ls)"], "./ls"));
    }

    #[test]
    fn redirect_writes_need_a_rule_that_names_them() {
        assert!(!allowed(&["Bash(echo:*)"], "echo x > ~/.bashrc"));
        assert!(allowed(&["Bash(echo:*)"], "echo x 2>&1"));
        assert!(allowed(&["Bash(echo:*)"], "echo x >/dev/null"));
        assert!(allowed(&["Bash(npm test > out.txt)"], "npm test >out.txt"));
        assert!(allowed(&["Bash(npm test 2>&1)"], "npm test 2>&1"));
    }

    #[test]
    fn deny_first_then_ask_then_allow() {
        let set = RuleSet::parse(
            &["Bash(git push:*)"],
            &["Bash(git commit:*)"],
            &["Bash(git:*)"],
        )
        .expect("rules");
        assert!(matches!(
            set.evaluate(&analyze("git push --force")),
            RuleVerdict::Deny { .. }
        ));
        assert!(matches!(
            set.evaluate(&analyze("git commit -m x")),
            RuleVerdict::Ask { .. }
        ));
        assert_eq!(set.evaluate(&analyze("git log")), RuleVerdict::Allow);
        assert!(matches!(
            set.evaluate(&analyze("git log; git push")),
            RuleVerdict::Deny { .. }
        ));
        // Deny rules see through wrappers and redirections, and match with wrappers kept.
        assert!(matches!(
            set.evaluate(&analyze("timeout 5 git push > out")),
            RuleVerdict::Deny { .. }
        ));
        let sudo = RuleSet::parse(&["Bash(sudo:*)"], &[], &["Bash"]).expect("rules");
        assert!(matches!(
            sudo.evaluate(&analyze("sudo ls")),
            RuleVerdict::Deny { .. }
        ));
    }

    #[test]
    fn unknown_is_never_allowed() {
        let set = RuleSet::parse::<&str>(&[], &[], &["Bash"]).expect("rules");
        assert!(matches!(
            set.evaluate(&analyze("eval \"$X\"")),
            RuleVerdict::Unknown(_)
        ));
        assert!(matches!(
            set.evaluate(&analyze("$CMD")),
            RuleVerdict::Unknown(_)
        ));
    }

    #[test]
    fn rules_must_be_bash_and_simple() {
        assert!(matches!(Rule::parse("Read(*)"), Err(RuleError::NotBash(_))));
        assert!(matches!(
            Rule::parse("Bash(a && b)"),
            Err(RuleError::Unsupported { .. })
        ));
        assert!(Rule::parse("exec(git status)").is_ok());
    }

    #[test]
    fn inert_segments() {
        let a = analyze("X=1; [[ -f a ]]; true; export FOO=bar; local y");
        assert!(a.segments.iter().all(is_inert), "{:?}", a.segments);
        let b = analyze("PATH=/tmp; export LD_PRELOAD=x; export -f f; export");
        assert!(b.segments.iter().all(|s| !is_inert(s)));
        assert!(!is_inert(&analyze("> file").segments[0]));
    }

    #[test]
    fn always_keys() {
        assert_eq!(
            always_allow_key(&analyze("git  status")).as_deref(),
            Some("git status")
        );
        assert_eq!(always_allow_key(&analyze("eval x")), None);
    }
}
