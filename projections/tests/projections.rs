//! Projections over a real event log: evidence rules, determinism, rebuild
//! after restart, recommendations as events, and a realistic scenario.

use events::envelope::tier_change_statement;
use events::model::*;
use events::sample::case_handle;
use events::{cosign, Clock as _, RejectCode as C};
use projections::driver::{recommend, Projector};
use projections::{Projection, ProjectionError, Settings};
use testkit::world::*;

const DAY: i64 = 24 * 3600 * 1_000_000;

fn view(w: &World, p: &mut Projector, tc: &str) -> projections::TaskClassView {
    p.view_at_head(w.log.ledger(), tc, w.clock.now_micros())
        .expect("view")
}

/// The key projection checkpoints are sealed with, as the server derives it.
fn seal() -> [u8; 32] {
    projections::driver::seal_key(&key("ledger"))
}

#[test]
fn reruns_do_not_inflate_only_the_latest_score_per_case_counts() {
    let mut w = World::new();
    for v in [0.1, 0.2, 0.9] {
        w.post("harness", Event::ScoreRecorded(score("case-1", v)))
            .expect("score");
    }
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let v = view(&w, &mut p, TASK_CLASS);
    assert_eq!(v.scores_in_window, 3);
    assert_eq!(v.held_out.cases, 1, "three runs of one case count once");
    assert_eq!(v.held_out.mean, Some(0.9), "the latest score counts");
    assert_eq!(v.evidence.len(), 1);
}

#[test]
fn shared_kernel_scores_are_shown_but_never_count_as_evidence() {
    let mut w = World::new();
    w.post(
        "harness",
        Event::RunStarted(run("run-shared", Isolation::SharedKernel)),
    )
    .expect("run");
    let mut s = score("case-1", 1.0);
    s.run_id = "run-shared".into();
    s.score.failure_modes.push(ScoreFailureMode {
        code: "build_broken".into(),
        severity: "block".into(),
    });
    w.post("harness", Event::ScoreRecorded(s)).expect("score");
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let v = view(&w, &mut p, TASK_CLASS);
    assert_eq!(
        (v.scores_in_window, v.shared_kernel_scores_in_window),
        (1, 1)
    );
    assert_eq!(v.held_out.cases, 0);
    assert!(v.evidence.is_empty());
    assert_eq!((v.failures.block, v.shared_kernel_failures.block), (0, 1));
}

#[test]
fn retired_cases_stop_counting_and_pending_proposals_never_count() {
    let mut w = World::new();
    for c in ["case-1", "case-2", "case-3"] {
        w.post("harness", Event::ScoreRecorded(score(c, 0.8)))
            .expect("score");
    }
    let r = w.retire("case-2");
    w.post("curator-a", Event::CaseRetired(r)).expect("retire");
    w.post(
        "reconciler",
        Event::CaseProposed(CaseProposed {
            proposal_id: "prop-1".into(),
            task_class: TASK_CLASS.into(),
            draft: CaseDraft {
                case_id: "case-pending".into(),
                case_name: None,
                title: "pending".into(),
                disposition: Disposition::Negative.into(),
                difficulty: "hard".into(),
                curation_class: "held-out".into(),
                case_digest: case_digest("case-pending"),
                cassette_digest: cassette_digest("case-pending"),
            },
            production_ref: "INC-9".into(),
        }),
    )
    .expect("proposal");
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let v = view(&w, &mut p, TASK_CLASS);
    assert_eq!(v.active_cases_by_curation_class.get("held-out"), Some(&2));
    assert_eq!(v.pending_proposals, 1);
    assert_eq!(v.held_out.cases, 2);
    assert!(v
        .evidence
        .iter()
        .all(|e| e.case_id != case_handle("case-2")));
}

#[test]
fn scores_older_than_the_window_do_not_count() {
    let mut w = World::new();
    w.post("harness", Event::ScoreRecorded(score("case-1", 0.9)))
        .expect("score");
    w.clock.advance(31 * DAY);
    w.post("harness", Event::ScoreRecorded(score("case-2", 0.5)))
        .expect("score");
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let v = view(&w, &mut p, TASK_CLASS);
    assert_eq!(v.scores_in_window, 1);
    assert_eq!(v.held_out.mean, Some(0.5));
    let wide = Settings {
        window_seconds: 60 * 24 * 3600,
        ..Settings::default()
    };
    let mut p = Projector::rebuild(w.log.ledger(), wide).expect("projector");
    assert_eq!(view(&w, &mut p, TASK_CLASS).scores_in_window, 2);
}

#[test]
fn a_projection_not_at_the_checkpoint_answers_with_an_error_not_a_number() {
    let mut w = World::new();
    w.post("harness", Event::ScoreRecorded(score("case-1", 0.9)))
        .expect("score");
    let p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let head = w.log.ledger().head();
    let forged_root = ledger::leaf_hash(b"a different log");
    let err = p
        .projection()
        .view(
            w.log.ledger(),
            TASK_CLASS,
            w.clock.now_micros(),
            &p.settings,
            head.size,
            &forged_root,
        )
        .expect_err("wrong root");
    assert!(matches!(err, ProjectionError::Unverified { .. }));
    let err = p
        .projection()
        .view(
            w.log.ledger(),
            TASK_CLASS,
            w.clock.now_micros(),
            &p.settings,
            head.size + 1,
            &head.root,
        )
        .expect_err("wrong size");
    assert!(matches!(err, ProjectionError::Unverified { .. }));
}

