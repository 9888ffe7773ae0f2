//! Validation at the door. Each test names one attack, expects one typed
//! rejection that names the field, and checks that nothing was appended.

use events::envelope::{case_provenance_statement, format_micros};
use events::model::*;
use events::{cosign, RejectCode as C};
use testkit::world::*;

/// Runs `attack` on a fresh world and checks it is refused with `code` on
/// `field`, and the log did not grow.
fn refused(code: C, field: &str, attack: impl FnOnce(&mut World) -> Posted) {
    let mut w = World::new();
    let rej = expect_code(attack(&mut w), code);
    assert_eq!(rej.field, field, "{rej}");
    assert_eq!(w.size(), w.size_before_last, "a refused event was appended");
}

fn with_score(f: impl FnOnce(&mut ScoreRecorded)) -> impl FnOnce(&mut World) -> Posted {
    move |w| {
        let mut s = score("case-1", 0.8);
        f(&mut s);
        w.post("harness", Event::ScoreRecorded(s))
    }
}

#[test]
fn valid_score_is_accepted() {
    let mut w = World::new();
    let before = w.size();
    let r = w
        .post("harness", Event::ScoreRecorded(score("case-1", 0.8)))
        .expect("valid score");
    assert_eq!(r.appended.index, before);
    assert_eq!(w.size(), before + 1);
}

#[test]
fn banned_breakdown_key_confidence_is_refused() {
    refused(
        C::BreakdownKeyBanned,
        "event.body.score.breakdown.model_confidence",
        with_score(|s| {
            s.score.breakdown.insert("model_confidence".into(), 0.99);
        }),
    );
}

#[test]
fn banned_breakdown_key_is_case_insensitive() {
    refused(
        C::BreakdownKeyBanned,
        "event.body.score.breakdown.LLM_judge",
        with_score(|s| {
            s.score.breakdown.insert("LLM_judge".into(), 1.0);
        }),
    );
}

#[test]
fn undeclared_breakdown_key_is_refused() {
    refused(
        C::BreakdownKeyUndeclared,
        "event.body.score.breakdown.speed",
        with_score(|s| {
            s.score.breakdown.insert("speed".into(), 0.5);
        }),
    );
}

#[test]
fn unknown_failure_mode_is_refused() {
    refused(
        C::FailureModeUnknown,
        "event.body.score.failure_modes[0].code",
        with_score(|s| {
            s.score.failure_modes.push(ScoreFailureMode {
                code: "made_up".into(),
                severity: "warn".into(),
            });
        }),
    );
}

#[test]
fn bad_severity_is_refused() {
    refused(
        C::SeverityInvalid,
        "event.body.score.failure_modes[0].severity",
        with_score(|s| {
            s.score.failure_modes.push(ScoreFailureMode {
                code: "build_broken".into(),
                severity: "critical".into(),
            });
        }),
    );
}

#[test]
fn downgraded_severity_is_refused() {
    refused(
        C::SeverityMismatch,
        "event.body.score.failure_modes[0].severity",
        with_score(|s| {
            s.score.failure_modes.push(ScoreFailureMode {
                code: "build_broken".into(),
                severity: "info".into(),
            });
        }),
    );
}

#[test]
fn stale_case_digest_of_a_poisoned_case_is_refused() {
    refused(
        C::CaseDigestMismatch,
        "event.body.case_digest",
        with_score(|s| {
            s.case_digest = case_digest("case-1 with softened expectations");
        }),
    );
}

#[test]
fn swapped_rubric_digest_is_refused() {
    refused(
        C::RubricDigestMismatch,
        "event.body.rubric_digest",
        with_score(|s| {
            s.rubric_digest =
                "blake3:9999999999999999999999999999999999999999999999999999999999999999".into();
        }),
    );
}

#[test]
fn swapped_cassette_is_refused() {
    refused(
        C::CassetteDigestMismatch,
        "event.body.cassette_digest",
        with_score(|s| {
            s.cassette_digest = case_digest("a cassette that answers every case correctly");
        }),
    );
}

#[test]
fn score_above_one_is_refused() {
    refused(
        C::ScoreOutOfRange,
        "event.body.score.score",
        with_score(|s| s.score.score = 1.01),
    );
}

