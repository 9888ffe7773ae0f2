"""The harness and reconcilers against a live server: posts, batches, retries, refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import Bench, LedgerServer, digest
from evidence_ledger import Client, TrustedState, problems
from evidence_ledger import events as ev
from evidence_ledger.errors import Forbidden, MalformedRequest, RuleViolation, Unauthenticated


def test_a_posted_score_comes_back_with_a_checked_receipt(server: LedgerServer) -> None:
    b = Bench(server, "harness-post", cases=2)
    env = b.score(b.cases[0], 0.8).sign(b.harness)
    r = b.client.post(env)
    assert r.kind == "score.recorded" and r.id == env.id and not r.existing
    assert b.client.trust.size is not None and b.client.trust.size >= r.index + 1


def test_re_posting_the_same_envelope_is_idempotent(server: LedgerServer) -> None:
    b = Bench(server, "harness-repost", cases=1)
    env = b.score(b.cases[0], 0.7).sign(b.harness)
    first = b.client.post(env)
    again = b.client.post(env)
    assert again.existing and again.index == first.index and again.leaf_hash == first.leaf_hash


def test_a_batch_judges_each_envelope_alone_and_checks_every_receipt(server: LedgerServer) -> None:
    b = Bench(server, "harness-batch", cases=3)
    good = [b.score(c, 0.9).sign(b.harness) for c in b.cases]
    bad = ev.RunFinished("no-such-run").sign(b.harness)
    out = b.client.post_many([good[0], bad, good[1], good[2]])
    assert [p.receipt is not None for p in out] == [True, False, True, True]
    assert isinstance(out[1].refusal, problems.RunUnknown) and out[1].refusal.field == "event.body.run_id"
    indices = [p.receipt.index for p in out if p.receipt is not None]
    assert indices == sorted(indices)
    again = b.client.post_many(good)
    assert all(p.receipt is not None and p.receipt.existing for p in again)


def test_a_banned_breakdown_key_sent_raw_is_refused_naming_the_field(server: LedgerServer) -> None:
    b = Bench(server, "harness-banned", cases=1)
    body = b.score(b.cases[0], 0.5).body()
    body["score"]["breakdown"] = {"model_confidence": 0.99}
    from evidence_ledger.envelope import sign_payload

    with pytest.raises(problems.BreakdownKeyBanned) as e:
        b.client.post(sign_payload(b.harness, "score.recorded", body))
    assert isinstance(e.value, RuleViolation)
    assert e.value.field == "event.body.score.breakdown.model_confidence" and e.value.status == 422


def test_a_poisoned_case_digest_is_refused(server: LedgerServer) -> None:
    b = Bench(server, "harness-poison", cases=1)
    c = b.cases[0]
    poisoned = ev.CaseDraft(c.case_id, c.title, c.disposition, c.difficulty, c.curation_class, digest("poison"), c.cassette_digest)
    with pytest.raises(problems.CaseDigestMismatch) as e:
        b.client.post(b.score(poisoned, 1.0).sign(b.harness))
    assert e.value.field == "event.body.case_digest"


def test_an_unknown_signer_and_a_wrong_role_are_refused(server: LedgerServer) -> None:
    b = Bench(server, "harness-roles", cases=1)
    from evidence_ledger import SigningKey

    stranger = SigningKey.generate("stranger")
    with pytest.raises(problems.UnknownSigner) as e:
        b.client.post(b.score(b.cases[0], 0.5).sign(stranger))
    assert isinstance(e.value, Unauthenticated)
    with pytest.raises(problems.RoleNotPermitted) as f:
        b.client.post(b.score(b.cases[0], 0.5).sign(b.reconciler))
    assert isinstance(f.value, Forbidden)


def test_a_reconciler_proposes_a_pending_case_that_cannot_be_scored_until_approved(server: LedgerServer) -> None:
    b = Bench(server, "reconciler-flow", cases=1)
    # The proposal gives the case its handle where it names the case first; the
    # approval's statement and the scores name that handle (`Envelope.handle`).
    proposed = ev.CaseProposed("prop-1-reconciler-flow", b.name, b.draft("reconciler-flow-incident-1"), "incident INC-1234").sign(b.reconciler)
    b.client.post(proposed)
    assert proposed.handle is not None and proposed.body["draft"]["case_name"]["_sd"] == proposed.handle
    draft = replace(b.draft("reconciler-flow-incident-1"), case_id=proposed.handle)
    with pytest.raises(problems.CasePending):
        b.client.post(b.score(draft, 0.9).sign(b.harness))
    sneaky, bound = b.draft("sneaky").bind()
    with pytest.raises(problems.RoleNotPermitted):
        b.client.post(
            ev.CaseAdded.cosigned(b.name, sneaky, source="curated", source_ref="r", added_at="2026-11-20T00:00:00Z",
                                  added_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.reconciler, bound=[bound])
        )
    b.client.post(
        ev.ProposalApproved.cosigned("prop-1-reconciler-flow", draft, "2026-11-21T00:00:00Z", added_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[1])
    )
    assert b.client.post(b.score(draft, 0.9).sign(b.harness)).kind == "score.recorded"


def test_a_malformed_request_is_a_typed_400(server: LedgerServer) -> None:
    c = server.client()
    with pytest.raises(MalformedRequest):
        c._json("POST", "/v1/events", b"{}")


def test_the_trusted_state_in_a_file_survives_the_client(server: LedgerServer, tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "trusted.note"
    c1 = Client(server.url, server.vkey, trust=TrustedState.file(path))
    cp = c1.checkpoint()
    assert path.read_text() == cp.note
    c2 = Client(server.url, server.vkey, trust=TrustedState.file(path))
    assert c2.trust.size == cp.size
    assert c2.checkpoint().size >= cp.size