/// Appends a long, varied stream: scores over many cases and runs, reruns,
/// retirements, a second task class, shared-kernel runs and time passing.
fn long_stream(w: &mut World, seed: u64, hook: &mut dyn FnMut(&World)) {
    let mut r = projections::stats::SplitMix64::new(seed);
    w.post(
        "operator",
        Event::TaskClassRegistered(task_class("second-class")),
    )
    .expect("register");
    for i in 0..40 {
        let tc = if i % 2 == 0 {
            TASK_CLASS
        } else {
            "second-class"
        };
        let c = w.case_for(
            tc,
            &format!("lcase-{i}"),
            if i % 3 == 0 {
                "corpus-derived"
            } else {
                "held-out"
            },
        );
        w.post("curator-a", Event::CaseAdded(c)).expect("case");
    }
    for run_no in 0..6 {
        for tc in [TASK_CLASS, "second-class"] {
            let run_id = format!("{tc}-run-{run_no}");
            let iso = if r.below(4) == 0 {
                Isolation::SharedKernel
            } else {
                Isolation::Microvm
            };
            w.post("harness", Event::RunStarted(run_for(tc, &run_id, iso)))
                .expect("run");
            for i in 0..40 {
                if (i % 2 == 0) != (tc == TASK_CLASS) || r.below(3) == 0 {
                    continue;
                }
                let mut s = score_for(
                    tc,
                    &run_id,
                    &format!("lcase-{i}"),
                    r.below(1001) as f64 / 1000.0,
                );
                if r.below(25) == 0 {
                    s.score.failure_modes.push(ScoreFailureMode {
                        code: "lint_regression".into(),
                        severity: "warn".into(),
                    });
                }
                let _ = w.post("harness", Event::ScoreRecorded(s));
            }
            w.post("harness", Event::RunFinished(RunFinished { run_id }))
                .expect("finish");
            hook(w);
        }
        if run_no == 3 {
            let ret = w.retire("lcase-4");
            w.post("curator-b", Event::CaseRetired(ret))
                .expect("retire");
        }
        w.clock.advance(3 * DAY + r.below(1000) as i64);
    }
}

#[test]
fn incremental_and_rebuilt_projections_are_byte_identical_at_every_checkpoint() {
    for seed in [1u64, 2, 3] {
        let mut w = World::new();
        let mut incremental =
            Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
        let mut steps = 0;
        long_stream(&mut w, seed, &mut |w| {
            steps += incremental
                .catch_up(w.log.ledger())
                .map(|n| u64::from(n > 0))
                .expect("catch up");
        });
        assert!(steps >= 10, "caught up in {steps} steps");
        incremental.catch_up(w.log.ledger()).expect("catch up");
        let rebuilt = Projector::rebuild(w.log.ledger(), Settings::default()).expect("rebuild");
        assert_eq!(incremental.projection(), rebuilt.projection());
        let head = w.log.ledger().head();
        let now = w.clock.now_micros();
        for tc in [TASK_CLASS, "second-class"] {
            let a = incremental
                .projection()
                .view(
                    w.log.ledger(),
                    tc,
                    now,
                    &incremental.settings,
                    head.size,
                    &head.root,
                )
                .expect("a");
            let b = rebuilt
                .projection()
                .view(
                    w.log.ledger(),
                    tc,
                    now,
                    &rebuilt.settings,
                    head.size,
                    &head.root,
                )
                .expect("b");
            assert_eq!(
                serde_json::to_vec(&a).expect("json"),
                serde_json::to_vec(&b).expect("json"),
                "seed {seed} {tc}"
            );
            assert!(a.scores_in_window > 0);
        }
    }
}

#[test]
fn projection_checkpoint_survives_a_restart_and_catches_up_from_its_size() {
    let mut w = World::new();
    long_stream(&mut w, 9, &mut |_| {});
    let p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    p.save(w.log.ledger(), &seal()).expect("save");
    let saved_at = p.projection().size();
    w.post(
        "harness",
        Event::RunStarted(run("run-after", Isolation::Microvm)),
    )
    .expect("run");
    w.post(
        "harness",
        Event::ScoreRecorded({
            let mut s = score("case-3", 0.77);
            s.run_id = "run-after".into();
            s
        }),
    )
    .expect("score");
    let World {
        dir, log, clock, ..
    } = w;
    drop(log);
    let log = events::EventLog::open(
        dir.path(),
        ledger::Config::default(),
        key("ledger"),
        clock.clone(),
    )
    .expect("reopen");
    let (mut resumed, how) =
        Projector::open(log.ledger(), Settings::default(), &seal()).expect("resume");
    assert_eq!(how, projections::driver::Resumed::At(saved_at));
    assert_eq!(resumed.projection().size(), log.ledger().head().size);
    assert!(saved_at < resumed.projection().size());
    let rebuilt = Projector::rebuild(log.ledger(), Settings::default()).expect("rebuild");
    assert_eq!(resumed.projection(), rebuilt.projection());
    let v = resumed
        .view_at_head(log.ledger(), TASK_CLASS, clock.now_micros())
        .expect("view");
    assert!(v
        .evidence
        .iter()
        .any(|e| e.case_id == case_handle("case-3") && e.score == 0.77));
}

/// Reopens the world's log as a start does (the directory is kept with it).
fn reopen(w: World) -> (events::EventLog, impl Drop) {
    let World {
        dir, log, clock, ..
    } = w;
    drop(log);
    let log = events::EventLog::open(dir.path(), ledger::Config::default(), key("ledger"), clock)
        .expect("reopen");
    (log, dir)
}

/// A checkpoint saved at a state commitment resumes as vouched for by the
/// ledger's own entry, with no rebuild needed to trust it.
#[test]
fn a_checkpoint_saved_at_a_state_commitment_resumes_as_committed() {
    let mut w = World::new();
    long_stream(&mut w, 5, &mut |_| {});
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let now = w.clock.now_micros();
    let c = projections::driver::commit_and_save(&w.log, &mut p, &key("ledger"), &seal(), now)
        .expect("committed and saved");
    let (log, _dir) = reopen(w);
    let (resumed, how) =
        Projector::open(log.ledger(), Settings::default(), &seal()).expect("resume");
    assert_eq!(
        how,
        projections::driver::Resumed::Committed {
            size: c.index,
            index: c.index
        }
    );
    let rebuilt = Projector::rebuild(log.ledger(), Settings::default()).expect("rebuild");
    assert_eq!(resumed.projection(), rebuilt.projection());
}