#[test]
fn negative_cost_is_refused() {
    refused(
        C::CostOutOfRange,
        "event.body.score.cost_usd",
        with_score(|s| s.score.cost_usd = -0.01),
    );
}

#[test]
fn negative_duration_is_refused() {
    refused(
        C::DurationOutOfRange,
        "event.body.score.duration_seconds",
        with_score(|s| s.score.duration_seconds = -1.0),
    );
}

/// Replaces the canonical text of `from` with `to` inside a valid score's
/// payload and signs the result, as an attacker writing JSON by hand would.
fn hand_written(w: &mut World, from: &str, to: &str) -> Posted {
    let p = w.payload("harness", Event::ScoreRecorded(score("case-1", 0.8)));
    let text = String::from_utf8(events::envelope::payload_bytes(&p)).expect("utf8");
    assert!(text.contains(from), "{text}");
    let env = sign_raw("harness", text.replacen(from, to, 1).as_bytes());
    w.append(&env)
}

#[test]
fn nan_score_is_refused() {
    refused(C::MalformedJson, "", |w| {
        hand_written(w, "\"score\":0.8", "\"score\":NaN")
    });
}

#[test]
fn infinite_score_is_refused() {
    refused(C::MalformedJson, "", |w| {
        hand_written(w, "\"score\":0.8", "\"score\":1e400")
    });
}

#[test]
fn smuggled_unknown_field_confidence_is_refused() {
    refused(C::UnknownField, "event.body.score.confidence", |w| {
        hand_written(w, "\"breakdown\":", "\"confidence\":0.99,\"breakdown\":")
    });
}

#[test]
fn duplicate_key_is_refused() {
    refused(C::DuplicateKey, "score", |w| {
        hand_written(w, "\"score\":0.8", "\"score\":0.8,\"score\":1.0")
    });
}

#[test]
fn integer_that_loses_precision_is_refused() {
    refused(C::IntegerPrecision, "", |w| {
        hand_written(w, "\"schema\":3", "\"schema\":9007199254740993")
    });
}

#[test]
fn non_canonical_payload_is_refused() {
    refused(C::NonCanonicalPayload, "payload", |w| {
        hand_written(w, "\"schema\":3", "\"schema\": 3")
    });
}

#[test]
fn signature_over_a_different_payload_is_refused() {
    refused(C::SignatureInvalid, "signatures[0].sig", |w| {
        let good = w.bare_envelope("harness", Event::ScoreRecorded(score("case-1", 0.2)));
        let other = w.bare_envelope("harness", Event::ScoreRecorded(score("case-1", 0.99)));
        let mut g: serde_json::Value = serde_json::from_slice(&good).expect("json");
        let o: serde_json::Value = serde_json::from_slice(&other).expect("json");
        g["payload"] = o["payload"].clone();
        w.append(&serde_json::to_vec(&g).expect("json"))
    });
}

#[test]
fn unenrolled_signer_is_refused() {
    refused(C::UnknownSigner, "signer", |w| {
        w.post("intruder", Event::ScoreRecorded(score("case-1", 1.0)))
    });
}

fn case_with(w: &World, id: &str, f: impl FnOnce(&mut CaseAdded)) -> Event {
    let mut c = w.case_added(id, "held-out");
    f(&mut c);
    Event::CaseAdded(c)
}

#[test]
fn case_with_one_signature_is_refused() {
    refused(C::MissingField, "event.body.provenance.reviewed_by", |w| {
        let p = w.payload("curator-a", case_with(w, "case-9", |_| {}));
        let text = String::from_utf8(events::envelope::payload_bytes(&p)).expect("utf8");
        let start = text.find(",\"reviewed_by\":").expect("reviewed_by");
        let end = start + text[start..].find('}').expect("end") + 1;
        let env = sign_raw(
            "curator-a",
            format!("{}{}", &text[..start], &text[end..]).as_bytes(),
        );
        w.append(&env)
    });
}

