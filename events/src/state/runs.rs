//! Runs, rubric invocations and scores: `run.started`, `run.finished`,
//! `rubric.invoked`, `rubric.completed`, `rubric.failed` and
//! `score.recorded`. A run id is used once, for a registered task class, and
//! must cite the class's current rubric; a finished run takes no more
//! invocations or scores. An invocation names an open run and an active case
//! of the run's task class, and is closed once, by completion or by a failure
//! with a known failure code. A score is the poisoned-case defence: its run is
//! open and for its task class, its case is active and in that class, and its
//! case, rubric and cassette digests equal the ones the log holds; the score
//! is in [0, 1], cost and duration are finite and non-negative, every
//! breakdown key is declared by the task class and free of banned substrings,
//! and every failure mode is in the taxonomy with the taxonomy's severity.

use super::{banned_key, body, digest, ident, sensitive_text, severity, text, timestamp, State};
use crate::model::{
    Isolation, RubricCompleted, RubricFailed, RubricInvoked, RunFinished, RunStarted,
    ScoreRecorded, RUBRIC_FAILURE_CODES,
};
use crate::reject::{reject, RejectCode as C, Rejection};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunState {
    pub task_class: String,
    pub isolation: Isolation,
    pub finished: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InvocationState {
    pub run_id: String,
    pub case_id: String,
    pub open: bool,
}

impl State {
    fn open_run(&self, id: &str) -> Result<&RunState, Rejection> {
        let r = self
            .runs
            .get(id)
            .ok_or_else(|| Rejection::new(C::RunUnknown, body("run_id"), "no such run"))?;
        if r.finished {
            return reject(C::RunFinished, body("run_id"), "the run has finished");
        }
        Ok(r)
    }

    fn open_invocation(&self, id: &str) -> Result<&InvocationState, Rejection> {
        match self.invocations.get(id) {
            Some(i) if i.open => Ok(i),
            _ => reject(
                C::InvocationUnknown,
                body("invocation_id"),
                "no open invocation has this id",
            ),
        }
    }

    pub(super) fn check_run_started(&self, e: &RunStarted) -> Result<(), Rejection> {
        ident(&e.run_id, "run_id")?;
        if self.runs.contains_key(&e.run_id) {
            return reject(C::RunExists, body("run_id"), "already used");
        }
        let tc = self.task_class(&e.task_class)?;
        text(&e.harness_version, "harness_version")?;
        digest(&e.rubric_digest, "rubric_digest")?;
        digest(&e.sandbox_image_digest, "sandbox_image_digest")?;
        if e.rubric_digest != tc.rubric_digest {
            return reject(
                C::RubricDigestMismatch,
                body("rubric_digest"),
                "differs from the task class's current rubric",
            );
        }
        Ok(())
    }

    pub(super) fn check_run_finished(&self, e: &RunFinished) -> Result<(), Rejection> {
        self.open_run(&e.run_id).map(|_| ())
    }

    pub(super) fn check_rubric_invoked(&self, e: &RubricInvoked) -> Result<(), Rejection> {
        let run = self.open_run(&e.run_id)?;
        let case = self.active_case(&e.case_id, "case_id")?;
        if case.task_class != run.task_class {
            return reject(
                C::CaseTaskClassMismatch,
                body("case_id"),
                "the case belongs to another task class",
            );
        }
        ident(&e.invocation_id, "invocation_id")?;
        if self.invocations.contains_key(&e.invocation_id) {
            return reject(C::InvocationExists, body("invocation_id"), "already used");
        }
        Ok(())
    }

    pub(super) fn check_rubric_completed(&self, e: &RubricCompleted) -> Result<(), Rejection> {
        self.open_invocation(&e.invocation_id).map(|_| ())
    }

    pub(super) fn check_rubric_failed(&self, e: &RubricFailed) -> Result<(), Rejection> {
        self.open_invocation(&e.invocation_id)?;
        if !RUBRIC_FAILURE_CODES.contains(&e.failure_code.as_str()) {
            return reject(
                C::RubricFailureCodeUnknown,
                body("failure_code"),
                format!("must be one of {}", RUBRIC_FAILURE_CODES.join(", ")),
            );
        }
        Ok(())
    }

    pub(super) fn check_score_recorded(&self, e: &ScoreRecorded) -> Result<(), Rejection> {
        let run = self.open_run(&e.run_id)?;
        if run.task_class != e.task_class {
            return reject(
                C::RunTaskClassMismatch,
                body("task_class"),
                "the run is for another task class",
            );
        }
        let tc = self.task_class(&e.task_class)?;
        let case = self.active_case(&e.case_id, "case_id")?;
        if case.task_class != e.task_class {
            return reject(
                C::CaseTaskClassMismatch,
                body("case_id"),
                "the case belongs to another task class",
            );
        }
        digest(&e.case_digest, "case_digest")?;
        digest(&e.rubric_digest, "rubric_digest")?;
        digest(&e.cassette_digest, "cassette_digest")?;
        digest(&e.image_digest, "image_digest")?;
        if e.case_digest != case.case_digest {
            return reject(
                C::CaseDigestMismatch,
                body("case_digest"),
                "differs from the active case's digest (stale or poisoned case)",
            );
        }
        if e.rubric_digest != tc.rubric_digest {
            return reject(
                C::RubricDigestMismatch,
                body("rubric_digest"),
                "differs from the task class's current rubric",
            );
        }
        if e.cassette_digest != case.cassette_digest {
            return reject(
                C::CassetteDigestMismatch,
                body("cassette_digest"),
                "differs from the case's cassette (a swapped cassette)",
            );
        }
        let s = &e.score;
        if !(s.score.is_finite() && (0.0..=1.0).contains(&s.score)) {
            return reject(
                C::ScoreOutOfRange,
                body("score.score"),
                "must be finite and within [0, 1]",
            );
        }
        if !(s.cost_usd.is_finite() && s.cost_usd >= 0.0) {
            return reject(
                C::CostOutOfRange,
                body("score.cost_usd"),
                "must be finite and at least 0",
            );
        }
        if !(s.duration_seconds.is_finite() && s.duration_seconds >= 0.0) {
            return reject(
                C::DurationOutOfRange,
                body("score.duration_seconds"),
                "must be finite and at least 0",
            );
        }
        for (k, v) in &s.breakdown {
            let field = format!("score.breakdown.{k}");
            banned_key(k, &field)?;
            if !tc.registration.breakdown_keys.iter().any(|d| d == k) {
                return reject(
                    C::BreakdownKeyUndeclared,
                    body(&field),
                    "not declared by the task class",
                );
            }
            if !v.is_finite() {
                return reject(C::BreakdownValueOutOfRange, body(&field), "must be finite");
            }
        }
        for (i, f) in s.failure_modes.iter().enumerate() {
            severity(&f.severity, &format!("score.failure_modes[{i}].severity"))?;
            let Some(t) = tc
                .registration
                .failure_modes
                .iter()
                .find(|t| t.code == f.code)
            else {
                return reject(
                    C::FailureModeUnknown,
                    body(&format!("score.failure_modes[{i}].code")),
                    format!("`{}` is not in the task class's taxonomy", f.code),
                );
            };
            if t.severity != f.severity {
                return reject(
                    C::SeverityMismatch,
                    body(&format!("score.failure_modes[{i}].severity")),
                    format!("the taxonomy says {}", t.severity),
                );
            }
        }
        text(&e.harness_version, "harness_version")?;
        sensitive_text(&e.operator_fingerprint, "operator_fingerprint")?;
        timestamp(&e.started_at, "started_at")?;
        timestamp(&e.finished_at, "finished_at")?;
        Ok(())
    }

    pub(super) fn apply_run_started(&mut self, e: &RunStarted) {
        self.runs.insert(
            e.run_id.clone(),
            RunState {
                task_class: e.task_class.clone(),
                isolation: e.isolation_class,
                finished: false,
            },
        );
    }

    pub(super) fn apply_run_finished(&mut self, e: &RunFinished) {
        if let Some(r) = self.runs.get_mut(&e.run_id) {
            r.finished = true;
        }
    }

    pub(super) fn apply_rubric_invoked(&mut self, e: &RubricInvoked) {
        self.invocations.insert(
            e.invocation_id.clone(),
            InvocationState {
                run_id: e.run_id.clone(),
                case_id: e.case_id.clone(),
                open: true,
            },
        );
    }

    /// `rubric.completed` and `rubric.failed` both close the invocation.
    pub(super) fn apply_rubric_closed(&mut self, invocation_id: &str) {
        if let Some(i) = self.invocations.get_mut(invocation_id) {
            i.open = false;
        }
    }
}