/// Someone who holds the ledger's key re-seals a checkpoint with one case's
/// score changed: the seal checks, the state commitment in the log does
/// not, and the projection is rebuilt from the log.
#[test]
fn attack_checkpoint_resealed_with_the_key_is_refused_by_its_state_commitment() {
    let mut w = World::new();
    w.post("harness", Event::ScoreRecorded(score("case-1", 0.9)))
        .expect("score");
    w.post("harness", Event::ScoreRecorded(score("case-2", 0.5)))
        .expect("score");
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let now = w.clock.now_micros();
    projections::driver::commit_and_save(&w.log, &mut p, &key("ledger"), &seal(), now)
        .expect("committed and saved");
    let (log, _dir) = reopen(w);
    let rec = log
        .ledger()
        .get_aux(projections::driver::AUX_KEY)
        .expect("read")
        .expect("saved");
    let parts = ledger::sealed::split(&rec).expect("sealed");
    // case-1's 0.9 made 0.1, re-sealed with the key.
    let mut body = parts.body.to_vec();
    let at = body
        .windows(8)
        .position(|x| x == 0.9f64.to_le_bytes())
        .expect("a stored 0.9 score");
    body[at..at + 8].copy_from_slice(&0.1f64.to_le_bytes());
    let forged = Projection::from_bytes(&body).expect("the edit still decodes");
    assert_ne!(forged.state().root(), p.projection().state().root());
    log.ledger()
        .put_aux(
            projections::driver::AUX_KEY,
            &ledger::sealed::seal(&seal(), &parts.magic, parts.size, &parts.root, &body),
        )
        .expect("write");
    let (resumed, how) =
        Projector::open(log.ledger(), Settings::default(), &seal()).expect("resume");
    match how {
        projections::driver::Resumed::Refused(m) => {
            assert!(m.to_string().contains("not the one the log commits"), "{m}")
        }
        other => panic!("a re-sealed forgery resumed: {other:?}"),
    }
    let rebuilt = Projector::rebuild(log.ledger(), Settings::default()).expect("rebuild");
    assert_eq!(resumed.projection(), rebuilt.projection());
}

fn request(w: &mut World, tc: &str) -> Vec<u8> {
    w.envelope(
        "promotion-gate",
        Event::PromotionRequested(PromotionRequested {
            task_class: tc.into(),
        }),
    )
}

#[test]
fn a_recommendation_is_an_event_with_evidence_that_is_in_the_log_and_humans_promote() {
    let mut w = World::new();
    for c in ["case-1", "case-2", "case-3"] {
        w.post("harness", Event::ScoreRecorded(score(c, 0.95)))
            .expect("score");
    }
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let req = request(&mut w, TASK_CLASS);
    // The caller read its clock before the request was sequenced: the view
    // is still stated as of no earlier than the request it answers.
    let read_before = w.clock.now_micros() - 1;
    let rec = recommend(&w.log, &mut p, &key("ledger"), &req, read_before).expect("recommend");
    let asked = w
        .log
        .ledger()
        .entry(rec.receipt.appended.index - 1)
        .expect("the request");
    let (_, asked_at) = events::decode_leaf(&asked.leaf).expect("decode");
    assert!(
        rec.view.now_micros >= asked_at,
        "the view is stated at {} before the request's {asked_at}",
        rec.view.now_micros
    );
    assert_eq!(
        rec.view.recommendation.recommended_tier,
        Tier::Silver,
        "{:#?}",
        rec.view.recommendation
    );
    assert!(rec.view.recommendation.rationale.iter().all(|r| r.holds));
    let entry = w
        .log
        .ledger()
        .entry(rec.receipt.appended.index)
        .expect("entry");
    let (d, _) = events::decode_leaf(&entry.leaf).expect("decode");
    let Event::PromotionRecommended(r) = d.payload.event else {
        panic!("not a recommendation")
    };
    assert!(r.requires_human_approval);
    // The evidence is cited by its tree: exactly the projection's list.
    assert!(r.evidence.is_empty());
    let cited = projections::driver::evidence_refs(&rec.view);
    assert_eq!(cited.len(), 3);
    assert_eq!(r.evidence_tree, Some(EvidenceTree::of(&cited)));
    for e in &cited {
        let ev = w.log.ledger().entry(e.index).expect("evidence entry");
        assert_eq!(ledger::hash::to_hex(&ev.leaf_hash), e.leaf_hash);
        let proof = w
            .log
            .ledger()
            .inclusion_proof(e.index, r.checkpoint.size)
            .expect("proof");
        let root = w.log.ledger().root_at(r.checkpoint.size).expect("root");
        assert_eq!(ledger::hash::to_hex(&root), r.checkpoint.root);
        ledger::merkle::verify_inclusion(&ev.leaf_hash, e.index, r.checkpoint.size, &proof, &root)
            .expect("inclusion");
    }
    // The recommendation changed nothing.
    assert_eq!(w.log.state().task_classes[TASK_CLASS].tier, Tier::Bronze);
    // Re-posting the same request returns the same recommendation.
    let again =
        recommend(&w.log, &mut p, &key("ledger"), &req, w.clock.now_micros()).expect("again");
    assert!(again.receipt.existing);
    assert_eq!(again.receipt.appended.index, rec.receipt.appended.index);
    assert_eq!(again.view, rec.view, "a re-post answers with the same view");
    // A projector that did not answer it (a restart) folds the log again up
    // to the recommendation's checkpoint, and answers the same.
    let mut fresh = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let after_restart = recommend(
        &w.log,
        &mut fresh,
        &key("ledger"),
        &req,
        w.clock.now_micros(),
    )
    .expect("again after a restart");
    assert!(after_restart.receipt.existing);
    assert_eq!(after_restart.view, rec.view);
    assert_eq!(after_restart.evidence.len(), 3);
    // Humans promote: two maintainers co-sign a tier change citing it.
    let idx = rec.receipt.appended.index;
    let st = tier_change_statement(TASK_CLASS, "bronze", "silver", idx);
    let change = TierChanged {
        task_class: TASK_CLASS.into(),
        from: Tier::Bronze,
        to: Tier::Silver,
        recommendation_index: idx,
        decided_by: cosign(&key("maintainer-a"), &st),
        confirmed_by: cosign(&key("maintainer-a"), &st),
    };
    expect_code(
        w.post("maintainer-a", Event::TierChanged(change.clone())),
        C::CosignersNotDistinct,
    );
    let change = TierChanged {
        confirmed_by: cosign(&key("maintainer-b"), &st),
        ..change
    };
    w.post("maintainer-a", Event::TierChanged(change))
        .expect("human tier change");
    assert_eq!(view(&w, &mut p, TASK_CLASS).tier, Tier::Silver);
}