#[test]
fn case_signed_by_the_same_curator_twice_is_refused() {
    refused(
        C::CosignersNotDistinct,
        "event.body.provenance.reviewed_by",
        |w| {
            let e = case_with(w, "case-9", |c| {
                c.provenance.reviewed_by = c.provenance.added_by.clone()
            });
            w.post("curator-a", e)
        },
    );
}

#[test]
fn case_with_a_forged_curator_signature_is_refused() {
    refused(
        C::CosignatureInvalid,
        "event.body.provenance.reviewed_by.signature",
        |w| {
            let e = case_with(w, "case-9", |c| {
                // curator-b's key id, but signed by someone else's key.
                let st =
                    case_provenance_statement("case-9", &c.provenance.added_at, &c.case_digest);
                let forged = cosign(&key("mallory"), &st);
                c.provenance.reviewed_by.signature = forged.signature;
            });
            w.post("curator-a", e)
        },
    );
}

#[test]
fn case_signed_by_an_unenrolled_curator_is_refused() {
    refused(
        C::CosignerUnknown,
        "event.body.provenance.reviewed_by.key_id",
        |w| {
            let e = case_with(w, "case-9", |c| {
                let st =
                    case_provenance_statement("case-9", &c.provenance.added_at, &c.case_digest);
                c.provenance.reviewed_by = cosign(&key("not-a-curator"), &st);
            });
            w.post("curator-a", e)
        },
    );
}

#[test]
fn case_cosigned_by_a_non_curator_is_refused() {
    refused(
        C::CosignerNotPermitted,
        "event.body.provenance.reviewed_by.key_id",
        |w| {
            let e = case_with(w, "case-9", |c| {
                let st =
                    case_provenance_statement("case-9", &c.provenance.added_at, &c.case_digest);
                c.provenance.reviewed_by = cosign(&key("harness"), &st);
            });
            w.post("curator-a", e)
        },
    );
}

#[test]
fn reconciler_adding_an_active_case_is_refused() {
    refused(C::RoleNotPermitted, "event.kind", |w| {
        let e = case_with(w, "case-9", |_| {});
        w.post("reconciler", e)
    });
}

fn proposal(id: &str, case_id: &str) -> Event {
    Event::CaseProposed(CaseProposed {
        proposal_id: id.into(),
        task_class: TASK_CLASS.into(),
        draft: CaseDraft {
            case_id: case_id.into(),
            case_name: None,
            title: "incident-derived case".into(),
            disposition: Disposition::Negative.into(),
            difficulty: "hard".into(),
            curation_class: "held-out".into(),
            case_digest: case_digest(case_id),
            cassette_digest: cassette_digest(case_id),
        },
        production_ref: "incident/2026-11-03/INC-4411".into(),
    })
}

#[test]
fn pending_proposal_is_never_scored() {
    refused(C::CasePending, "event.body.case_id", |w| {
        w.post("reconciler", proposal("prop-1", "case-incident-1"))
            .expect("proposal");
        let mut s = score("case-incident-1", 0.9);
        s.case_id = draft_handle("case-incident-1");
        w.post("harness", Event::ScoreRecorded(s))
    });
}

#[test]
fn approved_proposal_becomes_an_active_case() {
    let mut w = World::new();
    w.post("reconciler", proposal("prop-1", "case-incident-1"))
        .expect("proposal");
    let added_at = format_micros(T0);
    let st = case_provenance_statement(
        &draft_handle("case-incident-1"),
        &added_at,
        &case_digest("case-incident-1"),
    );
    w.post(
        "curator-b",
        Event::ProposalApproved(ProposalApproved {
            proposal_id: "prop-1".into(),
            added_at,
            added_by: cosign(&key("curator-a"), &st),
            reviewed_by: cosign(&key("curator-b"), &st),
        }),
    )
    .expect("approval");
    let mut s = score("case-incident-1", 0.9);
    s.case_id = draft_handle("case-incident-1");
    w.post("harness", Event::ScoreRecorded(s))
        .expect("score now accepted");
}

#[test]
fn retired_case_is_not_scored() {
    refused(C::CaseNotActive, "event.body.case_id", |w| {
        let r = w.retire("case-2");
        w.post("curator-a", Event::CaseRetired(r)).expect("retire");
        w.post("harness", Event::ScoreRecorded(score("case-2", 0.9)))
    });
}

