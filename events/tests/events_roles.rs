//! Least privilege: every role × every event kind, and the rebuild property.

use events::envelope::format_micros;
use events::model::*;
use events::RejectCode as C;
use proptest::prelude::*;
use testkit::world::*;

/// A well-formed event of `kind` (not necessarily valid in context: the
/// matrix only asks whether the role check lets it through).
fn sample(kind: Kind, w: &World) -> Event {
    let cs = || events::cosign(&key("curator-a"), b"x");
    let cp = CheckpointRef {
        size: 1,
        root: "00".repeat(32),
    };
    match kind {
        Kind::PrincipalEnrolled => Event::PrincipalEnrolled(PrincipalEnrolled {
            sigstore: None,
            public_key: events::envelope::public_key_b64(&key("newcomer").verifying_key()),
            identity: "newcomer".into(),
            identity_name: None,
            roles: vec![Role::Harness],
        }),
        Kind::PrincipalRevoked => Event::PrincipalRevoked(PrincipalRevoked {
            key_id: "0".repeat(64),
            reason: "r".into(),
        }),
        Kind::TaskClassRegistered => Event::TaskClassRegistered(task_class("another-class")),
        Kind::RubricUpdated => Event::RubricUpdated(RubricUpdated {
            task_class: TASK_CLASS.into(),
            rubric_digest: RUBRIC.into(),
        }),
        Kind::CaseAdded => Event::CaseAdded(w.case_added("case-matrix", "held-out")),
        Kind::CaseRetired => Event::CaseRetired(w.retire("case-1")),
        Kind::CaseProposed => Event::CaseProposed(CaseProposed {
            proposal_id: "p".into(),
            task_class: TASK_CLASS.into(),
            draft: CaseDraft {
                case_id: "case-p".into(),
                case_name: None,
                title: "t".into(),
                disposition: Disposition::Ambiguous.into(),
                difficulty: "easy".into(),
                curation_class: "held-out".into(),
                case_digest: case_digest("case-p"),
                cassette_digest: cassette_digest("case-p"),
            },
            production_ref: "INC-1".into(),
        }),
        Kind::ProposalApproved => Event::ProposalApproved(ProposalApproved {
            proposal_id: "p".into(),
            added_at: format_micros(T0),
            added_by: cs(),
            reviewed_by: cs(),
        }),
        Kind::ProposalRejected => Event::ProposalRejected(ProposalRejected {
            proposal_id: "p".into(),
            reason: "r".into(),
        }),
        Kind::RunStarted => Event::RunStarted(run("run-matrix", Isolation::Microvm)),
        Kind::RunFinished => Event::RunFinished(RunFinished {
            run_id: "run-1".into(),
        }),
        Kind::RubricInvoked => Event::RubricInvoked(RubricInvoked {
            run_id: "run-1".into(),
            case_id: events::sample::case_handle("case-1"),
            invocation_id: "inv-1".into(),
        }),
        Kind::RubricCompleted => Event::RubricCompleted(RubricCompleted {
            invocation_id: "inv-1".into(),
        }),
        Kind::RubricFailed => Event::RubricFailed(RubricFailed {
            invocation_id: "inv-1".into(),
            failure_code: "rubric.timeout".into(),
        }),
        Kind::ScoreRecorded => Event::ScoreRecorded(score("case-1", 0.5)),
        Kind::CapabilityMinted => Event::CapabilityMinted(CapabilityMinted {
            capability_id: "cap".into(),
            workflow_id: "wf".into(),
            workflow_name: None,
            validated_at: format_micros(T0),
            minted_at: cp,
            expires_at: format_micros(T0 + 1_000_000_000),
        }),
        Kind::RagExampleWritten => Event::RagExampleWritten(RagExampleWritten {
            capability_id: "cap".into(),
            workflow_id: "wf".into(),
            example_digest: case_digest("e"),
        }),
        Kind::RagRecordQuarantined => Event::RagRecordQuarantined(RagRecordQuarantined {
            capability_id: "cap".into(),
            reason: "r".into(),
        }),
        Kind::PromotionRequested => Event::PromotionRequested(PromotionRequested {
            task_class: TASK_CLASS.into(),
        }),
        Kind::PromotionRecommended => Event::PromotionRecommended(PromotionRecommended {
            task_class: TASK_CLASS.into(),
            current_tier: Tier::Bronze,
            recommended_tier: Tier::Silver,
            evidence: vec![],
            evidence_tree: None,
            settings: None,
            rationale: vec![],
            checkpoint: cp,
            requires_human_approval: true,
            request_id: "req".into(),
        }),
        Kind::TierApply => Event::TierApply(TierApply {
            task_class: TASK_CLASS.into(),
            to: Tier::Gold,
        }),
        Kind::PromotionApplyBlocked => Event::PromotionApplyBlocked(PromotionApplyBlocked {
            task_class: TASK_CLASS.into(),
            requested_tier: Tier::Gold,
            requested_by: "0".repeat(64),
            request_id: "req".into(),
            code: "promotion_must_be_human_authorized".into(),
        }),
        Kind::TierChanged => Event::TierChanged(TierChanged {
            task_class: TASK_CLASS.into(),
            from: Tier::Bronze,
            to: Tier::Silver,
            recommendation_index: 0,
            decided_by: cs(),
            confirmed_by: cs(),
        }),
        Kind::AnchorPublished => Event::AnchorPublished(AnchorPublished {
            checkpoint: cp,
            location: "anchors/2026-11-22.txt".into(),
        }),
        Kind::SigstoreRootTrusted => {
            Event::SigstoreRootTrusted(events::model::SigstoreRootTrusted {
                origin: "example.test/log".into(),
                trusted_root: sigstore_check::synthetic::TRUSTED_ROOT.into(),
            })
        }
        Kind::StateCommitted => Event::StateCommitted(StateCommitted {
            checkpoint: cp,
            state_root: "00".repeat(32),
            task_classes: 0,
        }),
        Kind::FieldRedacted => Event::FieldRedacted(FieldRedacted {
            entry: 0,
            leaf_hash: "00".repeat(32),
            field: "title".into(),
            reason: "pasted a secret".into(),
            requested_by: cs(),
            confirmed_by: cs(),
        }),
    }
}