/// Humans promote by Sigstore identity too: two maintainers enrolled by
/// identity (the synthetic Sigstore instance's test certificates) co-sign
/// a tier change with bundles over the statement for this log and role.
/// One identity twice, and a bundle signed in another role, are refused;
/// the change stands on replay.
#[test]
fn maintainers_enrolled_by_sigstore_identity_change_a_tier() {
    use sigstore_check::synthetic::{Synthetic, CURATOR, CURATOR_B, ISSUER, TRUSTED_ROOT};
    const ORIGIN: &str = "world.example/log";
    let mut w = World::new();
    w.trust_sigstore_root(ORIGIN, TRUSTED_ROOT);
    let id = |identity: &str| SigstoreIdentity {
        identity: identity.into(),
        issuer: ISSUER.into(),
    };
    for (who, identity) in [("s-a", CURATOR), ("s-b", CURATOR_B)] {
        w.enrol_by_identity(who, identity, ISSUER, vec![Role::Maintainer]);
    }
    for c in ["case-1", "case-2", "case-3"] {
        w.post("harness", Event::ScoreRecorded(score(c, 0.95)))
            .expect("score");
    }
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let req = request(&mut w, TASK_CLASS);
    let rec =
        recommend(&w.log, &mut p, &key("ledger"), &req, w.clock.now_micros()).expect("recommend");
    let idx = rec.receipt.appended.index;
    let st = tier_change_statement(TASK_CLASS, "bronze", "silver", idx);
    let synthetic = Synthetic::load().expect("synthetic");
    let by = |label: &str, identity: &str, role: Role| CoSignature {
        key_id: events::sigstore_principal_id(&id(identity)),
        signature: String::new(),
        sigstore_bundle: Some(
            synthetic
                .sign(label, &events::sigstore_statement(ORIGIN, role, &st))
                .expect("signed"),
        ),
    };
    let change = |decided_by, confirmed_by| {
        Event::TierChanged(TierChanged {
            task_class: TASK_CLASS.into(),
            from: Tier::Bronze,
            to: Tier::Silver,
            recommendation_index: idx,
            decided_by,
            confirmed_by,
        })
    };
    expect_code(
        w.post(
            "maintainer-a",
            change(
                by("curator", CURATOR, Role::Maintainer),
                by("curator", CURATOR, Role::Maintainer),
            ),
        ),
        C::CosignersNotDistinct,
    );
    let r = expect_code(
        w.post(
            "maintainer-a",
            change(
                by("curator", CURATOR, Role::Maintainer),
                by("curator-b", CURATOR_B, Role::Curator),
            ),
        ),
        C::SigstoreMessageMismatch,
    );
    assert_eq!(r.field, "event.body.confirmed_by.sigstore_bundle");
    assert_eq!(w.log.state().task_classes[TASK_CLASS].tier, Tier::Bronze);
    w.post(
        "maintainer-a",
        change(
            by("curator", CURATOR, Role::Maintainer),
            by("curator-b", CURATOR_B, Role::Maintainer),
        ),
    )
    .expect("a tier change co-signed by two identities");
    assert_eq!(view(&w, &mut p, TASK_CLASS).tier, Tier::Silver);
    assert_eq!(
        w.log.replay_state().expect("replay").task_classes[TASK_CLASS].tier,
        Tier::Silver
    );
}