fn mint(w: &mut World, id: &str, workflow: &str, ttl_micros: i64) -> Posted {
    let head = w.log.ledger().head();
    w.post(
        "gate",
        Event::CapabilityMinted(CapabilityMinted {
            capability_id: id.into(),
            workflow_id: workflow.into(),
            workflow_name: None,
            validated_at: format_micros(T0),
            minted_at: CheckpointRef {
                size: head.size,
                root: ledger::hash::to_hex(&head.root),
            },
            expires_at: format_micros(T0 + ttl_micros),
        }),
    )
}

fn write_example(w: &mut World, cap: &str, workflow: &str) -> Posted {
    w.post(
        "rag-writer",
        Event::RagExampleWritten(RagExampleWritten {
            capability_id: cap.into(),
            workflow_id: handle("workflow_name", workflow),
            example_digest: case_digest("solved example"),
        }),
    )
}

#[test]
fn capability_spent_once_is_accepted() {
    let mut w = World::new();
    mint(&mut w, "cap-1", "wf-1", 3_600_000_000).expect("mint");
    write_example(&mut w, "cap-1", "wf-1").expect("spend");
}

#[test]
fn replayed_capability_is_refused() {
    refused(C::CapabilitySpent, "event.body.capability_id", |w| {
        mint(w, "cap-1", "wf-1", 3_600_000_000).expect("mint");
        write_example(w, "cap-1", "wf-1").expect("first spend");
        write_example(w, "cap-1", "wf-1")
    });
}

#[test]
fn expired_capability_is_refused() {
    refused(C::CapabilityExpired, "event.body.capability_id", |w| {
        mint(w, "cap-1", "wf-1", 60_000_000).expect("mint");
        w.clock.advance(61_000_000);
        write_example(w, "cap-1", "wf-1")
    });
}

#[test]
fn capability_spent_by_the_wrong_workflow_is_refused() {
    refused(
        C::CapabilityWorkflowMismatch,
        "event.body.workflow_id",
        |w| {
            mint(w, "cap-1", "wf-1", 3_600_000_000).expect("mint");
            write_example(w, "cap-1", "wf-2")
        },
    );
}

#[test]
fn capability_minted_at_a_fake_checkpoint_is_refused() {
    refused(C::CheckpointUnknown, "event.body.minted_at", |w| {
        w.post(
            "gate",
            Event::CapabilityMinted(CapabilityMinted {
                capability_id: "cap-x".into(),
                workflow_id: "wf-1".into(),
                workflow_name: None,
                validated_at: format_micros(T0),
                minted_at: CheckpointRef {
                    size: 3,
                    root: "00".repeat(32),
                },
                expires_at: format_micros(T0 + 3_600_000_000),
            }),
        )
    });
}

#[test]
fn capability_minted_by_a_non_gate_is_refused() {
    refused(C::RoleNotPermitted, "event.kind", |w| {
        w.post(
            "rag-writer",
            Event::CapabilityMinted(CapabilityMinted {
                capability_id: "cap-self".into(),
                workflow_id: "wf-1".into(),
                workflow_name: None,
                validated_at: format_micros(T0),
                minted_at: CheckpointRef {
                    size: 1,
                    root: "00".repeat(32),
                },
                expires_at: format_micros(T0 + 3_600_000_000),
            }),
        )
    });
}

#[test]
fn revoked_key_writes_nothing() {
    refused(C::SignerRevoked, "signer", |w| {
        w.post(
            "operator",
            Event::PrincipalRevoked(PrincipalRevoked {
                key_id: events::key_id(&key("harness").verifying_key()),
                reason: "laptop stolen".into(),
            }),
        )
        .expect("revoke");
        w.post("harness", Event::ScoreRecorded(score("case-1", 0.9)))
    });
}

#[test]
fn duplicate_envelope_is_idempotent() {
    let mut w = World::new();
    let env = w.envelope("harness", Event::ScoreRecorded(score("case-1", 0.8)));
    let first = w.append(&env).expect("first");
    let size = w.size();
    let again = w.append(&env).expect("re-post");
    assert!(again.existing && !first.existing);
    assert_eq!(again.appended.index, first.appended.index);
    assert_eq!(again.appended.leaf_hash, first.appended.leaf_hash);
    assert_eq!(w.size(), size, "a re-posted envelope was appended twice");
}

