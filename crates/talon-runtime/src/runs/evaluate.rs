//! `evaluate_loop` (seed 000 §9): a generator agent drafts, an evaluator agent judges the draft
//! against the caller's criteria, and the generator revises with the feedback, for at most
//! `max_rounds` rounds (default 3, at most 5). The evaluator's answer decides by its start:
//! "APPROVED" (any case) ends the loop; "REJECTED: feedback" — or anything else, taken whole as
//! feedback — starts another round. The rounds are driven by code, not by a model: each is a
//! pair of sync delegations over the caller's agent links (origin `evaluate`, counted with
//! delegations), whose results come back fenced, and quality gates do not run on them (no
//! recursion).

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::RunStatus;

use super::delegate::start_delegation;
use crate::runner::Runner;

/// Rounds by default, and at most.
const DEFAULT_ROUNDS: u32 = 3;
const MAX_ROUNDS: u32 = 5;

/// Input of [`EvaluateLoop`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateLoopInput {
    /// The agent that writes and revises (its key).
    pub generator: String,
    /// The agent that judges each draft (its key).
    pub evaluator: String,
    /// What to produce, with everything the generator needs.
    pub task: String,
    /// What a draft must meet to pass.
    pub criteria: String,
    /// Rounds at most (default 3, at most 5).
    #[serde(default)]
    pub max_rounds: Option<u32>,
}

/// The evaluator's verdict: approved, or the feedback for the next round.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    Rejected(String),
}

/// Reads an evaluator's answer (see the module docs).
pub fn verdict(answer: &str) -> Verdict {
    let trimmed = answer.trim_start();
    let starts = |word: &str| {
        trimmed
            .get(..word.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(word))
    };
    if starts("APPROVED") {
        return Verdict::Approved;
    }
    let feedback = if starts("REJECTED") {
        trimmed["REJECTED".len()..]
            .trim_start_matches([':', ' ', '-'])
            .trim()
    } else {
        trimmed.trim()
    };
    Verdict::Rejected(feedback.to_string())
}

/// GoClaw's `evaluate_loop`.
pub struct EvaluateLoop {
    pub(super) runner: Runner,
}

impl Tool for EvaluateLoop {
    type Input = EvaluateLoopInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "evaluate_loop",
            "Generate, evaluate, revise: the generator agent drafts the task, the evaluator \
             agent judges the draft against the criteria (APPROVED or REJECTED: feedback), and \
             the generator revises with the feedback, for at most max_rounds rounds (default 3, \
             at most 5). Both must be agents you can delegate to. Returns the last draft and \
             whether it was approved.",
            SideEffect::Spawns,
        )
        .starting_runs()
        .in_group("delegation")
        .with_untrusted_output()
    }

    async fn execute(&self, call: Authorized<EvaluateLoopInput>) -> ToolOutput {
        let input = call.input();
        let ctx = call.ctx();
        let rounds = input
            .max_rounds
            .unwrap_or(DEFAULT_ROUNDS)
            .clamp(1, MAX_ROUNDS);
        if input.task.trim().is_empty() || input.criteria.trim().is_empty() {
            return ToolOutput::own_error(
                "task and criteria must both be given: what to produce, and what it must meet",
            );
        }
        let mut draft = String::new();
        let mut feedback = String::new();
        for round in 1..=rounds {
            let prompt = if round == 1 {
                input.task.clone()
            } else {
                format!(
                    "{}\n\nYour previous draft:\n{draft}\n\nThe reviewer rejected it: {feedback}\n\nRevise the draft to address the feedback. Answer with the revised draft only.",
                    input.task
                )
            };
            draft = match self.round(ctx, &input.generator, &prompt).await {
                Ok(text) => text,
                Err(stop) => return stop,
            };
            let review = format!(
                "Evaluate this draft against the criteria.\n\nCriteria:\n{}\n\nDraft:\n{draft}\n\nAnswer APPROVED if it meets every criterion; otherwise answer REJECTED: followed by what must change.",
                input.criteria
            );
            let answer = match self.round(ctx, &input.evaluator, &review).await {
                Ok(text) => text,
                Err(stop) => return stop,
            };
            match verdict(&answer) {
                Verdict::Approved => {
                    return ToolOutput::text(draft)
                        .with_own_words(format!(
                            "APPROVED by {} in round {round} of {rounds}. The draft:",
                            input.evaluator
                        ))
                        .with_origin(format!("evaluate_loop {}", input.generator));
                }
                Verdict::Rejected(why) => feedback = why,
            }
        }
        ToolOutput::error(format!(
            "The last feedback: {feedback}\nThe last draft:\n{draft}"
        ))
        .with_own_words(format!("Not approved after {rounds} round(s)."))
        .with_origin(format!("evaluate_loop {}", input.generator))
    }
}

impl EvaluateLoop {
    /// One sync delegation of the loop; its answer, or why the loop stops.
    async fn round(
        &self,
        ctx: &talon_core::CallContext,
        agent: &str,
        task: &str,
    ) -> Result<String, ToolOutput> {
        let run = start_delegation(&self.runner, ctx, agent, task, "evaluate", false).await?;
        let ending = self.runner.await_child(run.clone(), &ctx.cancel).await;
        if ending.status == RunStatus::Completed {
            Ok(ending.text)
        } else {
            Err(super::result_output(&run, ending.status, &ending.text))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_is_read_from_the_answers_start() {
        assert_eq!(verdict("APPROVED"), Verdict::Approved);
        assert_eq!(verdict("  approved, nice work"), Verdict::Approved);
        assert_eq!(
            verdict("REJECTED: too long"),
            Verdict::Rejected("too long".into())
        );
        assert_eq!(
            verdict("rejected - add prices"),
            Verdict::Rejected("add prices".into())
        );
        assert_eq!(
            verdict("It needs work."),
            Verdict::Rejected("It needs work.".into())
        );
        assert_eq!(
            verdict("Not APPROVED"),
            Verdict::Rejected("Not APPROVED".into())
        );
    }
}