/// A task class with more held-out cases than a listed citation could hold
/// in one entry (a list of 1,200 references is about 150 KB; an entry holds
/// 65,535 bytes) is recommended: the recommendation cites its evidence by
/// tree, and its entry stays small.
#[test]
fn a_class_of_1200_held_out_cases_is_recommended_with_its_evidence_cited_by_tree() {
    let mut w = World::new();
    for i in 0..1200 {
        let id = format!("case-many-{i}");
        let c = w.case_added(&id, "held-out");
        w.post("curator-a", Event::CaseAdded(c)).expect("case");
        w.post("harness", Event::ScoreRecorded(score(&id, 0.9)))
            .expect("score");
    }
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let req = request(&mut w, TASK_CLASS);
    let rec = recommend(&w.log, &mut p, &key("ledger"), &req, w.clock.now_micros())
        .expect("a large class is recommended");
    assert_eq!(rec.view.held_out.cases, 1200);
    assert_eq!(rec.evidence.len(), 1200);
    let entry = w
        .log
        .ledger()
        .entry(rec.receipt.appended.index)
        .expect("entry");
    assert!(entry.leaf.len() < 8192, "{} bytes", entry.leaf.len());
    let (d, at) = events::decode_leaf(&entry.leaf).expect("decode");
    let Event::PromotionRecommended(r) = &d.payload.event else {
        panic!("not a recommendation")
    };
    let tree = r.evidence_tree.clone().expect("cited by tree");
    assert_eq!(tree.count, 1200);
    assert_eq!(
        tree,
        EvidenceTree::of(&projections::driver::evidence_refs(&rec.view))
    );
    // A replay from the first entry gives the same recommendation; one
    // citing other evidence does not follow from the log.
    let index = rec.receipt.appended.index;
    let mut replay = Projector::empty(Settings::default());
    replay
        .check_recommendation(w.log.ledger(), index, r, &d.payload.issued_at, at)
        .expect("the recommendation follows from the log");
    let mut other = r.clone();
    other.evidence_tree = Some(EvidenceTree::of(&[]));
    let why = Projector::empty(Settings::default())
        .check_recommendation(w.log.ledger(), index, &other, &d.payload.issued_at, at)
        .expect_err("other evidence does not follow");
    assert!(why.to_string().contains("its evidence"), "{why}");
    // Its time decides the window: stated after it was sequenced, or before
    // the last entry it rests on, it does not follow.
    let size = r.checkpoint.size;
    let last = w.log.ledger().entry(size - 1).expect("last entry");
    let (_, last_at) = events::decode_leaf(&last.leaf).expect("decode");
    for (issued, what) in [
        (at + DAY, "after it was sequenced"),
        (last_at - 1, "before entry"),
    ] {
        let why = Projector::empty(Settings::default())
            .check_recommendation(
                w.log.ledger(),
                index,
                r,
                &events::envelope::format_micros(issued),
                at,
            )
            .expect_err("a time out of bounds does not follow");
        assert!(why.to_string().contains(what), "{why}");
    }
}

/// A recommendation states the settings its projection was computed with,
/// and a replay checks it with those, whatever its own; stated otherwise
/// (or out of range), it does not follow from the log.
#[test]
fn a_recommendation_states_its_settings_and_a_replay_checks_it_with_them() {
    let mut w = World::new();
    for (c, v) in [("case-1", 0.91), ("case-2", 0.95), ("case-3", 0.99)] {
        w.post("harness", Event::ScoreRecorded(score(c, v)))
            .expect("score");
    }
    let week = Settings {
        window_seconds: 7 * 24 * 3600,
        ..Settings::default()
    };
    let mut p = Projector::rebuild(w.log.ledger(), week).expect("projector");
    let req = request(&mut w, TASK_CLASS);
    let rec =
        recommend(&w.log, &mut p, &key("ledger"), &req, w.clock.now_micros()).expect("recommend");
    let index = rec.receipt.appended.index;
    let entry = w.log.ledger().entry(index).expect("entry");
    let (d, at) = events::decode_leaf(&entry.leaf).expect("decode");
    let Event::PromotionRecommended(r) = &d.payload.event else {
        panic!("not a recommendation")
    };
    assert_eq!(
        r.settings,
        Some(ViewSettings {
            window_seconds: 7 * 24 * 3600,
            confidence: 0.95,
            resamples: 2000,
        })
    );
    let check = |r: &PromotionRecommended| {
        Projector::empty(Settings::default()).check_recommendation(
            w.log.ledger(),
            index,
            r,
            &d.payload.issued_at,
            at,
        )
    };
    check(r).expect("checked with the settings it states");
    let mut other = r.clone();
    other.settings = Some(ViewSettings {
        window_seconds: 7 * 24 * 3600,
        confidence: 0.5,
        resamples: 2000,
    });
    let why = check(&other).expect_err("another confidence gives another lower bound");
    assert!(
        why.to_string()
            .contains(&format!("the recommendation at entry {index}: its")),
        "{why}"
    );
    other.settings = Some(ViewSettings {
        window_seconds: 3600,
        confidence: 0.95,
        resamples: events::model::MAX_RESAMPLES + 1,
    });
    let why = check(&other).expect_err("out of range");
    assert!(
        why.to_string().contains("its settings are out of range"),
        "{why}"
    );
}