#[test]
fn different_envelope_reusing_an_id_is_refused() {
    refused(C::EnvelopeIdReused, "id", |w| {
        let mut p = w.payload("harness", Event::ScoreRecorded(score("case-1", 0.8)));
        w.append(&events::sign_envelope(&key("harness"), &p))
            .expect("first");
        p.event = Event::ScoreRecorded(score("case-1", 0.95));
        w.commit(&mut p);
        w.append(&events::sign_envelope(&key("harness"), &p))
    });
}

#[test]
fn tier_apply_attempt_is_blocked_recorded_and_changes_nothing() {
    let mut w = World::new();
    let before = w.size();
    let r = w.post(
        "promotion-gate",
        Event::TierApply(TierApply {
            task_class: TASK_CLASS.into(),
            to: Tier::Gold,
        }),
    );
    let (rej, recorded) = rejection(r);
    assert_eq!(rej.code, C::PromotionMustBeHumanAuthorized);
    assert!(recorded, "the refusal must be recorded");
    assert_eq!(
        w.size(),
        before + 1,
        "exactly one promotion.apply_blocked entry"
    );
    let entry = w.log.ledger().entry(before).expect("entry");
    let (d, _) = events::decode_leaf(&entry.leaf).expect("decode");
    match d.payload.event {
        Event::PromotionApplyBlocked(b) => {
            assert_eq!(b.task_class, TASK_CLASS);
            assert_eq!(b.requested_tier, Tier::Gold);
            assert_eq!(b.code, "promotion_must_be_human_authorized");
        }
        other => panic!("expected promotion.apply_blocked, got {other:?}"),
    }
    assert_eq!(w.log.state().task_classes[TASK_CLASS].tier, Tier::Bronze);
    assert_eq!(
        w.log.replay_state().expect("replay").task_classes[TASK_CLASS].tier,
        Tier::Bronze
    );
}

#[test]
fn tier_change_without_a_recommendation_is_refused() {
    refused(
        C::RecommendationUnknown,
        "event.body.recommendation_index",
        |w| {
            let st = events::envelope::tier_change_statement(TASK_CLASS, "bronze", "silver", 3);
            w.post(
                "maintainer-a",
                Event::TierChanged(TierChanged {
                    task_class: TASK_CLASS.into(),
                    from: Tier::Bronze,
                    to: Tier::Silver,
                    recommendation_index: 3,
                    decided_by: cosign(&key("maintainer-a"), &st),
                    confirmed_by: cosign(&key("maintainer-b"), &st),
                }),
            )
        },
    );
}

/// A recommendation at the head, citing its evidence as `refs` and `tree`.
fn recommendation(
    w: &World,
    refs: Vec<EvidenceRef>,
    tree: Option<EvidenceTree>,
) -> PromotionRecommended {
    let head = w.log.ledger().head();
    PromotionRecommended {
        task_class: TASK_CLASS.into(),
        current_tier: Tier::Bronze,
        recommended_tier: Tier::Silver,
        evidence: refs,
        evidence_tree: tree,
        settings: None,
        rationale: vec![],
        checkpoint: CheckpointRef {
            size: head.size,
            root: ledger::hash::to_hex(&head.root),
        },
        requires_human_approval: true,
        request_id: "env-00000001".into(),
    }
}

/// `r` as the ledger's key would sign it, with `from` in its payload
/// replaced by `to` before signing.
fn hand_written_recommendation(
    w: &mut World,
    r: PromotionRecommended,
    from: &str,
    to: &str,
) -> Posted {
    let p = w.payload("ledger", Event::PromotionRecommended(r));
    let text = String::from_utf8(events::envelope::payload_bytes(&p)).expect("utf8");
    assert!(text.contains(from), "{text}");
    w.append(&sign_raw("ledger", text.replacen(from, to, 1).as_bytes()))
}

