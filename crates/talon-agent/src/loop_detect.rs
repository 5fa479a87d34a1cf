//! Loop detection, with GoClaw's thresholds (per run, the last 30 calls):
//! - the same call (tool and arguments) with the same result: warn at 3, stop at 5;
//! - the same tool with the same result for different arguments: warn at 4, stop at 6;
//! - a streak of read-only calls with nothing changed in between: when at most 60 % of the
//!   streak's arguments are distinct the model is stuck (warn at 8, stop at 12), otherwise it is
//!   exploring (warn at 24, stop at 36). A call that changes something ends the streak; calls
//!   that reach outside (commands, the network, people) neither extend nor end it.
//!
//! Each pattern warns once; the loop passes the warning to the model with the tool result.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use serde_json::Value;
use talon_core::SideEffect;

const HISTORY: usize = 30;

/// What a call does, for the read-only streak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// Reads only: extends the streak.
    ReadOnly,
    /// Changes something: ends the streak.
    Mutating,
    /// Reaches outside (commands, network, people): neither.
    Neutral,
}

impl CallKind {
    /// The kind of a tool with `side_effect`.
    pub fn of(side_effect: SideEffect) -> Self {
        match side_effect {
            SideEffect::None | SideEffect::ReadOnly => CallKind::ReadOnly,
            SideEffect::Mutating | SideEffect::Spawns => CallKind::Mutating,
            SideEffect::Network | SideEffect::Blocking => CallKind::Neutral,
        }
    }
}

/// What the detector concluded after a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    /// Tell the model, and go on.
    Warn(String),
    /// End the run.
    Stop(String),
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    tool: u64,
    args: u64,
    result: u64,
}

/// One run's detector.
#[derive(Debug, Default)]
pub struct LoopDetector {
    history: VecDeque<Entry>,
    /// Argument hashes of the current read-only streak.
    streak: Vec<(u64, u64)>,
    warned: HashSet<&'static str>,
}

fn hash(value: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// Arguments in a canonical form: parsed and with object keys sorted, so key order and spacing
/// do not make a repeated call look new.
fn canonical_args(args: &str) -> String {
    fn sort(v: Value) -> Value {
        match v {
            Value::Object(map) => {
                let mut pairs: Vec<(String, Value)> = map.into_iter().collect();
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(pairs.into_iter().map(|(k, v)| (k, sort(v))).collect())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(sort).collect()),
            other => other,
        }
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v) => sort(v).to_string(),
        Err(_) => args.trim().to_string(),
    }
}

impl LoopDetector {
    /// Records one finished call and judges the run.
    pub fn record(&mut self, tool: &str, kind: CallKind, args: &str, result: &str) -> Verdict {
        let entry = Entry {
            tool: hash(tool),
            args: hash(canonical_args(args)),
            result: hash(result),
        };
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(entry);
        match kind {
            CallKind::ReadOnly => self.streak.push((entry.tool, entry.args)),
            CallKind::Mutating => self.streak.clear(),
            CallKind::Neutral => {}
        }

        let same_call = self
            .history
            .iter()
            .filter(|e| e.tool == entry.tool && e.args == entry.args && e.result == entry.result)
            .count();
        let same_result = self
            .history
            .iter()
            .filter(|e| e.tool == entry.tool && e.result == entry.result && e.args != entry.args)
            .count()
            + 1;
        let checks = [
            self.judge("same_call", same_call, 3, 5, || {
                format!("`{tool}` was called {same_call} times with the same arguments and gave the same result each time")
            }),
            self.judge("same_result", same_result, 4, 6, || {
                format!("`{tool}` returned the same result for {same_result} different arguments")
            }),
            self.streak_verdict(),
        ];
        checks
            .iter()
            .find(|v| matches!(v, Verdict::Stop(_)))
            .or_else(|| checks.iter().find(|v| matches!(v, Verdict::Warn(_))))
            .cloned()
            .unwrap_or(Verdict::Fine)
    }

    fn judge(
        &mut self,
        pattern: &'static str,
        count: usize,
        warn: usize,
        stop: usize,
        what: impl Fn() -> String,
    ) -> Verdict {
        if count >= stop {
            Verdict::Stop(format!("Loop detected: {}. The run was stopped.", what()))
        } else if count >= warn && self.warned.insert(pattern) {
            Verdict::Warn(format!(
                "Loop warning: {}. Repeating it will not give a different answer; change approach, or answer with what you have. The run stops if this continues.",
                what()
            ))
        } else {
            Verdict::Fine
        }
    }