#[derive(Clone, Copy)]
enum KeyState {
    Enrolled,
    Revoked,
    Unknown,
}

#[test]
fn role_by_event_kind_by_key_state_matrix() {
    let mut w = World::new();
    let mut checked = 0;
    for role in Role::ALL {
        let name = format!("only-{}", role.as_str());
        w.enrol(&name, &[role]).expect("enrol");
        let revoked = format!("revoked-{}", role.as_str());
        w.enrol(&revoked, &[role]).expect("enrol");
        w.post(
            "operator",
            Event::PrincipalRevoked(PrincipalRevoked {
                key_id: events::key_id(&key(&revoked).verifying_key()),
                reason: "matrix".into(),
            }),
        )
        .expect("revoke");
        let unknown = format!("unknown-{}", role.as_str());
        for (signer, state) in [
            (&name, KeyState::Enrolled),
            (&revoked, KeyState::Revoked),
            (&unknown, KeyState::Unknown),
        ] {
            for kind in Kind::ALL {
                let event = sample(kind, &w);
                let before = w.size();
                let result = w.post(signer, event);
                let code = result.as_ref().err().map(|e| match e {
                    ledger::AppendError::Rejected { reason, .. } => reason.code,
                    ledger::AppendError::Ledger(e) => panic!("ledger error {e}"),
                });
                let what = format!(
                    "{} signed by a {} key with role {}",
                    kind.as_str(),
                    match state {
                        KeyState::Enrolled => "enrolled",
                        KeyState::Revoked => "revoked",
                        KeyState::Unknown => "unknown",
                    },
                    role.as_str()
                );
                match state {
                    KeyState::Unknown if kind == Kind::PrincipalEnrolled => {
                        // A key enrolling someone else is simply unknown.
                        assert_eq!(code, Some(C::UnknownSigner), "{what}");
                    }
                    KeyState::Unknown => assert_eq!(code, Some(C::UnknownSigner), "{what}"),
                    KeyState::Revoked => assert_eq!(code, Some(C::SignerRevoked), "{what}"),
                    KeyState::Enrolled if kind == Kind::TierApply => {
                        assert_eq!(code, Some(C::PromotionMustBeHumanAuthorized), "{what}")
                    }
                    KeyState::Enrolled if role.may_append(kind) => {
                        assert_ne!(code, Some(C::RoleNotPermitted), "{what}")
                    }
                    KeyState::Enrolled => assert_eq!(code, Some(C::RoleNotPermitted), "{what}"),
                }
                let grew = w.size() - before;
                let recorded_refusal =
                    matches!(state, KeyState::Enrolled) && kind == Kind::TierApply;
                assert!(
                    grew == 0 || code.is_none() || recorded_refusal,
                    "{what}: refused but appended"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, Role::ALL.len() * Kind::ALL.len() * 3);
}

/// The matrix as docs/EVENTS.md prints it. Regenerate the golden file with
/// `UPDATE_GOLDEN=1 cargo test -p events --test events_roles`.
#[test]
fn documented_role_matrix_matches_the_code() {
    let mut table = String::from("| kind |");
    for r in Role::ALL {
        table.push_str(&format!(" {} |", r.as_str()));
    }
    table.push_str("\n|---|");
    for _ in Role::ALL {
        table.push_str("---|");
    }
    table.push('\n');
    for k in Kind::ALL {
        table.push_str(&format!("| `{}` |", k.as_str()));
        for r in Role::ALL {
            table.push_str(if r.may_append(k) { " ✓ |" } else { "   |" });
        }
        table.push('\n');
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/role_matrix.md");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &table).expect("write golden");
    }
    let golden = std::fs::read_to_string(path)
        .expect("docs/role_matrix.md (regenerate with UPDATE_GOLDEN=1)");
    assert_eq!(
        golden, table,
        "docs/role_matrix.md is stale; regenerate with UPDATE_GOLDEN=1"
    );
}

/// The rejection codes as docs/EVENTS.md lists them (golden file
/// docs/reject_codes.md; regenerate with UPDATE_GOLDEN=1).
#[test]
fn documented_reject_codes_match_the_code() {
    let mut table = String::from("| code | meaning |\n|---|---|\n");
    for c in C::ALL {
        table.push_str(&format!("| `{}` | {} |\n", c.as_str(), c.description()));
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reject_codes.md");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &table).expect("write golden");
    }
    let golden = std::fs::read_to_string(path)
        .expect("docs/reject_codes.md (regenerate with UPDATE_GOLDEN=1)");
    assert_eq!(
        golden, table,
        "docs/reject_codes.md is stale; regenerate with UPDATE_GOLDEN=1"
    );
    let mut seen = std::collections::BTreeSet::new();
    for c in C::ALL {
        assert!(seen.insert(c.as_str()), "duplicate code {}", c.as_str());
    }
}

#[derive(Debug, Clone)]
enum Op {
    AddCase(u8),
    Retire(u8),
    Score(u8, u8),
    Propose(u8),
    Approve(u8),
    Mint(u8, u8),
    Spend(u8, u8),
    Advance(u16),
    StartRun(u8, bool),
    FinishRun(u8),
    ApplyTier,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..6).prop_map(Op::AddCase),
        (0u8..6).prop_map(Op::Retire),
        (0u8..6, 0u8..=10).prop_map(|(c, s)| Op::Score(c, s)),
        (0u8..4).prop_map(Op::Propose),
        (0u8..4).prop_map(Op::Approve),
        (0u8..3, 0u8..2).prop_map(|(c, wf)| Op::Mint(c, wf)),
        (0u8..3, 0u8..2).prop_map(|(c, wf)| Op::Spend(c, wf)),
        (0u16..600).prop_map(Op::Advance),
        (0u8..3, any::<bool>()).prop_map(|(r, s)| Op::StartRun(r, s)),
        (0u8..3).prop_map(Op::FinishRun),
        Just(Op::ApplyTier),
    ]
}

fn perform(w: &mut World, op: &Op) {
    let _ = match op {
        Op::AddCase(i) => {
            let class = if i % 2 == 0 {
                "held-out"
            } else {
                "corpus-derived"
            };
            let c = w.case_added(&format!("pcase-{i}"), class);
            w.post("curator-b", Event::CaseAdded(c))
        }
        Op::Retire(i) => {
            let r = w.retire(&format!("pcase-{i}"));
            w.post("curator-a", Event::CaseRetired(r))
        }
        Op::Score(i, s) => {
            let mut sc = score(&format!("pcase-{i}"), f64::from(*s) / 10.0);
            sc.run_id = "run-1".into();
            w.post("harness", Event::ScoreRecorded(sc))
        }
        Op::Propose(i) => w.post(
            "reconciler",
            Event::CaseProposed(CaseProposed {
                proposal_id: format!("prop-{i}"),
                task_class: TASK_CLASS.into(),
                draft: CaseDraft {
                    case_id: format!("icase-{i}"),
                    case_name: None,
                    title: "from an incident".into(),
                    disposition: Disposition::Negative.into(),
                    difficulty: "hard".into(),
                    curation_class: "held-out".into(),
                    case_digest: case_digest(&format!("icase-{i}")),
                    cassette_digest: cassette_digest(&format!("icase-{i}")),
                },
                production_ref: format!("INC-{i}").into(),
            }),
        ),
        Op::Approve(i) => {
            let id = format!("icase-{i}");
            let added_at = format_micros(T0);
            let st = events::envelope::case_provenance_statement(&id, &added_at, &case_digest(&id));
            w.post(
                "curator-a",
                Event::ProposalApproved(ProposalApproved {
                    proposal_id: format!("prop-{i}"),
                    added_at,
                    added_by: events::cosign(&key("curator-a"), &st),
                    reviewed_by: events::cosign(&key("curator-b"), &st),
                }),
            )
        }
        Op::Mint(c, wf) => {
            let head = w.log.ledger().head();
            w.post(
                "gate",
                Event::CapabilityMinted(CapabilityMinted {
                    capability_id: format!("cap-{c}"),
                    workflow_id: format!("wf-{wf}"),
                    workflow_name: None,
                    validated_at: format_micros(T0),
                    minted_at: CheckpointRef {
                        size: head.size,
                        root: ledger::hash::to_hex(&head.root),
                    },
                    expires_at: format_micros(T0 + 300_000_000),
                }),
            )
        }
        Op::Spend(c, wf) => w.post(
            "rag-writer",
            Event::RagExampleWritten(RagExampleWritten {
                capability_id: format!("cap-{c}"),
                workflow_id: format!("wf-{wf}"),
                example_digest: case_digest("example"),
            }),
        ),
        Op::Advance(s) => {
            w.clock.advance(i64::from(*s) * 1_000_000);
            return;
        }
        Op::StartRun(r, shared) => w.post(
            "harness",
            Event::RunStarted(run(
                &format!("prun-{r}"),
                if *shared {
                    Isolation::SharedKernel
                } else {
                    Isolation::Microvm
                },
            )),
        ),
        Op::FinishRun(r) => w.post(
            "harness",
            Event::RunFinished(RunFinished {
                run_id: format!("prun-{r}"),
            }),
        ),
        Op::ApplyTier => w.post(
            "maintainer-a",
            Event::TierApply(TierApply {
                task_class: TASK_CLASS.into(),
                to: Tier::Silver,
            }),
        ),
    };
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Random event streams (valid and not): the live state equals the state
    /// rebuilt from the log, before and after reopening the data directory.
    #[test]
    fn rebuilding_state_from_the_log_gives_the_same_state(ops in proptest::collection::vec(op(), 1..60)) {
        let mut w = World::new();
        for op in &ops {
            perform(&mut w, op);
        }
        let live = w.log.state();
        let rebuilt = w.log.replay_state().expect("replay");
        prop_assert_eq!(&live, &rebuilt);
        let World { dir, log, clock, .. } = w;
        drop(log);
        let reopened = events::EventLog::open(dir.path(), ledger::Config::default(), key("ledger"), clock).expect("reopen");
        prop_assert_eq!(&reopened.state(), &live);
    }
}

/// The JSON Schemas published in docs/schemas/ (the payload, and each
/// kind's body) are the ones generated from the types the sequencer
/// decodes with (regenerate with UPDATE_GOLDEN=1); and a sample of every
/// kind has exactly the body fields its schema allows and requires.
#[test]
fn published_event_schemas_match_the_types() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/schemas");
    let mut files = vec![("events.json".to_owned(), payload_schema().to_value())];
    for k in Kind::ALL {
        files.push((
            format!("events/{}.json", k.as_str()),
            k.body_schema().to_value(),
        ));
    }
    for (name, schema) in &files {
        let text = serde_json::to_string_pretty(schema).expect("json") + "\n";
        let path = format!("{dir}/{name}");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(format!("{dir}/events")).expect("mkdir");
            std::fs::write(&path, &text).expect("write golden");
        }
        let golden = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{path} (regenerate with UPDATE_GOLDEN=1)"));
        assert_eq!(
            golden, text,
            "{path} is stale; regenerate with UPDATE_GOLDEN=1"
        );
    }
    let w = World::new();
    for k in Kind::ALL {
        let schema = k.body_schema().to_value();
        let allowed: std::collections::BTreeSet<&str> = schema["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let required: std::collections::BTreeSet<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(schema["additionalProperties"], false, "{}", k.as_str());
        let body = serde_json::to_value(sample(k, &w)).expect("json")["body"].clone();
        let given: std::collections::BTreeSet<&str> = body
            .as_object()
            .map(|b| b.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert!(
            given.is_subset(&allowed),
            "{}: {given:?} ⊄ {allowed:?}",
            k.as_str()
        );
        assert!(
            required.is_subset(&given),
            "{}: {required:?} ⊄ {given:?}",
            k.as_str()
        );
    }
}