/// [`recommendation`], signed by the ledger's key.
fn ledger_recommendation(
    w: &mut World,
    refs: Vec<EvidenceRef>,
    tree: Option<EvidenceTree>,
) -> Posted {
    let r = recommendation(w, refs, tree);
    w.post("ledger", Event::PromotionRecommended(r))
}

/// A recommendation cites its evidence either by list or by tree, never
/// both: a tree beside a list, or
/// a tree whose root is not a digest, is refused and nothing is appended.
#[test]
fn a_recommendation_citing_its_evidence_both_ways_or_by_a_malformed_tree_is_refused() {
    let refs = vec![EvidenceRef {
        index: 1,
        leaf_hash: "ab".repeat(32),
    }];
    let mut w = World::new();
    ledger_recommendation(&mut w, refs.clone(), None).expect("by list");
    ledger_recommendation(&mut w, vec![], Some(EvidenceTree::of(&refs))).expect("by tree");
    refused(C::InvalidValue, "event.body.evidence", |w| {
        ledger_recommendation(w, refs.clone(), Some(EvidenceTree::of(&refs)))
    });
    refused(C::InvalidDigest, "event.body.evidence_tree.root", |w| {
        let mut tree = EvidenceTree::of(&refs);
        tree.root = tree.root.to_uppercase();
        ledger_recommendation(w, vec![], Some(tree))
    });
}

/// The settings a recommendation states must be settings a projection can
/// be computed with: a window of at least a second, a confidence strictly
/// between 0 and 1, and from 1 to `MAX_RESAMPLES` resamples.
#[test]
fn a_recommendation_stating_settings_no_projection_uses_is_refused() {
    let stated = |window_seconds, confidence, resamples| {
        move |w: &mut World| {
            let r = PromotionRecommended {
                settings: Some(ViewSettings {
                    window_seconds,
                    confidence,
                    resamples,
                }),
                ..recommendation(w, vec![], Some(EvidenceTree::of(&[])))
            };
            w.post("ledger", Event::PromotionRecommended(r))
        }
    };
    let mut w = World::new();
    stated(30 * 24 * 3600, 0.95, 2000)(&mut w).expect("the server's defaults");
    stated(1, 0.5, MAX_RESAMPLES)(&mut w).expect("the bounds");
    let field = "event.body.settings.";
    refused(
        C::InvalidValue,
        &format!("{field}window_seconds"),
        stated(0, 0.95, 2000),
    );
    refused(
        C::InvalidValue,
        &format!("{field}confidence"),
        stated(3600, 1.0, 2000),
    );
    refused(
        C::InvalidValue,
        &format!("{field}confidence"),
        stated(3600, 0.0, 2000),
    );
    refused(
        C::InvalidValue,
        &format!("{field}resamples"),
        stated(3600, 0.95, 0),
    );
    refused(
        C::InvalidValue,
        &format!("{field}resamples"),
        stated(3600, 0.95, MAX_RESAMPLES + 1),
    );
}

/// An integer out of its type's range is `invalid_value` (another type is
/// `invalid_type`): the Python package's rules say the same.
#[test]
fn an_evidence_count_below_zero_is_an_invalid_value() {
    refused(C::InvalidValue, "event.body.evidence_tree.count", |w| {
        let r = recommendation(w, vec![], Some(EvidenceTree::of(&[])));
        hand_written_recommendation(w, r, "\"count\":0", "\"count\":-1")
    });
}

/// `evidence_tree` is absent or a tree, never `null`: one event, one byte
/// sequence.
#[test]
fn a_recommendation_with_a_null_evidence_tree_is_refused() {
    refused(C::InvalidType, "event.body.evidence_tree", |w| {
        let r = recommendation(w, vec![], None);
        let (from, to) = (
            "\"evidence\":[],",
            "\"evidence\":[],\"evidence_tree\":null,",
        );
        hand_written_recommendation(w, r, from, to)
    });
}

#[test]
fn self_issued_recommendation_from_a_client_is_refused() {
    refused(C::RoleNotPermitted, "event.kind", |w| {
        let r = PromotionRecommended {
            recommended_tier: Tier::Gold,
            ..recommendation(w, vec![], None)
        };
        w.post("promotion-gate", Event::PromotionRecommended(r))
    });
}

