//! Credential scrubbing for everything a model or user will see.
//!
//! Speed comes from a keyword prefilter: one Aho-Corasick pass (SIMD-accelerated) over the text
//! finds the literal keywords every credential format carries; only a short window around each
//! hit (bounded by its line, except for private-key blocks) is searched, and only with the rules
//! that listed that keyword, each after a cheap precheck. Clean text costs one automaton pass.
//! See the `rules` module for the rule list and the false-positive policy.
//!
//! Dynamic values are exact strings: server IPs become `[SERVER_IP]` (only at number
//! boundaries, so `10.0.0.1` does not hit `110.0.0.12`), registered credential values and the
//! per-request [`ScrubBag`] become `[REDACTED]`.

mod checks;
mod rules;

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, RwLock};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::bytes::{Regex, RegexBuilder};

use crate::context::ScrubBag;

/// Replacement for credentials.
pub const REDACTED: &str = "[REDACTED]";
/// Replacement for the server's own IP addresses.
pub const SERVER_IP: &str = "[SERVER_IP]";

/// How far before a keyword a secret may start (identifier prefixes such as `MY_SERVICE_API_KEY`).
const WINDOW_BEFORE: usize = 160;
/// How far after a keyword a secret may extend.
const WINDOW_AFTER: usize = 1024;
/// How far a private-key block may extend after `-----BEGIN`.
const PEM_WINDOW: usize = 64 * 1024;
/// How far around an AWS access key id its secret key may be (across lines).
const AWS_WINDOW: usize = 512;
/// Three-byte keywords per prefilter automaton. Aho-Corasick's SIMD searcher (Teddy) compares
/// as many leading bytes as its shortest pattern has (up to four), so the three-byte keywords
/// get automata of their own and do not make every automaton less selective; and it slows down
/// as patterns share its buckets, so these come sixteen at a time.
const PREFILTER_SHORT_CHUNK: usize = 16;
/// Longer keywords per prefilter automaton. Four-byte fingerprints are selective enough for
/// larger automata; 48 stays within every Teddy variant's pattern limit (x86-64 and aarch64).
/// Measured over the 100 MiB bench corpus: 82 keywords as [3-byte] [words] [vendor prefixes]
/// scan in 46 ms; the same keywords in first-use chunks of 16 took 205 ms (a 2-keyword
/// chunk falls back off Teddy), and the previous 62 keywords in chunks of 16 took 51 ms.
const PREFILTER_LONG_CHUNK: usize = 48;
/// The automata are contiguous NFAs, not DFAs: the scan runs on the SIMD prefilter and only
/// confirms candidates in the automaton, so both kinds scrub the 100 MiB corpus in the same time
/// (141.2 against 140.8 ms, measured), while building the DFAs cost every short-lived process
/// (`talon tool call`) about 0.4 ms.
const AUTOMATON: Option<AhoCorasickKind> = Some(AhoCorasickKind::ContiguousNFA);

/// A rule failed to compile; only possible if the built-in table is broken.
#[derive(Debug, thiserror::Error)]
#[error("credential rule {id} does not compile: {source}")]
pub struct ScrubError {
    id: &'static str,
    #[source]
    source: regex::Error,
}

struct Compiled {
    id: &'static str,
    pattern: &'static str,
    /// Compiled on first use: clean text never triggers most rules, and compiling all of them up
    /// front would cost every short-lived process (`talon tool call`) milliseconds.
    regex: std::sync::OnceLock<Option<(Regex, Option<usize>)>>,
    accept: Option<rules::Accept>,
    precheck: Option<rules::Precheck>,
}

impl Compiled {
    /// The regex and the index of its `secret` group; `None` only if the built-in table is broken
    /// (a test compiles every rule).
    fn regex(&self) -> Option<&(Regex, Option<usize>)> {
        self.regex
            .get_or_init(|| match build_regex(self.id, self.pattern) {
                Ok(regex) => {
                    let group = regex.capture_names().position(|n| n == Some("secret"));
                    Some((regex, group))
                }
                Err(e) => {
                    tracing::error!(rule = self.id, error = %e, "credential rule does not compile");
                    None
                }
            })
            .as_ref()
    }
}