    fn streak_verdict(&mut self) -> Verdict {
        let len = self.streak.len();
        if len == 0 {
            return Verdict::Fine;
        }
        let distinct = self.streak.iter().collect::<HashSet<_>>().len();
        let stuck = distinct as f64 / len as f64 <= 0.6;
        let (pattern, warn, stop, mode) = if stuck {
            ("streak_stuck", 8, 12, "repeating the same reads")
        } else {
            ("streak_exploring", 24, 36, "exploring")
        };
        self.judge(pattern, len, warn, stop, || {
            format!("{len} read-only calls in a row without changing anything ({mode})")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_call_and_result_warns_at_three_and_stops_at_five() {
        let mut d = LoopDetector::default();
        let verdicts: Vec<Verdict> = (0..5)
            .map(|_| {
                d.record(
                    "web_fetch",
                    CallKind::Neutral,
                    r#"{"url":"a","n":1}"#,
                    "same",
                )
            })
            .collect();
        assert_eq!(verdicts[..2], [Verdict::Fine, Verdict::Fine]);
        assert!(matches!(verdicts[2], Verdict::Warn(_)));
        assert_eq!(verdicts[3], Verdict::Fine, "warns once");
        assert!(matches!(verdicts[4], Verdict::Stop(_)));
    }

    #[test]
    fn key_order_does_not_disguise_a_repeat() {
        let mut d = LoopDetector::default();
        d.record("x", CallKind::Neutral, r#"{"a":1,"b":2}"#, "r");
        d.record("x", CallKind::Neutral, r#"{ "b": 2, "a": 1 }"#, "r");
        assert!(matches!(
            d.record("x", CallKind::Neutral, r#"{"b":2,"a":1}"#, "r"),
            Verdict::Warn(_)
        ));
    }

    #[test]
    fn same_result_for_different_arguments_stops_at_six() {
        let mut d = LoopDetector::default();
        let verdicts: Vec<Verdict> = (0..6)
            .map(|i| {
                d.record(
                    "search",
                    CallKind::Neutral,
                    &format!(r#"{{"q":{i}}}"#),
                    "nothing found",
                )
            })
            .collect();
        assert!(matches!(verdicts[3], Verdict::Warn(_)));
        assert!(matches!(verdicts[5], Verdict::Stop(_)));
    }

    #[test]
    fn a_stuck_read_streak_stops_at_twelve_and_a_write_resets_it() {
        let mut d = LoopDetector::default();
        // Two files read in turn: 2 distinct of n, stuck; results differ so only the streak counts.
        let mut last = Verdict::Fine;
        for i in 0..11 {
            last = d.record(
                "read_file",
                CallKind::ReadOnly,
                &format!(r#"{{"p":{}}}"#, i % 2),
                &format!("v{i}"),
            );
            assert!(!matches!(last, Verdict::Stop(_)), "not before 12 ({i})");
        }
        assert_eq!(last, Verdict::Fine, "warned once already, at 8");
        d.record("write_file", CallKind::Mutating, "{}", "ok");
        for i in 0..11 {
            assert!(!matches!(
                d.record(
                    "read_file",
                    CallKind::ReadOnly,
                    &format!(r#"{{"p":{}}}"#, i % 2),
                    &format!("w{i}")
                ),
                Verdict::Stop(_)
            ));
        }
        assert!(matches!(
            d.record("read_file", CallKind::ReadOnly, r#"{"p":1}"#, "w11"),
            Verdict::Stop(_)
        ));
    }

    #[test]
    fn exploration_is_allowed_much_longer() {
        let mut d = LoopDetector::default();
        for i in 0..35 {
            assert!(!matches!(
                d.record(
                    "read_file",
                    CallKind::ReadOnly,
                    &format!(r#"{{"p":{i}}}"#),
                    &format!("v{i}")
                ),
                Verdict::Stop(_)
            ));
        }
        assert!(matches!(
            d.record("read_file", CallKind::ReadOnly, r#"{"p":99}"#, "v99"),
            Verdict::Stop(_)
        ));
    }
}