/// The projections scenario (docs/PROJECTIONS.md): three task classes, 150 cases, several runs, one
/// poisoned attempt and one shared-kernel run, with the exact recommendation
/// for each class.
#[test]
fn scenario_three_task_classes_150_cases() {
    let mut w = World::with_actors();
    let classes = [
        ("alpha-migrations", 60),
        ("beta-dependency-bumps", 50),
        ("gamma-test-quarantine", 40),
    ];
    for (tc, _) in classes {
        let mut reg = task_class(tc);
        reg.tiers.insert(
            Tier::Silver,
            TierRule {
                min_cases_for_promotion: 30,
                score_threshold: 0.7,
            },
        );
        reg.tiers.insert(
            Tier::Gold,
            TierRule {
                min_cases_for_promotion: 50,
                score_threshold: 0.9,
            },
        );
        w.post("operator", Event::TaskClassRegistered(reg))
            .expect("register");
    }
    let mut total_cases = 0;
    for (tc, n) in classes {
        for i in 0..n {
            let c = w.case_for(tc, &format!("{tc}-case-{i:03}"), "held-out");
            w.post(
                if i % 2 == 0 { "curator-a" } else { "curator-b" },
                Event::CaseAdded(c),
            )
            .expect("case");
            total_cases += 1;
        }
    }
    assert_eq!(total_cases, 150);
    let mut rng = projections::stats::SplitMix64::new(2026);
    let mut rejected = Vec::new();
    for round in 0..2 {
        for (tc, n) in classes {
            let run_id = format!("{tc}-r{round}");
            w.post(
                "harness",
                Event::RunStarted(run_for(tc, &run_id, Isolation::Microvm)),
            )
            .expect("run");
            for i in 0..n {
                // gamma's microvm runs only reach half of its cases.
                if tc.starts_with("gamma") && i % 2 == 1 {
                    continue;
                }
                let base = match tc {
                    t if t.starts_with("alpha") => 0.84,
                    t if t.starts_with("beta") => 0.6,
                    _ => 0.95,
                };
                let v = (base + (rng.below(200) as f64 - 100.0) / 1000.0).clamp(0.0, 1.0);
                w.post(
                    "harness",
                    Event::ScoreRecorded(score_for(tc, &run_id, &format!("{tc}-case-{i:03}"), v)),
                )
                .expect("score");
            }
            w.post("harness", Event::RunFinished(RunFinished { run_id }))
                .expect("finish");
        }
        w.clock.advance(DAY);
    }
    // The poisoned attempt: a perfect score for a case whose content changed.
    w.post(
        "harness",
        Event::RunStarted(run_for(
            "beta-dependency-bumps",
            "beta-poison",
            Isolation::Microvm,
        )),
    )
    .expect("run");
    let mut poisoned = score_for(
        "beta-dependency-bumps",
        "beta-poison",
        "beta-dependency-bumps-case-000",
        1.0,
    );
    poisoned.case_digest = case_digest("softened beta case");
    rejected.push(expect_code(
        w.post("harness", Event::ScoreRecorded(poisoned)),
        C::CaseDigestMismatch,
    ));
    // The shared-kernel run: perfect scores on every gamma case, shown but not evidence.
    w.post(
        "harness",
        Event::RunStarted(run_for(
            "gamma-test-quarantine",
            "gamma-shared",
            Isolation::SharedKernel,
        )),
    )
    .expect("run");
    for i in 0..40 {
        w.post(
            "harness",
            Event::ScoreRecorded(score_for(
                "gamma-test-quarantine",
                "gamma-shared",
                &format!("gamma-test-quarantine-case-{i:03}"),
                1.0,
            )),
        )
        .expect("shared score");
    }

    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let mut got = Vec::new();
    for (tc, _) in classes {
        let req = request(&mut w, tc);
        let rec = recommend(&w.log, &mut p, &key("ledger"), &req, w.clock.now_micros())
            .expect("recommend");
        got.push((tc, rec.view.recommendation.recommended_tier, rec.view));
    }
    let [(_, alpha, av), (_, beta, bv), (_, gamma, gv)] =
        [got[0].clone(), got[1].clone(), got[2].clone()];
    // alpha: 60 held-out cases all scored, mean ≈ 0.84: silver's bound holds, gold's 0.9 does not.
    assert_eq!(alpha, Tier::Silver, "{:#?}", av.recommendation.rationale);
    assert_eq!(av.held_out.cases, 60);
    assert!(
        av.held_out.mean_ci.expect("ci").low >= 0.7 && av.held_out.mean_ci.expect("ci").low < 0.9
    );
    // beta: mean ≈ 0.6 and the poisoned perfect score never arrived.
    assert_eq!(beta, Tier::Bronze, "{:#?}", bv.recommendation.rationale);
    assert!(bv
        .recommendation
        .rationale
        .iter()
        .any(|r| r.rule == "silver.lower_bound_meets_threshold" && !r.holds));
    assert!(bv
        .evidence
        .iter()
        .all(|e| e.score < 1.0 || e.case_id != case_handle("beta-dependency-bumps-case-000")));
    // gamma: only 20 of 40 cases have microvm scores; the shared-kernel run does not fill the gap.
    assert_eq!(gamma, Tier::Bronze, "{:#?}", gv.recommendation.rationale);
    assert_eq!(gv.held_out.cases, 20);
    assert_eq!(gv.shared_kernel_scores_in_window, 40);
    assert!(gv
        .recommendation
        .rationale
        .iter()
        .any(|r| r.rule == "silver.every_case_scored_in_window" && !r.holds));
    assert_eq!(rejected.len(), 1);
}