#[derive(Default)]
struct Dynamic {
    automaton: Option<AhoCorasick>,
    /// Parallel to the automaton's patterns: true for server IPs.
    is_ip: Vec<bool>,
    values: Vec<(String, bool)>,
}

impl Dynamic {
    fn build(values: Vec<(String, bool)>) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        let automaton = AhoCorasick::builder()
            .kind(AUTOMATON)
            .match_kind(MatchKind::LeftmostLongest)
            .build(values.iter().map(|(v, _)| v.as_bytes()))
            .ok();
        Self {
            automaton,
            is_ip: values.iter().map(|(_, ip)| *ip).collect(),
            values,
        }
    }
}

/// The credential scrubber. Thread-safe; share one per process.
pub struct Scrubber {
    /// The keyword automata (see [`PREFILTER_SHORT_CHUNK`]), each with the keyword index of
    /// each of its patterns.
    prefilter: Vec<(AhoCorasick, Vec<usize>)>,
    /// For each keyword: the rules it triggers (bit i = rule i).
    triggers: Vec<u64>,
    pem_index: usize,
    /// Keyword indices of [`rules::AWS_KEY_ID_KEYWORDS`].
    aws_indices: Vec<usize>,
    rules: Vec<Compiled>,
    dynamic: RwLock<Arc<Dynamic>>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scrubber")
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}

/// The static rules as `(id, pattern)`, for documentation and for benchmarking against the naive
/// every-pattern-over-the-whole-text approach.
pub fn rule_patterns() -> Vec<(&'static str, &'static str)> {
    rules::RULES.iter().map(|r| (r.id, r.pattern)).collect()
}

fn build_regex(id: &'static str, pattern: &str) -> Result<Regex, ScrubError> {
    RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(32 << 20)
        .build()
        .map_err(|source| ScrubError { id, source })
}