#[test]
fn second_self_enrolment_is_refused() {
    refused(C::UnknownSigner, "signer", |w| {
        let p = events::model::PrincipalEnrolled {
            sigstore: None,
            public_key: events::envelope::public_key_b64(&key("usurper").verifying_key()),
            identity: "usurper".into(),
            identity_name: None,
            roles: vec![Role::Operator],
        };
        w.post("usurper", Event::PrincipalEnrolled(p))
    });
}

#[test]
fn empty_log_accepts_only_the_operator_genesis() {
    let w = World::genesis();
    assert_eq!(w.size(), 2);
    let fresh = {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = open_log(dir.path());
        (dir, log)
    };
    let env = testkit::world::sign_raw(
        "harness",
        &events::envelope::payload_bytes(&events::Payload {
            schema: SCHEMA_COMMITTED,
            id: "first-event".into(),
            signer: events::key_id(&key("harness").verifying_key()),
            issued_at: format_micros(T0),
            event: Event::PrincipalEnrolled(events::model::PrincipalEnrolled {
                sigstore: None,
                public_key: events::envelope::public_key_b64(&key("harness").verifying_key()),
                identity: "harness".into(),
                identity_name: None,
                roles: vec![Role::Harness],
            }),
        }),
    );
    expect_code(fresh.1.append(&env), C::GenesisRequired);
    assert_eq!(fresh.1.ledger().head().size, 0);
    fresh.0.close().expect("cleanup");
}

#[test]
fn unknown_event_kind_is_refused() {
    refused(C::UnknownEventKind, "event.kind", |w| {
        hand_written(
            w,
            "\"kind\":\"score.recorded\"",
            "\"kind\":\"score.rewritten\"",
        )
    });
}

#[test]
fn wrong_payload_type_is_refused() {
    refused(C::UnsupportedPayloadType, "payloadType", |w| {
        let env = w.bare_envelope("harness", Event::ScoreRecorded(score("case-1", 0.8)));
        let mut v: serde_json::Value = serde_json::from_slice(&env).expect("json");
        v["payloadType"] = "application/json".into();
        w.append(&serde_json::to_vec(&v).expect("json"))
    });
}

/// The committer skips re-verifying a co-signature only when the submitting
/// thread verified that exact signature, over that exact statement, with the
/// key enrolled for the co-signer. A mark made with any other key (here the
/// forger's own, which the forged signature does verify under) changes
/// nothing: the committer checks the enrolled key and refuses.
#[test]
fn a_preverified_mark_under_another_key_does_not_pass_a_forged_cosignature() {
    use events::envelope::{decode_envelope, Preverified};
    use events::state::Checkpoints;
    struct NoCheckpoints;
    impl Checkpoints for NoCheckpoints {
        fn root_at(&self, _: u64) -> Option<ledger::Hash> {
            None
        }
    }
    let mut w = World::new();
    let mut statement = Vec::new();
    let mut forged_sig = String::new();
    let e = case_with(&w, "case-9", |c| {
        statement = case_provenance_statement("case-9", &c.provenance.added_at, &c.case_digest);
        forged_sig = cosign(&key("mallory"), &statement).signature;
        c.provenance.reviewed_by.signature = forged_sig.clone();
    });
    let p = w.payload("curator-a", e);
    let mut d = decode_envelope(&events::sign_envelope(&key("curator-a"), &p)).expect("decodes");
    let signature: [u8; 64] =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &forged_sig)
            .expect("b64")
            .try_into()
            .expect("64 bytes");
    d.preverified.push(Preverified {
        public_key: key("mallory").verifying_key().to_bytes(),
        signature,
        statement_digest: *blake3::hash(&statement).as_bytes(),
    });
    let rej = w
        .log
        .state()
        .check(&d, T0 + 1_000_000, &NoCheckpoints)
        .expect_err("a forged co-signature must be refused");
    assert_eq!(rej.code, C::CosignatureInvalid, "{rej}");
    assert_eq!(rej.field, "event.body.provenance.reviewed_by.signature");
}