/// The incremental view (running window totals, memoised bootstrap) gives
/// exactly the answer of the full scan, over a random history: scores in
/// microvm and shared-kernel runs, with and without failures, cases added
/// and retired, time moving on (so scores leave short windows), views asked
/// at earlier times (the window moves back), and two window lengths
/// answered from one cache.
#[test]
fn incremental_views_equal_the_full_scan_over_a_random_history() {
    let mut w = World::new();
    w.post(
        "harness",
        Event::RunStarted(run("run-shared", Isolation::SharedKernel)),
    )
    .expect("run");
    let mut cases: Vec<(String, bool)> = (1..=3).map(|i| (format!("case-{i}"), true)).collect();
    let mut rng = projections::stats::SplitMix64::new(20261122);
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let mut cache = projections::fold::ViewCache::default();
    let mut inc = Projection::default();
    let settings = [
        Settings {
            resamples: 199,
            ..Settings::default()
        },
        Settings {
            window_seconds: 2 * 24 * 3600,
            resamples: 199,
            ..Settings::default()
        },
    ];
    let mut compared = 0;
    for step in 0..400 {
        match rng.below(20) {
            0 => {
                let id = format!("case-new-{step}");
                let curation = if rng.below(2) == 0 {
                    "held-out"
                } else {
                    "regression"
                };
                let c = w.case_added(&id, curation);
                w.post("curator-a", Event::CaseAdded(c)).expect("case");
                cases.push((id, true));
            }
            1 => {
                let i = rng.below(cases.len());
                if cases[i].1 {
                    let r = w.retire(&cases[i].0);
                    w.post("curator-a", Event::CaseRetired(r)).expect("retire");
                    cases[i].1 = false;
                }
            }
            2 | 3 => w.clock.advance(rng.below(3 * 24 * 3600) as i64 * 1_000_000),
            _ => {
                let live: Vec<&String> = cases.iter().filter(|c| c.1).map(|c| &c.0).collect();
                if live.is_empty() {
                    continue;
                }
                let case = live[rng.below(live.len())].clone();
                let mut s = score(&case, rng.below(101) as f64 / 100.0);
                if rng.below(4) == 0 {
                    s.run_id = "run-shared".into();
                }
                s.score.cost_usd = rng.below(1000) as f64 / 997.0;
                match rng.below(6) {
                    0 => s.score.failure_modes.push(ScoreFailureMode {
                        code: "build_broken".into(),
                        severity: "block".into(),
                    }),
                    1 => s.score.failure_modes.push(ScoreFailureMode {
                        code: "lint_regression".into(),
                        severity: "warn".into(),
                    }),
                    _ => {}
                }
                w.post("harness", Event::ScoreRecorded(s)).expect("score");
            }
        }
        if rng.below(3) != 0 {
            continue;
        }
        p.catch_up(w.log.ledger()).expect("catch up");
        let head = w.log.ledger().head();
        let set = &settings[rng.below(2)];
        // Mostly now; sometimes a day back, which moves the window back.
        let now = w.clock.now_micros() - if rng.below(8) == 0 { DAY } else { 0 };
        let full = p
            .projection()
            .view(w.log.ledger(), TASK_CLASS, now, set, head.size, &head.root)
            .expect("full view");
        for e in w.log.ledger().entries(inc.size(), head.size).expect("read") {
            inc.apply(e.index, &e.leaf).expect("apply");
        }
        if rng.below(10) == 0 {
            // A restart: the window's sums and cursor come back from bytes.
            let bytes = inc.to_bytes();
            // What a save seals is the same bytes, written in place.
            assert_eq!(inc.to_unsealed().body(), &bytes[..]);
            let reloaded = Projection::from_bytes(&bytes).expect("reload");
            // What a fold keeps in step beside the saved fields (the
            // lookups by case name and number) is what a reload rebuilds.
            assert_eq!(reloaded, inc, "step {step}");
            inc = reloaded;
        }
        let incremental = inc
            .view_cached(
                &mut cache,
                w.log.ledger(),
                TASK_CLASS,
                now,
                set,
                head.size,
                &head.root,
            )
            .expect("incremental view");
        assert_eq!(incremental, full, "step {step}");
        // The committed state gives the same decision numbers from its
        // records alone, after a round trip through their JSON.
        let state = inc.state();
        let class = state.class(TASK_CLASS).expect("class committed");
        let records: Vec<projections::commit::CaseRecord> =
            serde_json::from_slice(&serde_json::to_vec(&class.cases).expect("json"))
                .expect("parse");
        let committed = projections::commit::view(&class.class, &records, head.size, now, set);
        assert_eq!(
            projections::commit::first_difference(&committed, &full),
            None,
            "step {step}"
        );
        // And the check a recommendation passes before it is signed.
        assert_eq!(
            p.projection().recheck(&Default::default(), &full),
            Ok(()),
            "step {step}"
        );
        compared += 1;
    }
    assert!(compared > 100, "only {compared} views compared");
    // The history exercised what the cache must get right.
    p.catch_up(w.log.ledger()).expect("catch up");
    let head = w.log.ledger().head();
    let v = p
        .projection()
        .view(
            w.log.ledger(),
            TASK_CLASS,
            w.clock.now_micros(),
            &settings[1],
            head.size,
            &head.root,
        )
        .expect("view");
    assert!(v.scores_in_window > 0 && v.shared_kernel_scores_in_window > 0);
}

/// Before the ledger signs a recommendation, the numbers are recomputed
/// from the evidence leaves read back from the log; a view whose numbers
/// or evidence were altered (a damaged or forged projection) is refused,
/// never signed.
#[test]
fn attack_numbers_that_do_not_follow_from_their_evidence_are_never_signed() {
    use projections::driver::{check_evidence, DerivedMismatch, DriverError};
    let mut w = World::new();
    for (c, v) in [("case-1", 0.4), ("case-2", 0.6), ("case-3", 0.9)] {
        w.post("harness", Event::ScoreRecorded(score(c, v)))
            .expect("score");
    }
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let honest = view(&w, &mut p, TASK_CLASS);
    check_evidence(w.log.ledger(), &honest).expect("an honest view follows from its evidence");
    let refused =
        |v: &projections::TaskClassView, what: &str| match check_evidence(w.log.ledger(), v) {
            Err(DriverError::Mismatch(DerivedMismatch::Evidence { what: why, .. })) => {
                assert!(why.contains(what), "{why}")
            }
            other => panic!("{what}: a view that does not follow was accepted: {other:?}"),
        };
    let mut v = honest.clone();
    v.held_out.mean = Some(0.95);
    refused(&v, "held-out mean");
    let mut v = honest.clone();
    v.held_out.mean_ci = None;
    refused(&v, "held-out mean_ci");
    let mut v = honest.clone();
    v.held_out.passed += 1;
    refused(&v, "held-out passed");
    let mut v = honest.clone();
    v.evidence.remove(0);
    refused(&v, "held-out cases");
    let mut v = honest.clone();
    v.evidence[1].leaf_hash = v.evidence[0].leaf_hash.clone();
    refused(&v, "leaf hash");
    let mut v = honest.clone();
    v.evidence[0].index = 0;
    refused(&v, "leaf hash");
    let mut v = honest;
    v.evidence[0].case_id = "case-9".into();
    refused(&v, "case");
}