impl Scrubber {
    /// Compiles the built-in rules.
    pub fn new() -> Result<Self, ScrubError> {
        let keywords = rules::keywords();
        let triggers: Vec<u64> = keywords
            .iter()
            .map(|kw| {
                rules::RULES
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.keywords.contains(kw))
                    .fold(0u64, |mask, (i, _)| mask | (1 << i))
            })
            .collect();
        let pem_index = keywords
            .iter()
            .position(|k| *k == rules::PEM_KEYWORD)
            .unwrap_or(usize::MAX);
        let aws_indices = keywords
            .iter()
            .enumerate()
            .filter(|(_, k)| rules::AWS_KEY_ID_KEYWORDS.contains(k))
            .map(|(i, _)| i)
            .collect();
        let prefilter = prefilter_groups(&keywords)
            .into_iter()
            .map(|group| {
                let patterns: Vec<&str> = group.iter().map(|&i| keywords[i]).collect();
                AhoCorasick::builder()
                    .kind(AUTOMATON)
                    .match_kind(MatchKind::LeftmostFirst)
                    .build(patterns)
                    .map(|ac| (ac, group))
                    .map_err(|e| ScrubError {
                        id: "prefilter",
                        source: regex::Error::Syntax(e.to_string()),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rules = rules::RULES
            .iter()
            .map(|rule| Compiled {
                id: rule.id,
                pattern: rule.pattern,
                regex: std::sync::OnceLock::new(),
                accept: rule.accept,
                precheck: rule.precheck,
            })
            .collect();
        Ok(Self {
            prefilter,
            triggers,
            pem_index,
            aws_indices,
            rules,
            dynamic: RwLock::new(Arc::new(Dynamic::default())),
        })
    }

    fn dynamic(&self) -> Arc<Dynamic> {
        self.dynamic
            .read()
            .map(|d| Arc::clone(&d))
            .unwrap_or_default()
    }

    fn update_dynamic(&self, f: impl FnOnce(&mut Vec<(String, bool)>)) {
        let mut values = self.dynamic().values.clone();
        f(&mut values);
        let rebuilt = Arc::new(Dynamic::build(values));
        if let Ok(mut guard) = self.dynamic.write() {
            *guard = rebuilt;
        }
    }

    /// Registers the server's own IP addresses (replaced by `[SERVER_IP]`).
    pub fn add_server_ips<I: IntoIterator<Item = S>, S: Into<String>>(&self, ips: I) {
        let ips: Vec<String> = ips
            .into_iter()
            .map(Into::into)
            .filter(|s| !s.is_empty())
            .collect();
        self.update_dynamic(|values| {
            for ip in ips {
                if !values.iter().any(|(v, _)| *v == ip) {
                    values.push((ip, true));
                }
            }
        });
    }

    /// Registers credential values (replaced by `[REDACTED]`); values shorter than 6 characters
    /// are ignored because they would redact ordinary words.
    pub fn add_credentials<I: IntoIterator<Item = S>, S: Into<String>>(&self, secrets: I) {
        let secrets: Vec<String> = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s| s.len() >= ScrubBag::MIN_LEN)
            .collect();
        self.update_dynamic(|values| {
            for secret in secrets {
                if !values.iter().any(|(v, _)| *v == secret) {
                    values.push((secret, false));
                }
            }
        });
    }

    /// Forgets every registered credential value (server IPs stay).
    pub fn reset_credentials(&self) {
        self.update_dynamic(|values| values.retain(|(_, ip)| *ip));
    }

    /// Scrubs `text`, borrowing it unchanged when nothing matched.
    pub fn scrub<'a>(&self, text: &'a str, bag: &ScrubBag) -> Cow<'a, str> {
        let bytes = text.as_bytes();
        let mut spans: Vec<(Range<usize>, &'static str)> = Vec::new();
        self.static_spans(bytes, &mut spans);
        let dynamic = self.dynamic();
        if let Some(ac) = &dynamic.automaton {
            for m in ac.find_iter(bytes) {
                let is_ip = dynamic
                    .is_ip
                    .get(m.pattern().as_usize())
                    .copied()
                    .unwrap_or(false);
                if is_ip && !at_number_boundary(bytes, m.range()) {
                    continue;
                }
                spans.push((m.range(), if is_ip { SERVER_IP } else { REDACTED }));
            }
        }
        if !bag.is_empty() {
            let values: Vec<Vec<u8>> = bag.values().iter().flat_map(|v| bag_forms(v)).collect();
            if let Ok(ac) = AhoCorasick::builder()
                .kind(AUTOMATON)
                .match_kind(MatchKind::LeftmostLongest)
                .build(&values)
            {
                spans.extend(ac.find_iter(bytes).map(|m| (m.range(), REDACTED)));
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        Cow::Owned(apply(text, spans))
    }

    /// Convenience for owned strings: scrubs in place, allocating only when something matched.
    pub fn scrub_string(&self, text: &mut String, bag: &ScrubBag) {
        if let Cow::Owned(scrubbed) = self.scrub(text, bag) {
            *text = scrubbed;
        }
    }

    fn static_spans(&self, bytes: &[u8], spans: &mut Vec<(Range<usize>, &'static str)>) {
        let mut hits: Vec<(usize, usize, usize)> = Vec::new();
        for (automaton, indices) in &self.prefilter {
            hits.extend(automaton.find_iter(bytes).filter_map(|m| {
                let index = indices.get(m.pattern().as_usize())?;
                Some((m.start(), m.end(), *index))
            }));
        }
        if hits.is_empty() {
            return;
        }
        hits.sort_unstable();
        let mut window: Option<(Range<usize>, u64)> = None;
        for (start, end, index) in hits {
            let mask = self.triggers.get(index).copied().unwrap_or(0);
            let next = if index == self.pem_index {
                start..bytes.len().min(start + PEM_WINDOW)
            } else if self.aws_indices.contains(&index) {
                across_lines(bytes, start..end, AWS_WINDOW)
            } else {
                around(bytes, start..end)
            };
            window = match window {
                Some((current, m)) if next.start <= current.end => Some((
                    current.start.min(next.start)..current.end.max(next.end),
                    m | mask,
                )),
                Some((current, m)) => {
                    self.search_window(bytes, current, m, spans);
                    Some((next, mask))
                }
                None => Some((next, mask)),
            };
        }
        if let Some((current, mask)) = window {
            self.search_window(bytes, current, mask, spans);
        }
    }

    fn search_window(
        &self,
        bytes: &[u8],
        range: Range<usize>,
        mask: u64,
        spans: &mut Vec<(Range<usize>, &'static str)>,
    ) {
        let window = &bytes[range.clone()];
        for (index, rule) in self.rules.iter().enumerate() {
            if mask & (1 << index) == 0 || rule.precheck.is_some_and(|check| !check(window)) {
                continue;
            }
            let Some((regex, secret_group)) = rule.regex() else {
                continue;
            };
            let mut redact = |secret: Range<usize>| {
                tracing::trace!(rule = rule.id, "credential redacted");
                let start = range.start + secret.start;
                let mut end = range.start + secret.end;
                if secret.end == window.len() {
                    // The window cut a long token: redact the rest of it too.
                    end += bytes[end..]
                        .iter()
                        .take_while(|b| is_token_byte(**b))
                        .count();
                }
                spans.push((start..end, REDACTED));
            };
            if secret_group.is_none() && rule.accept.is_none() {
                // No groups needed: the cheaper find path.
                regex.find_iter(window).for_each(|m| redact(m.range()));
                continue;
            }
            for caps in regex.captures_iter(window) {
                let Some(whole) = caps.get(0) else { continue };
                let secret = secret_group
                    .and_then(|g| caps.get(g))
                    .map_or(whole.range(), |m| m.range());
                if rule
                    .accept
                    .is_some_and(|accept| !accept(window, whole.range(), secret.clone()))
                {
                    continue;
                }
                redact(secret);
            }
        }
    }
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/' | b'+' | b'=' | b'~')
}

/// The search window around a keyword hit: bounded by the hit's line and by
/// [`WINDOW_BEFORE`]/[`WINDOW_AFTER`], widened to whitespace so `\b` is not fooled by a cut word.
fn around(bytes: &[u8], hit: Range<usize>) -> Range<usize> {
    let lo = hit.start.saturating_sub(WINDOW_BEFORE);
    let line_start = memchr::memrchr(b'\n', &bytes[lo..hit.start]).map_or(lo, |p| lo + p + 1);
    let hi = bytes.len().min(hit.end + WINDOW_AFTER);
    let line_end = memchr::memchr(b'\n', &bytes[hit.end..hi]).map_or(hi, |p| hit.end + p);
    let mut start = line_start;
    if start == lo && lo > 0 {
        // Cut inside a long line: step back to whitespace (bounded) so the window starts on a word.
        let floor = lo.saturating_sub(256);
        start = bytes[floor..lo]
            .iter()
            .rposition(|b| b.is_ascii_whitespace())
            .map_or(floor, |p| floor + p + 1);
    }
    let mut end = line_end;
    if end == hi && hi < bytes.len() {
        let ceil = bytes.len().min(hi + 256);
        end = bytes[hi..ceil]
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .map_or(ceil, |p| hi + p);
    }
    start..end
}

/// The keyword indices of each prefilter automaton: the three-byte keywords, the words of
/// ordinary text, and the vendor prefixes, each kind in chunks (see [`PREFILTER_SHORT_CHUNK`]).
/// The shortest piece of a request's secret that is redacted on its own.
pub const SECRET_PIECE: usize = 5;

/// What of one request's secret `value` is redacted (issue 35): the value, reversed, in hex
/// (either case) and in base64 (standard and URL-safe, at each of the three alignments a value
/// can have inside longer encoded data), and every random-looking piece of it [`SECRET_PIECE`]
/// bytes long, so a command that prints it a few bytes at a time or transformed is caught as
/// well. The longest match wins, so the whole value still reads as one `[REDACTED]`.
fn bag_forms(value: &str) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let bytes = value.as_bytes();
    let mut forms: Vec<Vec<u8>> = vec![bytes.to_vec()];
    forms.push(bytes.iter().rev().copied().collect());
    forms.push(hex::encode(bytes).into_bytes());
    forms.push(hex::encode_upper(bytes).into_bytes());
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for shift in 0..3usize {
            let mut shifted = vec![0u8; shift];
            shifted.extend_from_slice(bytes);
            let encoded = engine.encode(&shifted).into_bytes();
            // Characters that depend on the value alone: after the group holding the prefix,
            // before the last, partial group.
            let start = if shift == 0 { 0 } else { 4 };
            let end = shifted.len() / 3 * 4;
            if end > start + 4 {
                forms.push(encoded[start..end].to_vec());
            }
        }
    }
    if bytes.len() > SECRET_PIECE {
        // Only pieces that look random (a digit, or both cases): a secret that holds a word
        // must not redact that word everywhere in the output.
        let random = |piece: &[u8]| {
            piece.iter().any(u8::is_ascii_digit)
                || (piece.iter().any(u8::is_ascii_uppercase)
                    && piece.iter().any(u8::is_ascii_lowercase))
        };
        forms.extend(
            bytes
                .windows(SECRET_PIECE)
                .filter(|p| random(p))
                .map(<[u8]>::to_vec),
        );
    }
    forms.retain(|f| !f.is_empty());
    forms.sort_unstable();
    forms.dedup();
    forms
}

fn prefilter_groups(keywords: &[&str]) -> Vec<Vec<usize>> {
    let kind = |k: &str| match (k.len() < 4, rules::is_context_keyword(k)) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => 2,
    };
    let group = |wanted: u8, chunk: usize| -> Vec<Vec<usize>> {
        let members: Vec<usize> = (0..keywords.len())
            .filter(|&i| kind(keywords[i]) == wanted)
            .collect();
        members.chunks(chunk).map(<[usize]>::to_vec).collect()
    };
    let mut short = group(0, PREFILTER_SHORT_CHUNK);
    let mut long = group(1, PREFILTER_LONG_CHUNK);
    long.extend(group(2, PREFILTER_LONG_CHUNK));
    // A last three-byte chunk that is not full joins the smallest of the others when the two fit
    // in one three-byte-sized automaton: one pass over the text fewer, for three-byte
    // fingerprints on a few longer keywords (issue 35: the ten bare Discord prefixes would
    // otherwise have made a fifth pass).
    if let Some(last) = short.last().filter(|g| g.len() < PREFILTER_SHORT_CHUNK)
        && let Some(smallest) = long
            .iter_mut()
            .filter(|g| g.len() + last.len() <= PREFILTER_SHORT_CHUNK)
            .min_by_key(|g| g.len())
    {
        smallest.extend_from_slice(last);
        short.pop();
    }
    short.extend(long);
    short
}

/// A window of `reach` bytes either side of a hit, across lines, widened to whitespace.
fn across_lines(bytes: &[u8], hit: Range<usize>, reach: usize) -> Range<usize> {
    let lo = hit.start.saturating_sub(reach);
    let hi = bytes.len().min(hit.end + reach);
    let mut start = lo;
    if lo > 0 {
        start = bytes[lo..hit.start]
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .map_or(lo, |p| lo + p + 1);
    }
    let mut end = hi;
    if hi < bytes.len() {
        end = bytes[hit.end..hi]
            .iter()
            .rposition(|b| b.is_ascii_whitespace())
            .map_or(hi, |p| hit.end + p);
    }
    start..end
}

/// True if the match is not part of a longer number or dotted quad.
fn at_number_boundary(bytes: &[u8], range: Range<usize>) -> bool {
    let before_ok = range.start == 0 || {
        let b = bytes[range.start - 1];
        !(b.is_ascii_digit()
            || (b == b'.' && range.start >= 2 && bytes[range.start - 2].is_ascii_digit()))
    };
    let after_ok = match bytes.get(range.end) {
        None => true,
        Some(b) if b.is_ascii_digit() => false,
        Some(b'.') => !bytes.get(range.end + 1).is_some_and(u8::is_ascii_digit),
        Some(_) => true,
    };
    before_ok && after_ok
}

/// Replaces the spans (merged where they overlap) at character boundaries.
fn apply(text: &str, mut spans: Vec<(Range<usize>, &'static str)>) -> String {
    spans.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut iter = spans.into_iter().peekable();
    while let Some((range, replacement)) = iter.next() {
        let mut start = range.start.max(last);
        let mut end = range.end;
        while let Some((next, _)) = iter.peek() {
            if next.start < end {
                end = end.max(next.end);
                iter.next();
            } else {
                break;
            }
        }
        if end <= start {
            continue;
        }
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while end < text.len() && !text.is_char_boundary(end) {
            end += 1;
        }
        if start < last {
            start = last;
        }
        out.push_str(&text[last..start]);
        out.push_str(replacement);
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vendor_tests;