/// A batch is decided envelope by envelope, in the order given, with its
/// stateless checks spread over threads: a forged or malformed envelope in
/// the middle is refused alone, a repeated one is acknowledged as the entry
/// already made, and the rest are appended in order.
#[test]
fn a_batch_checked_on_many_threads_is_decided_in_order_like_single_posts() {
    let mut w = World::new();
    let before = w.size();
    let mut envs = Vec::new();
    for i in 0..100 {
        let mut env = w.envelope(
            "harness",
            Event::RunStarted(run(&format!("run-b{i}"), Isolation::Microvm)),
        );
        if i % 10 == 3 {
            // A forged signature: the payload is the signed one, the
            // signature's first byte is not.
            let s = String::from_utf8(env).expect("utf8");
            let at = s.find("\"sig\":\"").expect("sig") + 7;
            let flipped = if &s[at..at + 1] == "A" { "B" } else { "A" };
            env = format!("{}{}{}", &s[..at], flipped, &s[at + 1..]).into_bytes();
        }
        if i % 10 == 7 {
            env = b"{\"payload\":".to_vec();
        }
        envs.push(env);
    }
    let repeated = envs[1].clone();
    envs.push(repeated);
    let results: Vec<Posted> = w
        .log
        .submit_many(&envs, 4)
        .into_iter()
        .map(|p| p.and_then(|p| p.wait()))
        .collect();
    let mut next = before;
    for (i, r) in results.into_iter().enumerate() {
        match i {
            100 => {
                let r = r.expect("a repeated envelope is acknowledged");
                assert!(r.existing);
                assert_eq!(r.appended.index, before + 1);
            }
            _ if i % 10 == 3 => {
                expect_code(r, C::SignatureInvalid);
            }
            _ if i % 10 == 7 => {
                expect_code(r, C::MalformedEnvelope);
            }
            _ => {
                let r = r.expect("a valid envelope is appended");
                assert!(!r.existing);
                assert_eq!(r.appended.index, next, "envelope {i} out of order");
                next += 1;
            }
        }
    }
    assert_eq!(w.size(), before + 80);
}

/// Signers are looked up when an envelope is checked, before anything of
/// its batch is committed: an envelope signed by a key that an earlier
/// envelope of the same batch enrols is refused, and the enrolment stands.
#[test]
fn a_key_enrolled_in_a_batch_cannot_sign_later_in_that_batch() {
    let mut w = World::new();
    let before = w.size();
    let enrol = w.envelope(
        "operator",
        Event::PrincipalEnrolled(PrincipalEnrolled {
            sigstore: None,
            public_key: events::envelope::public_key_b64(&key("newcomer").verifying_key()),
            identity: "newcomer@example.org".into(),
            identity_name: None,
            roles: vec![Role::Harness],
        }),
    );
    let signed = w.envelope(
        "newcomer",
        Event::RunStarted(run("run-new", Isolation::Microvm)),
    );
    let mut results = w.log.submit_many(&[enrol, signed.clone()], 2).into_iter();
    let enrolled = results.next().expect("first").and_then(|p| p.wait());
    assert_eq!(enrolled.expect("enrolment appended").appended.index, before);
    expect_code(
        results.next().expect("second").and_then(|p| p.wait()),
        C::UnknownSigner,
    );
    assert_eq!(w.size(), before + 1);
    w.append(&signed)
        .expect("accepted once the enrolment is committed");
}

fn state_committed(w: &World, size: u64) -> Event {
    Event::StateCommitted(StateCommitted {
        checkpoint: CheckpointRef {
            size,
            root: ledger::hash::to_hex(&w.log.ledger().root_at(size).expect("root")),
        },
        state_root: "ab".repeat(32),
        task_classes: 1,
    })
}

#[test]
fn a_state_commitment_at_the_head_is_accepted_from_the_ledger_key() {
    let mut w = World::new();
    let size = w.size();
    let e = state_committed(&w, size);
    let r = w.post("ledger", e).expect("state committed");
    assert_eq!(r.appended.index, size);
}

#[test]
fn attack_a_state_commitment_for_an_older_size_is_refused() {
    refused(C::StateNotAtHead, "event.body.checkpoint.size", |w| {
        let e = state_committed(w, w.size() - 1);
        w.post("ledger", e)
    });
}