/// Before the ledger signs a recommendation, its view (answered from the
/// window sums) is derived a second time from the per-case state the state
/// commitments commit. A view that cites an older score of a case in place
/// of its newest, leaves a case out, undercounts a failure, miscounts the active cases or states another
/// tier is refused, naming the field; the honest view passes.
#[test]
fn attack_a_view_the_per_case_state_does_not_give_is_never_signed() {
    let mut w = World::new();
    for (c, v) in [("case-1", 0.4), ("case-2", 0.6), ("case-3", 0.9)] {
        w.post("harness", Event::ScoreRecorded(score(c, v)))
            .expect("score");
    }
    let mut failing = score("case-2", 0.7);
    failing.score.failure_modes.push(ScoreFailureMode {
        code: "build_broken".into(),
        severity: "block".into(),
    });
    w.post("harness", Event::ScoreRecorded(failing))
        .expect("score");
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let honest = view(&w, &mut p, TASK_CLASS);
    assert_eq!(p.projection().recheck(&Default::default(), &honest), Ok(()));
    let refused = |v: &projections::TaskClassView, field: &str| {
        let why = p
            .projection()
            .recheck(&Default::default(), v)
            .expect_err("a view the per-case state does not give was accepted");
        assert!(why.contains(&format!("`{field}`")), "{field}: {why}");
    };
    // case-2's older score (0.6, entry and leaf hash its own) in place of
    // its newest (0.7, with a block failure).
    let older = w
        .log
        .ledger()
        .entries(0, w.size())
        .expect("read")
        .into_iter()
        .find(|e| {
            events::decode_leaf(&e.leaf).is_ok_and(|(d, _)| {
                matches!(&d.payload.event, Event::ScoreRecorded(s) if s.case_id == case_handle("case-2") && s.score.score == 0.6)
            })
        })
        .expect("case-2's first score");
    let mut v = honest.clone();
    let e = v
        .evidence
        .iter_mut()
        .find(|e| e.case_id == case_handle("case-2"))
        .expect("case-2 cited");
    e.index = older.index;
    e.leaf_hash = ledger::hash::to_hex(&older.leaf_hash);
    e.score = 0.6;
    refused(&v, "evidence");
    let mut v = honest.clone();
    v.failures.block = 0;
    refused(&v, "failures");
    let mut v = honest.clone();
    v.active_cases_by_curation_class
        .insert("held-out".into(), 2);
    refused(&v, "active_cases_by_curation_class");
    let mut v = honest.clone();
    v.evidence.pop();
    refused(&v, "evidence");
    let mut v = honest.clone();
    v.recommendation.recommended_tier = match honest.recommendation.recommended_tier {
        Tier::Bronze => Tier::Silver,
        _ => Tier::Bronze,
    };
    refused(&v, "recommendation");
    let mut v = honest;
    v.window_start_micros -= DAY;
    refused(&v, "window_start_micros");
}

/// A view whose statistics follow from its evidence but which shows one
/// evidence entry with a score its leaf does not hold (a number the ledger
/// did not derive) is refused before it is signed, naming the entry.
#[test]
fn attack_a_view_showing_a_score_its_evidence_leaf_does_not_hold_is_never_signed() {
    use projections::driver::{check_evidence, DerivedMismatch, DriverError};
    let mut w = World::new();
    for (c, v) in [("case-1", 0.4), ("case-2", 0.6)] {
        w.post("harness", Event::ScoreRecorded(score(c, v)))
            .expect("score");
    }
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("projector");
    let mut v = view(&w, &mut p, TASK_CLASS);
    check_evidence(w.log.ledger(), &v).expect("an honest view follows from its evidence");
    let at = v
        .evidence
        .iter()
        .position(|e| e.score == 0.4)
        .expect("case-1's score");
    v.evidence[at].score = 0.95;
    match check_evidence(w.log.ledger(), &v) {
        Err(DriverError::Mismatch(DerivedMismatch::Evidence { what, .. })) => assert!(
            what.contains(&format!(
                "evidence {} scored 0.4; the view says 0.95",
                v.evidence[at].index
            )),
            "{what}"
        ),
        other => panic!("a view showing a score its leaf does not hold was accepted: {other:?}"),
    }
}

/// A `state.committed` whose root is not the fold of the log before it
/// (the ledger signed a wrong commitment) stops every fold of the log at
/// that entry, naming it; a right one folds like any entry.
#[test]
fn attack_a_wrong_state_root_signed_by_the_ledger_is_caught_by_every_fold() {
    let mut w = World::new();
    let commitment = |w: &World, root: String| {
        let size = w.size();
        Event::StateCommitted(StateCommitted {
            checkpoint: CheckpointRef {
                size,
                root: ledger::hash::to_hex(&w.log.ledger().root_at(size).expect("root")),
            },
            state_root: root,
            task_classes: 1,
        })
    };
    let p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("fold");
    let right = ledger::hash::to_hex(&p.projection().state().root());
    let e = commitment(&w, right);
    w.post("ledger", e).expect("a right commitment");
    let e = commitment(&w, "ab".repeat(32));
    let wrong = w
        .post("ledger", e)
        .expect("the sequencer cannot tell")
        .appended
        .index;
    match Projector::rebuild(w.log.ledger(), Settings::default()) {
        Err(projections::driver::DriverError::Projection(ProjectionError::WrongStateRoot {
            index,
            ..
        })) => assert_eq!(index, wrong),
        other => panic!("expected the wrong root caught, got {other:?}"),
    }
}

/// State commitments asked for while scores keep landing: each names the
/// state of exactly the log before it, so the log folds cleanly from the
/// first entry (no commitment with a root of another size).
#[test]
fn commitments_made_while_writes_land_are_each_the_state_of_the_log_before_them() {
    let mut w = World::new();
    let envelopes: Vec<Vec<u8>> = (0..300)
        .map(|i| {
            let s = score(&format!("case-{}", 1 + i % 3), (i % 100) as f64 / 100.0);
            w.envelope("harness", Event::ScoreRecorded(s))
        })
        .collect();
    let mut p = Projector::rebuild(w.log.ledger(), Settings::default()).expect("fold");
    let mut commitments = 0;
    std::thread::scope(|s| {
        let log = &w.log;
        let writer = s.spawn(move || {
            for e in &envelopes {
                log.append(e).expect("score");
            }
        });
        while !writer.is_finished() {
            projections::driver::commit_state(log, &mut p, &key("ledger"), T0).expect("committed");
            commitments += 1;
        }
    });
    assert!(commitments > 1, "only {commitments} commitments");
    Projector::rebuild(w.log.ledger(), Settings::default()).expect("every commitment holds");
}
