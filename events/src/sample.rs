//! A sample bench: the task class, case, run and score events that the
//! `ledger demo`, the test world (`testkit::world`) and the load generator
//! build on. Every event is valid under the rules as built; each caller
//! changes only what it is about (a threshold, a title, a poisoned digest).

use std::collections::BTreeMap;

use ed25519_dalek::SigningKey;

use crate::cosign;
use crate::envelope::case_provenance_statement;
use crate::model::*;

/// `blake3:` and the hex BLAKE3 hash of `label`: the digest a sample gives
/// a case, a cassette or anything else it names.
pub fn digest(label: &str) -> String {
    format!("blake3:{}", blake3::hash(label.as_bytes()).to_hex())
}

/// The handle a sample gives `value` named first in the companion field at
/// `path` (`case_name`, `draft.case_name`, `identity_name`,
/// `workflow_name`), with its disclosure: a salt derived from the path and
/// the value, so the same sample value always has the same handle. Real
/// clients salt at random ([`crate::disclose::bind`]).
pub fn binding(path: &str, value: &str) -> crate::disclose::Bound {
    let salt = blake3::hash(format!("evidence-ledger sample salt\n{path}\n{value}").as_bytes());
    crate::disclose::bind_with_salt(salt.as_bytes(), path, value)
}

/// The sample's binding of the value `event` names first (its companion in
/// clear, or, left out, its identifier's value), for
/// [`crate::envelope::sign_write_bound`]: empty for other events.
pub fn bindings_for(event: &Event) -> Vec<crate::disclose::Bound> {
    crate::disclose::handle_field(event)
        .map(|h| {
            let value = h
                .name
                .and_then(|n| n.clear())
                .map_or(h.handle, String::as_str);
            binding(h.name_path, value)
        })
        .into_iter()
        .collect()
}

/// The handle a sample gives case `name` ([`binding`] in `case_name`).
pub fn case_handle(name: &str) -> String {
    binding("case_name", name).handle
}

/// The digest a sample gives the cassette of case `case_id`.
pub fn cassette_digest(case_id: &str) -> String {
    digest(&format!("cassette {case_id}"))
}

/// What every event of one sample bench names: the rubric, the sandbox
/// image and the harness version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub rubric: String,
    pub image: String,
    pub harness_version: String,
}

impl Sample {
    /// A sample naming `rubric` and `image`, run by harness 1.4.2.
    pub fn new(rubric: &str, image: &str) -> Sample {
        Sample {
            rubric: rubric.to_owned(),
            image: image.to_owned(),
            harness_version: "harness 1.4.2".to_owned(),
        }
    }

    /// Task class `name`, starting at bronze, promoted to silver at
    /// `silver` and to gold at `gold` (each: held-out cases, score
    /// threshold). Failure modes `build_broken` (block) and
    /// `lint_regression` (warn); breakdown keys `correctness` and
    /// `minimality`.
    pub fn task_class(
        &self,
        name: &str,
        silver: (u32, f64),
        gold: (u32, f64),
    ) -> TaskClassRegistered {
        let rule = |(min_cases_for_promotion, score_threshold)| TierRule {
            min_cases_for_promotion,
            score_threshold,
        };
        TaskClassRegistered {
            task_class: name.into(),
            tiers: BTreeMap::from([(Tier::Silver, rule(silver)), (Tier::Gold, rule(gold))]),
            failure_modes: vec![
                FailureMode {
                    code: "build_broken".into(),
                    severity: "block".into(),
                    description: "the change does not build".into(),
                },
                FailureMode {
                    code: "lint_regression".into(),
                    severity: "warn".into(),
                    description: "new lint warnings".into(),
                },
            ],
            breakdown_keys: vec!["correctness".into(), "minimality".into()],
            rubric_digest: self.rubric.clone(),
            initial_tier: Tier::Bronze,
        }
    }

    /// Case `case_id` of `task_class` in `curation_class`, added at
    /// `added_at` (RFC 3339) and co-signed by two curators. It holds the
    /// name `case_id` in clear beside its handle [`case_handle`] (committing
    /// it with [`binding`]'s salt gives that handle). Its digest is
    /// [`digest`] of its handle, its cassette's [`cassette_digest`] of it.
    pub fn case_added(
        &self,
        task_class: &str,
        case_id: &str,
        curation_class: &str,
        added_at: &str,
        curators: (&SigningKey, &SigningKey),
    ) -> CaseAdded {
        self.case_added_as(
            task_class,
            &case_handle(case_id),
            case_id,
            curation_class,
            added_at,
            curators,
        )
    }

    /// [`Sample::case_added`] under the handle `handle` (a client's, with
    /// its own salt: [`crate::disclose::bind`]).
    pub fn case_added_as(
        &self,
        task_class: &str,
        handle: &str,
        case_id: &str,
        curation_class: &str,
        added_at: &str,
        (added_by, reviewed_by): (&SigningKey, &SigningKey),
    ) -> CaseAdded {
        // The digests follow from the handle, never from the name: a
        // public digest of a name would let anyone test a guessed name.
        let case_digest = digest(handle);
        let st = case_provenance_statement(handle, added_at, &case_digest);
        CaseAdded {
            task_class: task_class.into(),
            case_id: handle.into(),
            case_name: Some(case_id.into()),
            title: format!("{task_class} case {case_id}").into(),
            disposition: Disposition::Positive.into(),
            difficulty: "medium".into(),
            curation_class: curation_class.into(),
            provenance: Provenance {
                source: CaseSource::Curated,
                source_ref: format!("bench/{task_class}/cases/{case_id}").into(),
                added_at: added_at.into(),
                added_by: cosign(added_by, &st),
                reviewed_by: cosign(reviewed_by, &st),
            },
            case_digest,
            cassette_digest: cassette_digest(handle),
        }
    }

    /// Run `run_id` of `task_class` under `isolation`.
    pub fn run(&self, task_class: &str, run_id: &str, isolation: Isolation) -> RunStarted {
        RunStarted {
            run_id: run_id.into(),
            task_class: task_class.into(),
            harness_version: self.harness_version.clone(),
            rubric_digest: self.rubric.clone(),
            sandbox_image_digest: self.image.clone(),
            isolation_class: isolation,
        }
    }

    /// Score `value` of case `case_id` (named by its handle,
    /// [`case_handle`]) in run `run_id`, passed at 0.5 or more, with
    /// `correctness` equal to the score, started and finished at `at` (RFC
    /// 3339). The case and cassette digests are those
    /// [`Sample::case_added`] gives the case.
    pub fn score(
        &self,
        task_class: &str,
        run_id: &str,
        case_id: &str,
        value: f64,
        at: &str,
    ) -> ScoreRecorded {
        ScoreRecorded {
            run_id: run_id.into(),
            task_class: task_class.into(),
            case_id: case_handle(case_id),
            case_digest: digest(&case_handle(case_id)),
            rubric_digest: self.rubric.clone(),
            cassette_digest: cassette_digest(&case_handle(case_id)),
            harness_version: self.harness_version.clone(),
            image_digest: self.image.clone(),
            score: BenchScore {
                passed: value >= 0.5,
                score: value,
                breakdown: BTreeMap::from([("correctness".to_owned(), value)]),
                failure_modes: vec![],
                cost_usd: 0.04,
                duration_seconds: 31.5,
            },
            started_at: at.into(),
            finished_at: at.into(),
            operator_fingerprint: "SHA256:operator".into(),
        }
    }
}
