"""The replay's parts without a server: the comparison, the promotion rules at their
edges, the exact cost sum, the Ed25519 edge cases the ledger decides with
`verify_strict`, and the acceptance rules refusing entries no honest ledger appends."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
from dataclasses import replace
import math
import random
from pathlib import Path
from typing import Any, Callable, Optional, cast

import pytest

from evidence_ledger import Client, ForkDetected, Incomplete, RuleBroken, SigningKey, disclose, merkle, replay
from evidence_ledger import events as ev
from evidence_ledger.acceptance import State, _verifies
from evidence_ledger.envelope import Envelope, decode_leaf, sign_payload
from evidence_ledger.fold import ExactSum, Projection, RuleInput, TierRule, recommend, rules_for, rust_display
from evidence_ledger.note import Checkpoint
from evidence_ledger.replay import STEP, Replica, first_difference
from evidence_ledger.stats import Settings
from evidence_ledger.timefmt import format_micros
from evidence_ledger.wire import EntryView

REPO = Path(__file__).resolve().parents[3]


# --- first_difference (verifier::replay::first_difference) -------------------------


def view() -> dict[str, Any]:
    return {
        "task_class": "tc", "tree_size": 3, "root": "00", "now_micros": 5, "window_start_micros": 0,
        "settings": {"window_seconds": 2592000, "confidence": 0.95, "resamples": 2000}, "tier": "bronze",
        "active_cases_by_curation_class": {"held-out": 2}, "pending_proposals": 0, "runs_in_window": 1,
        "scores_in_window": 2, "shared_kernel_scores_in_window": 0,
        "held_out": {"cases": 2, "mean": 0.5, "mean_ci": None, "passed": 1, "pass_rate": 0.5, "pass_rate_ci": None},
        "all_cases": {"cases": 2, "mean": 0.5, "mean_ci": None, "passed": 1, "pass_rate": 0.5, "pass_rate_ci": None},
        "failures": {"block": 1, "warn": 0, "info": 0}, "shared_kernel_failures": {"block": 0, "warn": 0, "info": 0},
        "cost_usd_in_window": 0.25, "latest_run": None,
        "evidence": [{"index": 1, "leaf_hash": "aa", "case_id": "c1", "score": 0.25},
                     {"index": 2, "leaf_hash": "bb", "case_id": "c2", "score": 0.75}],
        "recommendation": {"current_tier": "bronze", "recommended_tier": "bronze", "rationale": [], "requires_human_approval": True},
    }


def changed(f: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    v = copy.deepcopy(view())
    f(v)
    return v


def test_the_first_difference_is_named_down_to_the_field() -> None:
    a = view()
    assert first_difference(json.loads(json.dumps(a)), a) is None
    assert first_difference(changed(lambda v: v["failures"].update(block=0)), a) == "view.failures.block"
    assert first_difference(changed(lambda v: v["evidence"].pop()), a) == "view.evidence"
    assert first_difference(changed(lambda v: v["evidence"][1].update(score=0.5)), a) == "view.evidence[1].score"
    one_bit = math.nextafter(0.5, 1.0)
    assert first_difference(changed(lambda v: v["held_out"].update(mean=one_bit)), a) == "view.held_out.mean"
    assert first_difference(changed(lambda v: v.update(unstated=1)), a) == "view.unstated"
    zero = changed(lambda v: v.update(cost_usd_in_window=0.0))
    assert first_difference(changed(lambda v: v.update(cost_usd_in_window=-0.0)), zero) == "view.cost_usd_in_window"
    # Keys are taken in sorted order: the first differing one is named.
    both = changed(lambda v: (v["failures"].update(block=0), v["all_cases"].update(cases=3)))
    assert first_difference(both, a) == "view.all_cases.cases"
    # A boolean is not a number, and an integer equals the same float (as serde_json's Number).
    assert first_difference(changed(lambda v: v["recommendation"].update(requires_human_approval=1)), a) == "view.recommendation.requires_human_approval"
    assert first_difference(changed(lambda v: v["evidence"][0].update(score=1)), changed(lambda v: v["evidence"][0].update(score=1.0))) is None
    assert first_difference(changed(lambda v: v.update(latest_run={})), a) == "view.latest_run"


# --- the rules (projections/src/rules.rs), at their edges -------------------------------

SILVER, GOLD = TierRule(10, 0.7), TierRule(20, 0.9)


def rule_of(t: str) -> TierRule | None:
    return SILVER if t == "silver" else GOLD if t == "gold" else None


GOOD = RuleInput(active_held_out=10, scored_held_out=10, lower_bound=0.7, block_failures=0)


def test_each_rule_holds_exactly_at_its_edge_and_fails_one_below() -> None:
    holds = [o["holds"] for o in rules_for("silver", GOOD, SILVER)]
    assert holds == [True, True, True, True]
    assert not rules_for("silver", RuleInput(9, 9, 0.7, 0), SILVER)[0]["holds"]
    assert not rules_for("silver", RuleInput(10, 9, 0.7, 0), SILVER)[1]["holds"]
    assert not rules_for("silver", RuleInput(0, 0, None, 0), SILVER)[1]["holds"]
    assert not rules_for("silver", RuleInput(10, 10, 0.7 - 1e-9, 0), SILVER)[2]["holds"]
    assert not rules_for("silver", RuleInput(10, 10, 0.7, 1), SILVER)[3]["holds"]


def test_recommendations_move_one_tier_and_demote_below_the_current_rules() -> None:
    assert recommend("bronze", GOOD, rule_of)[0] == "silver"
    assert recommend("bronze", RuleInput(10, 10, 0.69, 0), rule_of)[0] == "bronze"
    t, why = recommend("silver", RuleInput(20, 20, 0.9, 0), rule_of)
    assert t == "gold" and len(why) == 8
    assert recommend("silver", RuleInput(10, 10, 0.7, 1), rule_of)[0] == "bronze"
    assert recommend("gold", GOOD, rule_of)[0] == "silver"
    assert recommend("silver", RuleInput(10, 0, None, 0), rule_of)[0] == "bronze"


def test_the_rationale_text_is_the_ledgers() -> None:
    why = rules_for("silver", RuleInput(30, 29, 0.76449, 2), TierRule(15, 0.7))
    assert [o["detail"] for o in why] == [
        "30 active held-out cases; silver needs at least 15",
        "29 of 30 active held-out cases have a microvm score in the window",
        "lower 95% bound 0.7645; silver needs at least 0.7",
        "2 block-severity failures in the window",
    ]
    assert rules_for("gold", RuleInput(0, 0, None, 0), TierRule(1, 1.0))[2]["detail"] == \
        "no scores in the window; gold needs a lower bound of at least 1"
    # Rust's `{}` for f64 (shortest round trip, no exponent) and `{:.4}` (ties to even).
    assert [rust_display(x) for x in (0.7, 1.0, 0.0, -0.0, 1e-7, 1e21, 0.1 + 0.2)] == \
        ["0.7", "1", "0", "-0", "0.0000001", "1000000000000000000000", "0.30000000000000004"]
    assert rules_for("silver", RuleInput(1, 1, 0.03125, 0), SILVER)[2]["detail"].startswith("lower 95% bound 0.0312;")


def test_the_exact_cost_sum_is_pythons_fsum_and_infinite_with_a_huge_term() -> None:
    rng = random.Random(7)
    for _ in range(200):
        xs = [rng.choice([0.1, 0.01, 1e-17, 3.0, 1e16, 2.5e-300]) * rng.random() for _ in range(rng.randrange(0, 40))]
        s = ExactSum()
        for x in xs:
            s.add(x)
        assert s.value().hex() == math.fsum(xs).hex()
    s = ExactSum()
    s.add(2.0**960)
    assert s.value() == math.inf
    assert ExactSum().value().hex() == (0.0).hex()


# --- Ed25519: the ledger decides with verify_strict -------------------------------------


def test_signatures_are_decided_as_verify_strict_decides_them() -> None:
    d = json.loads((REPO / "events/testdata/ed25519_edge_cases.json").read_text())
    for c in d["speccheck"]["cases"]:
        got = _verifies(bytes.fromhex(c["pub_key"]), bytes.fromhex(c["message"]), bytes.fromhex(c["signature"]))
        assert got == c["verify_strict"], c
    for c in d["rfc8032"]["cases"]:
        assert _verifies(bytes.fromhex(c["pub_key"]), bytes.fromhex(c["message"]), bytes.fromhex(c["signature"]))


# --- the acceptance rules refuse what no honest ledger appends -------------------------


class Log:
    """A log built in memory: entries checked and folded as the replica does."""

    def __init__(self, schema: int = 3) -> None:
        self.state = State()
        self.fold = Projection()
        self.at = 1_790_000_000_000_000
        self.leaves: list[bytes] = []
        self.op = SigningKey.generate("op")
        self.append(ev.PrincipalEnrolled.of(self.op, "op@example.org", ["operator"]).sign(self.op, schema=schema))

    def append(self, env: Envelope, at: int | None = None) -> None:
        self.at = self.at + 1 if at is None else at
        leaf = env.leaf_bytes(self.at)
        d = decode_leaf(leaf)
        index = self.state.size
        self.state.check(d, index, lambda size, root, field: None)
        self.state.apply(d, index)
        self.fold.apply(index, leaf, d)
        self.leaves.append(leaf)


def digest(tag: str) -> str:
    import hashlib

    return "blake3:" + hashlib.sha256(tag.encode()).hexdigest()


@pytest.fixture()
def log() -> tuple[Log, dict[str, SigningKey], ev.CaseDraft]:
    g = Log()
    keys = {n: SigningKey.generate(n) for n in ("harness", "cur-a", "cur-b", "stranger")}
    for n, role in (("harness", "harness"), ("cur-a", "curator"), ("cur-b", "curator")):
        g.append(ev.PrincipalEnrolled.of(keys[n], f"{n}@example.org", [role]).sign(g.op))
    g.append(ev.TaskClassRegistered(task_class="tc", silver=ev.TierRule(1, 0.5), gold=ev.TierRule(2, 0.9),
                                    failure_modes=[ev.FailureMode("build_broken", "block", "does not build")],
                                    breakdown_keys=["correctness"], rubric_digest=digest("rubric")).sign(g.op))
    d, bound = ev.CaseDraft("case-1", "case 1", "positive", "medium", "held-out", digest("case-1"), digest("cassette-1")).bind()
    g.append(ev.CaseAdded.cosigned("tc", d, source="curated", source_ref="bench", added_at="2026-11-20T00:00:00Z",
                                   added_by=keys["cur-a"], reviewed_by=keys["cur-b"]).sign(keys["cur-a"], bound=[bound]))
    g.append(ev.RunStarted("run-1", "tc", "h 1", digest("rubric"), digest("image")).sign(keys["harness"]))
    return g, keys, d


def score(d: ev.CaseDraft, value: float = 0.9) -> ev.ScoreRecorded:
    return ev.ScoreRecorded(run_id="run-1", task_class="tc", case_id=d.case_id, case_digest=d.case_digest,
                            rubric_digest=digest("rubric"), cassette_digest=d.cassette_digest, harness_version="h 1",
                            image_digest=digest("image"), score=ev.BenchScore(True, value, {"correctness": value}),
                            started_at="2026-11-20T00:00:00Z", finished_at="2026-11-20T00:01:00Z", operator_fingerprint="ci")


def refused(g: Log, env: Envelope, code: str, at: int | None = None) -> None:
    with pytest.raises(RuleBroken) as e:
        g.append(env, at)
    assert e.value.code == code, e.value


def test_a_score_signed_by_a_key_never_enrolled_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, d = log
    g.append(score(d).sign(keys["harness"]))
    refused(g, score(d).sign(keys["stranger"]), "unknown_signer")


def test_a_score_signed_by_a_curator_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, d = log
    refused(g, score(d).sign(keys["cur-a"]), "role_not_permitted")


def test_a_case_co_signed_by_two_keys_of_one_curator_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, _ = log
    second = SigningKey.generate("cur-a-2")
    # Another key of the same person names the handle their identity has (the door
    # refuses a new handle for it: `handle_value_bound`), beside the identity again.
    handle = g.state.principals[keys["cur-a"].key_id]["identity"]
    g.append(ev.PrincipalEnrolled(second.public_key_b64, handle, ["curator"], identity_name="cur-a@example.org").sign(g.op))
    d, bound = ev.CaseDraft("case-2", "case 2", "positive", "medium", "held-out", digest("case-2"), digest("cassette-2")).bind()
    env = ev.CaseAdded.cosigned("tc", d, source="curated", source_ref="bench", added_at="2026-11-20T00:00:00Z",
                                added_by=keys["cur-a"], reviewed_by=second).sign(keys["cur-a"], bound=[bound])
    refused(g, env, "cosigners_not_distinct")


def test_a_case_whose_co_signature_is_over_another_digest_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, _ = log
    d, bound = ev.CaseDraft("case-3", "case 3", "positive", "medium", "held-out", digest("case-3"), digest("cassette-3")).bind()
    body = ev.CaseAdded.cosigned("tc", d, source="curated", source_ref="bench", added_at="2026-11-20T00:00:00Z",
                                 added_by=keys["cur-a"], reviewed_by=keys["cur-b"]).body()
    body["case_digest"] = digest("swapped")
    refused(g, sign_payload(keys["cur-a"], "case.added", body, bound=[bound]), "cosignature_invalid")


def test_a_score_of_a_retired_case_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, d = log
    g.append(ev.CaseRetired.cosigned(d.case_id, d.case_digest, "superseded", retired_by=keys["cur-a"], reviewed_by=keys["cur-b"]).sign(keys["cur-b"]))
    refused(g, score(d).sign(keys["harness"]), "case_not_active")


def test_a_score_with_a_poisoned_case_digest_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, d = log
    poisoned = ev.CaseDraft(d.case_id, d.title, d.disposition, d.difficulty, d.curation_class, digest("poison"), d.cassette_digest)
    refused(g, score(poisoned).sign(keys["harness"]), "case_digest_mismatch")


def test_an_envelope_appended_twice_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, d = log
    env = score(d).sign(keys["harness"])
    g.append(env)
    refused(g, env, "envelope_id_reused")


def test_a_sequencing_time_that_goes_back_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, d = log
    refused(g, score(d).sign(keys["harness"]), "sequenced_at_decreased", at=g.at - 1)


def test_a_tier_apply_in_the_log_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, _ = log
    refused(g, ev.TierApply("tc", "silver").sign(keys["harness"]), "promotion_must_be_human_authorized")


def test_a_revoked_harness_writes_nothing(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, d = log
    g.append(ev.PrincipalRevoked(keys["harness"].key_id, "lost").sign(g.op))
    refused(g, score(d).sign(keys["harness"]), "signer_revoked")


# --- the switch to schema 2 (docs/PRIVACY.md) -------------------------------------------


def test_the_first_schema_2_entry_switches_the_log_and_a_schema_1_entry_after_it_breaks_the_rules() -> None:
    """A log written before the switch keeps its schema-1 leaves, values in clear; its
    first schema-2 entry switches it, and from then on a schema-1 entry is one no honest
    ledger appends (`schema_superseded`). A committed value is not held to the text rule
    in replay: it was checked at the door."""
    g = Log(schema=1)
    cur = (SigningKey.generate("cur-a"), SigningKey.generate("cur-b"))
    for k in cur:
        g.append(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", ["curator"]).sign(g.op, schema=1))
    g.append(ev.TaskClassRegistered(task_class="tc", silver=ev.TierRule(1, 0.5), gold=ev.TierRule(2, 0.9), failure_modes=[],
                                    breakdown_keys=[], rubric_digest=digest("rubric")).sign(g.op, schema=1))

    def case(n: int, schema: int) -> Envelope:
        d = ev.CaseDraft(f"case-{n}", f"case {n}", "negative", "hard", "held-out", digest(f"case-{n}"), digest(f"cassette-{n}"))
        return ev.CaseAdded.cosigned("tc", d, source="curated", source_ref=f"bench/{n}", added_at="2026-11-20T00:00:00Z",
                                     added_by=cur[0], reviewed_by=cur[1]).sign(cur[0], schema=schema)

    clear = case(1, 1)
    assert clear.disclosures == () and json.loads(clear.payload)["event"]["body"]["title"] == "case 1"
    g.append(clear)
    assert g.state.commitments_from is None
    committed = case(2, 2)
    assert json.loads(committed.payload)["event"]["body"]["title"].keys() == {"_sd"}
    switch = g.state.size
    g.append(committed)
    assert g.state.commitments_from == switch
    refused(g, case(3, 1), "schema_superseded")
    g.append(case(3, 2))
    # The switch is part of the state a replica saves.
    assert State.from_json(json.loads(json.dumps(g.state.to_json()))).commitments_from == switch


def test_a_log_in_schema_2_from_its_first_entry_refuses_schema_1() -> None:
    g = Log(schema=2)
    assert g.state.commitments_from == 0 and g.state.handles_from is None and g.state.schema() == 2
    refused(g, ev.PrincipalRevoked(g.op.key_id, "rotated").sign(g.op, schema=1), "schema_superseded")


def test_a_log_in_schema_3_from_its_first_entry_refuses_schemas_1_and_2() -> None:
    """As `ledger init` writes a log now: genesis in schema 3, its identity a handle."""
    g = Log()
    assert g.state.commitments_from == 0 and g.state.handles_from == 0 and g.state.schema() == 3
    assert g.state.handles == {f"identity/{g.state.principals[g.op.key_id]['identity']}": 0}
    for schema in (1, 2):
        with pytest.raises(RuleBroken) as e:
            g.append(ev.PrincipalRevoked(g.op.key_id, "rotated").sign(g.op, schema=schema))
        assert (e.value.code, e.value.field) == ("schema_superseded", "schema")
        assert "from entry 0 on: sign schema 3" in e.value.reason


def test_the_first_schema_3_entry_switches_the_log_and_a_schema_2_entry_after_it_breaks_the_rules() -> None:
    """A log in schema 2 keeps its identifiers in clear; its first schema-3 entry switches
    it, and from then on a schema-2 entry is one no honest ledger appends. The ids in
    clear from before the switch stay valid handles of their own values: a schema-3
    entry names such a case by its id, and a key enrolled again names its identity."""
    g = Log(schema=2)
    cur = (SigningKey.generate("cur-a"), SigningKey.generate("cur-b"))
    for k in cur:
        g.append(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", ["curator"]).sign(g.op, schema=2))
    g.append(ev.TaskClassRegistered(task_class="tc", silver=ev.TierRule(1, 0.5), gold=ev.TierRule(2, 0.9), failure_modes=[],
                                    breakdown_keys=[], rubric_digest=digest("rubric")).sign(g.op, schema=2))

    def case(n: int, schema: int) -> Envelope:
        d = ev.CaseDraft(f"case-{n}", f"case {n}", "negative", "hard", "held-out", digest(f"case-{n}"), digest(f"cassette-{n}"))
        bound: list[Any] = []
        if schema == 3:
            d, b = d.bind()
            bound.append(b)
        return ev.CaseAdded.cosigned("tc", d, source="curated", source_ref=f"bench/{n}", added_at="2026-11-20T00:00:00Z",
                                     added_by=cur[0], reviewed_by=cur[1]).sign(cur[0], schema=schema, bound=bound)

    g.append(case(1, 2))
    assert g.state.handles_from is None and "case-1" in g.state.cases
    switch = g.state.size
    handled = case(2, 3)
    g.append(handled)
    assert g.state.handles_from == switch and g.state.schema() == 3
    assert handled.handle is not None and g.state.handle_origin("case", handled.handle) == switch
    assert g.state.handles == {f"case/{handled.handle}": switch}
    refused(g, case(3, 2), "schema_superseded")
    # Values in clear from before the switch name themselves.
    retired = ev.CaseRetired.cosigned("case-1", digest("case-1"), "superseded", retired_by=cur[0], reviewed_by=cur[1])
    g.append(retired.sign(cur[0]))
    # Another key of a person enrolled in clear: the identifier is the identity (its own
    # handle), the companion its commitment, made first (`bind`) since a companion in
    # clear equal to its identifier is a value named first, given a fresh handle.
    again = SigningKey.generate("cur-a-2")
    fresh = ev.PrincipalEnrolled(again.public_key_b64, "cur-a@example.org", ["curator"], identity_name="cur-a@example.org")
    assert fresh.sign(g.op).handle != "cur-a@example.org"
    b = disclose.bind("identity_name", "cur-a@example.org")
    body = dict(fresh.body(), identity_name={"_sd": b.handle})
    env = sign_payload(g.op, "principal.enrolled", body, bound=[b])
    assert env.handle == "cur-a@example.org" and env.disclosures == (b.disclosure,)
    g.append(env)
    assert g.state.handles == {f"case/{handled.handle}": switch}  # named again: no new handle
    # The switch and the handles are part of the state a replica saves.
    saved = State.from_json(json.loads(json.dumps(g.state.to_json())))
    assert (saved.handles_from, saved.handles, saved.schema()) == (switch, g.state.handles, 3)


def test_a_redaction_must_name_a_committed_field_of_an_earlier_entry_by_its_leaf_hash_once(
    log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]
) -> None:
    from evidence_ledger.merkle import leaf_hash

    g, _, _ = log
    m = (SigningKey.generate("maint-a"), SigningKey.generate("maint-b"))
    for k in m:
        g.append(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", ["maintainer"]).sign(g.op))
    case = next(i for i, leaf in enumerate(g.leaves) if decode_leaf(leaf).kind == "case.added")
    lh = leaf_hash(g.leaves[case]).hex()

    def redact(field: str, entry: int = case, at: str = lh) -> Envelope:
        return ev.FieldRedacted.cosigned(entry, at, field, "pasted by mistake", requested_by=m[0], confirmed_by=m[1]).sign(m[0])

    refused(g, redact("case_id"), "redaction_field_not_committed")
    refused(g, redact("title", at="0" * 64), "redaction_target_mismatch")
    refused(g, redact("title", entry=g.state.size), "redaction_target_mismatch")
    forged = ev.FieldRedacted(case, lh, "title", "pasted", ev.CoSignature.sign(m[0], b"another statement"),
                              ev.CoSignature.sign(m[1], b"another statement"))
    refused(g, forged.sign(m[0]), "cosignature_invalid")
    g.append(redact("title"))
    assert (case, "title") in g.state.redactions
    refused(g, redact("title"), "already_redacted")
    g.append(redact("difficulty"))


# --- handles (schema 3; docs/PRIVACY.md, "Handles"): `handle_not_derived` ----------------
#
# Where a case id, identity or workflow id is named first, the identifier must be the
# digest of the commitment beside it or a handle the log already holds for that class.
# Each attack below commits the value beside the identifier as an honest client does
# (`bind`, so the identifier is kept as given) and signs everything else correctly.


def case_under(g: Log, keys: dict[str, SigningKey], handle: str, name: str, *extra: disclose.Bound) -> Envelope:
    """A case named `name`, committed beside the identifier `handle`, its provenance
    co-signed over `handle` by both curators."""
    b = disclose.bind("case_name", name)
    d = ev.CaseDraft(handle, f"case {name}", "positive", "medium", "held-out", digest(name), digest(f"cassette {name}"), case_name=name)
    event = ev.CaseAdded.cosigned("tc", d, source="curated", source_ref="bench", added_at="2026-11-20T00:00:00Z",
                                  added_by=keys["cur-a"], reviewed_by=keys["cur-b"])
    return event.sign(keys["cur-a"], bound=[b, *extra])


def not_derived(g: Log, env: Envelope, field: str) -> None:
    with pytest.raises(RuleBroken) as e:
        g.append(env)
    assert (e.value.code, e.value.field) == ("handle_not_derived", f"event.body.{field}"), e.value


def test_a_case_named_first_by_its_own_handle_is_accepted(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    """The control: the identifier is the digest of the commitment beside it."""
    g, keys, _ = log
    d, bound = ev.CaseDraft("GHSA-2026-0001", "t", "positive", "medium", "held-out", digest("a"), digest("b")).bind()
    ok = ev.CaseAdded.cosigned("tc", d, source="curated", source_ref="bench", added_at="2026-11-20T00:00:00Z",
                               added_by=keys["cur-a"], reviewed_by=keys["cur-b"]).sign(keys["cur-a"], bound=[bound])
    g.append(ok)
    assert g.state.handle_origin("case", d.case_id) == g.state.size - 1 and g.state.handle_known("case", d.case_id)


def test_attack_a_case_named_by_a_handle_no_event_gave_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, _ = log
    stranger = disclose.bind("case_name", "GHSA-2026-0002").handle  # the digest of another disclosure
    not_derived(g, case_under(g, keys, stranger, "GHSA-2026-0002"), "case_id")


def test_attack_a_case_id_in_clear_beside_its_commitment_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    """The name in the identifier, as schema 2 wrote it: in schema 3 that names no
    handle the log holds (the log has no such id in clear from before its switch)."""
    g, keys, _ = log
    not_derived(g, case_under(g, keys, "GHSA-2026-0003", "GHSA-2026-0003x"), "case_id")


def test_attack_a_case_named_by_another_fields_commitment_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    """A digest beside it, but the title's, not the companion's."""
    g, keys, _ = log
    title = disclose.bind("title", "case GHSA-2026-0004")
    env = case_under(g, keys, title.handle, "GHSA-2026-0004", title)
    assert env.body["title"] == {"_sd": title.handle}
    not_derived(g, env, "case_id")


def test_attack_a_case_named_by_a_handle_of_another_class_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    """A handle the log holds, but an identity's: handles are known by class."""
    g, keys, _ = log
    identity = g.state.principals[keys["cur-a"].key_id]["identity"]
    assert g.state.handle_known("identity", identity) and not g.state.handle_known("case", identity)
    not_derived(g, case_under(g, keys, identity, "GHSA-2026-0005"), "case_id")


def test_attack_a_proposal_drafting_a_handle_no_event_gave_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, keys, _ = log
    rec = SigningKey.generate("reconciler")
    g.append(ev.PrincipalEnrolled.of(rec, "reconciler@example.org", ["reconciler"]).sign(g.op))
    b = disclose.bind("draft.case_name", "INC-7")
    stranger = disclose.bind("draft.case_name", "INC-7").handle
    d = ev.CaseDraft(stranger, "t", "negative", "hard", "corpus-derived", digest("p"), digest("q"), case_name="INC-7")
    not_derived(g, ev.CaseProposed("prop-7", "tc", d, "outcome-ledger INC-7").sign(rec, bound=[b]), "draft.case_id")


def test_attack_a_key_enrolled_under_an_identity_handle_no_event_gave_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, _, _ = log
    k = SigningKey.generate("mallory")
    b = disclose.bind("identity_name", "mallory@example.org")
    stranger = disclose.bind("identity_name", "cur-a@example.org").handle
    env = ev.PrincipalEnrolled(k.public_key_b64, stranger, ["curator"], identity_name="mallory@example.org").sign(g.op, bound=[b])
    not_derived(g, env, "identity")


def test_attack_a_capability_minted_for_a_workflow_handle_no_event_gave_breaks_the_rules(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    g, _, _ = log
    gate = SigningKey.generate("gate")
    g.append(ev.PrincipalEnrolled.of(gate, "gate@example.org", ["gate"]).sign(g.op))
    b = disclose.bind("workflow_name", "wf-1")
    stranger = disclose.bind("workflow_name", "wf-1").handle
    cap = ev.CapabilityMinted("cap-1", stranger, format_micros(g.at), ev.CheckpointRef(g.state.size, g.fold.root().hex()),
                              "2099-01-01T00:00:00Z", workflow_name="wf-1")
    not_derived(g, cap.sign(gate, bound=[b]), "workflow_id")


def test_the_same_value_named_first_again_carries_the_handle_it_has(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> None:
    """A case proposed again after its proposal was rejected names the handle the first
    proposal gave it, beside a fresh commitment to its name; a workflow's second
    capability names the first one's handle; the example written names it too. None
    gives a new handle."""
    g, keys, _ = log
    rec, gate, writer = SigningKey.generate("reconciler"), SigningKey.generate("gate"), SigningKey.generate("writer")
    for k, role in ((rec, "reconciler"), (gate, "gate"), (writer, "rag-writer")):
        g.append(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", [role]).sign(g.op))
    d = ev.CaseDraft("INC-8", "t", "negative", "hard", "corpus-derived", digest("p"), digest("q"))
    first = ev.CaseProposed("prop-8", "tc", d, "outcome-ledger INC-8").sign(rec)
    g.append(first)
    assert first.handle is not None and g.state.handle_origin("case", first.handle) == g.state.size - 1
    g.append(ev.ProposalRejected("prop-8", "not reproducible").sign(keys["cur-a"]))
    again = ev.CaseProposed("prop-8b", "tc", replace(d, case_id=first.handle, case_name="INC-8"), "outcome-ledger INC-8").sign(rec)
    assert again.handle == first.handle and again.body["draft"]["case_name"] != first.body["draft"]["case_name"]
    handles = dict(g.state.handles)
    g.append(again)
    assert g.state.handles == handles

    def mint(cap: str, workflow: str, name: Optional[str] = None) -> Envelope:
        ref = ev.CheckpointRef(g.state.size, g.fold.root().hex())
        return ev.CapabilityMinted(cap, workflow, format_micros(g.at), ref, "2099-01-01T00:00:00Z", workflow_name=name).sign(gate)

    one = mint("cap-1", "wf-1")
    g.append(one)
    assert one.handle is not None
    g.append(mint("cap-2", one.handle, "wf-1"))
    g.append(ev.RagExampleWritten("cap-2", one.handle, digest("example")).sign(writer))
    with pytest.raises(RuleBroken) as e:
        g.append(ev.RagExampleWritten("cap-1", "wf-1", digest("example")).sign(writer))
    assert e.value.code == "capability_workflow_mismatch"  # later events name the handle, never the value


# --- a recommendation cites its evidence by a tree, or (an older entry) by a list ----------

REFS = [{"index": 5, "leaf_hash": "aa" * 32}, {"index": 17, "leaf_hash": "bb" * 32}]


@pytest.fixture()
def gated(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft]) -> tuple[Log, SigningKey]:
    g, _, _ = log
    ledger = SigningKey.generate("ledger")
    g.append(ev.PrincipalEnrolled.of(ledger, "ledger@example.org", ["ledger"]).sign(g.op))
    return g, ledger


def recommendation(g: Log, **fields: Any) -> dict[str, Any]:
    """A `promotion.recommended` body citing `REFS` by their tree, with `fields` replaced
    (a field given as `...` is left out)."""
    count, root = merkle.evidence_tree(REFS)
    body = {
        "task_class": "tc", "current_tier": "bronze", "recommended_tier": "silver",
        "evidence": [], "evidence_tree": {"count": count, "root": root},
        "rationale": [{"rule": "silver.enough_held_out_cases", "holds": True, "detail": "2 >= 1"}],
        "checkpoint": {"size": g.state.size, "root": "cd" * 32}, "requires_human_approval": True,
        "request_id": "promotion-requested-1",
    }
    body.update(fields)
    return {k: v for k, v in body.items() if v is not ...}


def recommendation_refused(g: Log, ledger: SigningKey, body: dict[str, Any], code: str, field: str) -> None:
    with pytest.raises(RuleBroken) as e:
        g.append(sign_payload(ledger, "promotion.recommended", body))
    assert (e.value.code, e.value.field) == (code, field), e.value


def test_a_recommendation_citing_its_evidence_by_a_tree_or_by_a_list_is_accepted(gated: tuple[Log, SigningKey]) -> None:
    g, ledger = gated
    first = g.state.size
    g.append(sign_payload(ledger, "promotion.recommended", recommendation(g)))
    g.append(sign_payload(ledger, "promotion.recommended", recommendation(g, evidence=REFS, evidence_tree=...)))
    g.append(sign_payload(ledger, "promotion.recommended", recommendation(g, evidence=[], evidence_tree=...)))
    assert sorted(g.state.recommendations) == [first, first + 1, first + 2]


def test_a_recommendation_with_both_a_tree_and_a_list_breaks_the_rules(gated: tuple[Log, SigningKey]) -> None:
    g, ledger = gated
    recommendation_refused(g, ledger, recommendation(g, evidence=REFS), "invalid_value", "event.body.evidence")
    # Checked after the tier, before the root and the checkpoint.
    recommendation_refused(g, ledger, recommendation(g, evidence=REFS, current_tier="gold"), "tier_mismatch", "event.body.current_tier")
    recommendation_refused(g, ledger, recommendation(g, evidence=REFS, evidence_tree={"count": 2, "root": "x"}),
                           "invalid_value", "event.body.evidence")


@pytest.mark.parametrize("root", ["AA" * 32, "aa" * 31, "aa" * 33, "sha256:" + "aa" * 32, "gg" * 32, ""])
def test_a_tree_root_that_is_not_64_lowercase_hex_digits_breaks_the_rules(gated: tuple[Log, SigningKey], root: str) -> None:
    g, ledger = gated
    tree = {"count": 2, "root": root}
    recommendation_refused(g, ledger, recommendation(g, evidence_tree=tree), "invalid_digest", "event.body.evidence_tree.root")
    # Checked before the checkpoint.
    unknown = {"size": g.state.size + 5, "root": "cd" * 32}
    recommendation_refused(g, ledger, recommendation(g, evidence_tree=tree, checkpoint=unknown), "invalid_digest",
                           "event.body.evidence_tree.root")
    recommendation_refused(g, ledger, recommendation(g, checkpoint=unknown), "checkpoint_unknown", "event.body.checkpoint")


@pytest.mark.parametrize(
    "fields, code, field",
    [
        ({"evidence_tree": {"count": 2, "root": "aa" * 32, "depth": 1}}, "unknown_field", "event.body.evidence_tree.depth"),
        ({"evidence_tree": {"count": 2}}, "missing_field", "event.body.evidence_tree.root"),
        ({"evidence_tree": {"count": -1, "root": "aa" * 32}}, "invalid_value", "event.body.evidence_tree.count"),
        ({"evidence_tree": {"count": 2.5, "root": "aa" * 32}}, "invalid_type", "event.body.evidence_tree.count"),
        ({"evidence_tree": ["aa" * 32]}, "invalid_type", "event.body.evidence_tree"),
        # Absent or a tree, never `null` (the door's serde reads a present value as a tree).
        ({"evidence_tree": None}, "invalid_type", "event.body.evidence_tree"),
        ({"evidence": REFS, "evidence_tree": None}, "invalid_type", "event.body.evidence_tree"),
        ({"evidence_trees": {"count": 2, "root": "aa" * 32}}, "unknown_field", "event.body.evidence_trees"),
        ({"evidence": ...}, "missing_field", "event.body.evidence"),
        ({"request_id": ...}, "missing_field", "event.body.request_id"),
    ],
)
def test_the_tree_is_typed_and_every_other_field_still_required(
    gated: tuple[Log, SigningKey], fields: dict[str, Any], code: str, field: str
) -> None:
    g, ledger = gated
    recommendation_refused(g, ledger, recommendation(g, **fields), code, field)


# --- a recommendation states the settings its projection was computed with ----------------

STATED = {"window_seconds": 30 * 24 * 3600, "confidence": 0.95, "resamples": 2000}


def stated(**fields: Any) -> dict[str, Any]:
    """`STATED` with `fields` replaced (a field given as `...` is left out)."""
    return {k: v for k, v in {**STATED, **fields}.items() if v is not ...}


def test_a_recommendation_stating_settings_a_projection_can_use_is_accepted(gated: tuple[Log, SigningKey]) -> None:
    g, ledger = gated
    first = g.state.size
    g.append(sign_payload(ledger, "promotion.recommended", recommendation(g, settings=stated())))
    # The bounds; an entry that states none.
    g.append(sign_payload(ledger, "promotion.recommended",
                          recommendation(g, settings=stated(window_seconds=1, confidence=0.5, resamples=100_000))))
    g.append(sign_payload(ledger, "promotion.recommended",
                          recommendation(g, settings=stated(confidence=math.nextafter(1.0, 0.0), resamples=1))))
    g.append(sign_payload(ledger, "promotion.recommended", recommendation(g, settings=...)))
    assert sorted(g.state.recommendations) == [first, first + 1, first + 2, first + 3]


@pytest.mark.parametrize(
    "settings, field",
    [
        (stated(window_seconds=0), "window_seconds"),
        (stated(window_seconds=-(2**53 - 1)), "window_seconds"),
        (stated(confidence=1.0), "confidence"),
        (stated(confidence=0.0), "confidence"),
        (stated(confidence=-0.5), "confidence"),
        (stated(confidence=math.nextafter(0.0, -1.0)), "confidence"),
        # An integer is a number (serde reads it as an f64), out of range here.
        (stated(confidence=1), "confidence"),
        (stated(resamples=0), "resamples"),
        (stated(resamples=100_001), "resamples"),
        (stated(resamples=2**53 - 1), "resamples"),
        # Checked in order: the window, the confidence, the resamples.
        (stated(window_seconds=0, confidence=1.0, resamples=0), "window_seconds"),
        (stated(confidence=1.0, resamples=0), "confidence"),
    ],
)
def test_a_recommendation_stating_settings_no_projection_uses_breaks_the_rules(
    gated: tuple[Log, SigningKey], settings: dict[str, Any], field: str
) -> None:
    g, ledger = gated
    recommendation_refused(g, ledger, recommendation(g, settings=settings), "invalid_value", f"event.body.settings.{field}")
    # Checked after the tier, before the evidence and the checkpoint.
    recommendation_refused(g, ledger, recommendation(g, settings=settings, current_tier="gold"), "tier_mismatch",
                           "event.body.current_tier")
    unknown = {"size": g.state.size + 5, "root": "cd" * 32}
    recommendation_refused(g, ledger, recommendation(g, settings=settings, evidence=REFS, evidence_tree={"count": 2, "root": "x"},
                                                     checkpoint=unknown), "invalid_value", f"event.body.settings.{field}")


@pytest.mark.parametrize(
    "settings, code, field",
    [
        # Absent or settings, never `null`.
        (None, "invalid_type", "event.body.settings"),
        ([30, 0.95, 2000], "invalid_type", "event.body.settings"),
        (stated(window_seconds=1.5), "invalid_type", "event.body.settings.window_seconds"),
        (stated(window_seconds=2592000.0), "invalid_type", "event.body.settings.window_seconds"),
        (stated(window_seconds="2592000"), "invalid_type", "event.body.settings.window_seconds"),
        (stated(confidence="0.95"), "invalid_type", "event.body.settings.confidence"),
        (stated(confidence=True), "invalid_type", "event.body.settings.confidence"),
        (stated(confidence=None), "invalid_type", "event.body.settings.confidence"),
        (stated(resamples=2000.0), "invalid_type", "event.body.settings.resamples"),
        (stated(resamples=True), "invalid_type", "event.body.settings.resamples"),
        (stated(resamples=...), "missing_field", "event.body.settings.resamples"),
        (stated(window_seconds=...), "missing_field", "event.body.settings.window_seconds"),
        (stated(seed=7), "unknown_field", "event.body.settings.seed"),
    ],
)
def test_the_settings_are_typed(gated: tuple[Log, SigningKey], settings: Any, code: str, field: str) -> None:
    g, ledger = gated
    recommendation_refused(g, ledger, recommendation(g, settings=settings), code, field)


# --- a replica holds each signed recommendation to its own view -------------------------


def consistency(m: int, hashes: list[bytes], whole: bool = True) -> list[bytes]:
    """The RFC 6962 consistency proof from the first `m` of `hashes` to all of them."""
    n = len(hashes)
    if m == n:
        return [] if whole else [merkle.root_of(hashes)]
    k = 1 << ((n - 1).bit_length() - 1)
    if m <= k:
        return consistency(m, hashes[:k], whole) + [merkle.root_of(hashes[k:])]
    return consistency(m - k, hashes[k:], False) + [merkle.root_of(hashes[:k])]


class Served:
    """The in-memory log served as a server serves it (pages of entries, consistency
    proofs), counting where each page request starts."""

    def __init__(self, g: Log) -> None:
        self.g = g
        self.starts: list[int] = []

    def hashes(self, n: int) -> list[bytes]:
        return [merkle.leaf_hash(leaf) for leaf in self.g.leaves[:n]]

    def entries(self, start: int, limit: int = 1000) -> list[EntryView]:
        self.starts.append(start)
        chain, page = merkle.GENESIS_CHAIN, []
        for i, leaf in enumerate(self.g.leaves[: start + limit]):
            chain = merkle.chain_hash(chain, leaf)
            if i >= start:
                d = decode_leaf(leaf)
                page.append(EntryView(i, base64.b64encode(leaf).decode(), merkle.leaf_hash(leaf).hex(), chain.hex(),
                                      format_micros(d.sequenced_at), d.envelope.id, d.kind, d.envelope.keyid, d.payload))
        return page

    def consistency_proof(self, first: int, second: int) -> list[bytes]:
        return consistency(first, self.hashes(second))

    def checkpoint(self) -> Checkpoint:
        n = len(self.g.leaves)
        return Checkpoint("offline", n, merkle.root_of(self.hashes(n)), "")


def follow(g: Log, replica: Replica, served: Served | None = None) -> Served:
    served = served or Served(g)
    replica.follow(cast(Client, served), served.checkpoint())
    return served


def checking(tmp_path: Path, name: str = "r", step: int = STEP) -> Replica:
    r = Replica(tmp_path / name, [])
    r.step = step
    r.check_recommendations_with(Settings())
    return r


def view_at(g: Log, size: int, now: int, settings: Settings = Settings()) -> dict[str, Any]:
    """The package's own fold of the first `size` entries: the view of `tc` at `now`."""
    p = Projection()
    for i, leaf in enumerate(g.leaves[:size]):
        p.apply(i, leaf)
    return p.view("tc", now, settings, size, p.root())


def recommended(g: Log, ledger: SigningKey, *, size: int | None = None, now: int | None = None, listed: bool = False,
                sequenced: int | None = None, computed_with: Settings | None = None, **fields: Any) -> int:
    """Appends the `promotion.recommended` the fold gives at `size` (the log's size by
    default) and `now` (just after the last entry by default), with `computed_with`
    (stated as `settings`; by default the agreed ones, unstated), citing its evidence by tree
    (`listed`: by an `evidence` list, as an older entry does), with `fields` replaced;
    returns its index. It is sequenced at `sequenced`, by default as an honest ledger
    sequences it: no earlier than `now` (which it states no earlier than the last entry
    it rests on, and which the ledger reads before it appends)."""
    size = g.state.size if size is None else size
    now = g.at + 1 if now is None else now
    sequenced = max(now, g.at + 1) if sequenced is None else sequenced
    v = view_at(g, size, now, computed_with or Settings())
    refs = [{"index": e["index"], "leaf_hash": e["leaf_hash"]} for e in v["evidence"]]
    count, root = merkle.evidence_tree(refs)
    body: dict[str, Any] = {
        "task_class": "tc", "current_tier": v["tier"], "recommended_tier": v["recommendation"]["recommended_tier"],
        "evidence": refs if listed else [], "evidence_tree": ... if listed else {"count": count, "root": root},
        "settings": ... if computed_with is None else dataclasses.asdict(computed_with),
        "rationale": v["recommendation"]["rationale"], "checkpoint": {"size": size, "root": v["root"]},
        "requires_human_approval": True, "request_id": "promotion-requested-1",
    }
    body.update(fields)
    index = g.state.size
    g.append(sign_payload(ledger, "promotion.recommended", {k: x for k, x in body.items() if x is not ...},
                          issued_at=format_micros(now)), sequenced)
    return index


DAY = 24 * 3600 * 1_000_000


@pytest.fixture()
def scored(log: tuple[Log, dict[str, SigningKey], ev.CaseDraft], gated: tuple[Log, SigningKey]) -> tuple[Log, SigningKey, Callable[[float], int]]:
    """The log with the ledger's key enrolled and case 1 scored 0.9; the third item
    appends another score of case 1 and returns its index."""
    g, keys, d = log
    _, ledger = gated

    def rescore(value: float) -> int:
        g.append(score(d, value).sign(keys["harness"]))
        return g.state.size - 1

    rescore(0.9)
    return g, ledger, rescore


def test_honest_recommendations_equal_the_replicas_view_at_their_checkpoint_and_time_and_are_counted(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path
) -> None:
    g, ledger, rescore = scored
    recommended(g, ledger)
    before = g.state.size
    newer = rescore(0.3)
    # Its checkpoint is before the newer score: the view there cites the older one.
    late = recommended(g, ledger, size=before)
    assert view_at(g, before, g.at)["evidence"] != view_at(g, late, g.at)["evidence"]
    # An older entry lists its evidence, without `evidence_tree`.
    recommended(g, ledger, listed=True)
    assert view_at(g, g.state.size, g.at)["evidence"][0]["index"] == newer
    # Issued (and so sequenced) 31 days after the last score: every score is out of its window.
    recommended(g, ledger, now=g.at + 31 * DAY)
    assert view_at(g, g.state.size, g.at)["evidence"] == []
    # Its time is exactly the sequencing time of the last entry it rests on (the lower
    # bound), of itself (the upper one), or both.
    rests_on = g.at
    recommended(g, ledger, size=g.state.size, now=rests_on, sequenced=rests_on + DAY)
    recommended(g, ledger, now=g.at + 5, sequenced=g.at + 5)
    recommended(g, ledger, now=g.at, sequenced=g.at)
    for name, step in (("whole", STEP), ("by-three", 3)):
        replica = checking(tmp_path, name, step)
        assert follow(g, replica).starts[0] == 0
        assert replica.recommendations == 7 and replica.size == g.state.size and replica.root() == g.fold.root()
        assert replica.fold.to_json() == g.fold.to_json()
    # Without the agreed settings nothing is checked, as before.
    plain = Replica(tmp_path / "plain", [])
    follow(g, plain)
    assert plain.recommendations is None and plain.fold.to_json() == g.fold.to_json()


def forge_tier(g: Log, ledger: SigningKey) -> int:
    return recommended(g, ledger, recommended_tier="silver")


def forge_tree(g: Log, ledger: SigningKey) -> int:
    count, root = merkle.evidence_tree([])
    return recommended(g, ledger, evidence_tree={"count": count, "root": root})


def forge_tree_root(g: Log, ledger: SigningKey) -> int:
    return recommended(g, ledger, evidence_tree={"count": 1, "root": "ab" * 32})


def forge_list(g: Log, ledger: SigningKey) -> int:
    return recommended(g, ledger, listed=True, evidence=[{"index": 1, "leaf_hash": merkle.leaf_hash(g.leaves[1]).hex()}])


def forge_empty_list(g: Log, ledger: SigningKey) -> int:
    return recommended(g, ledger, listed=True, evidence=[])


def forge_rationale(g: Log, ledger: SigningKey) -> int:
    why = view_at(g, g.state.size, g.at + 1)["recommendation"]["rationale"]
    return recommended(g, ledger, rationale=[dict(o, holds=True) for o in why])


def forge_past_its_checkpoint(g: Log, ledger: SigningKey) -> int:
    """The body the log gives at its own index, citing an earlier checkpoint."""
    size = g.state.size - 1
    v = view_at(g, g.state.size, g.at + 1)
    count, root = merkle.evidence_tree(v["evidence"])
    return recommended(g, ledger, size=size, evidence_tree={"count": count, "root": root})


@pytest.mark.parametrize(
    "forge, part",
    [
        (forge_tier, "its recommended tier"),
        (forge_tree, "its evidence"),
        (forge_tree_root, "its evidence"),
        (forge_list, "its evidence"),
        (forge_empty_list, "its evidence"),
        (forge_rationale, "its rationale"),
        (forge_past_its_checkpoint, "its evidence"),
    ],
)
def test_a_signed_recommendation_the_log_does_not_give_fails_naming_its_entry(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path, forge: Callable[[Log, SigningKey], int], part: str
) -> None:
    g, ledger, rescore = scored
    recommended(g, ledger)
    rescore(0.3)
    index = forge(g, ledger)
    size = decode_leaf(g.leaves[index]).body["checkpoint"]["size"]
    replica = checking(tmp_path)
    with pytest.raises(Incomplete) as e:
        follow(g, replica)
    assert str(e.value) == f"the recommendation at entry {index}: {part}, not what the log up to size {size} gives"
    assert replica.recommendations == 1
    # A plain follow does not check it.
    follow(g, Replica(tmp_path / "plain", []))


WEEK = Settings(window_seconds=7 * 24 * 3600)


def test_a_recommendation_is_checked_with_the_settings_it_states_whatever_the_agreed_ones(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path
) -> None:
    g, ledger, rescore = scored
    # Issued eight days after the score: a week's window holds none (bronze), the agreed
    # 30 days hold it (silver).
    later = g.at + 8 * DAY
    tiers = [view_at(g, g.state.size, later, s)["recommendation"]["recommended_tier"] for s in (WEEK, Settings())]
    assert tiers == ["bronze", "silver"]
    recommended(g, ledger, now=later, computed_with=WEEK)
    recommended(g, ledger, computed_with=Settings())
    rescore(0.3)
    recommended(g, ledger, computed_with=Settings(window_seconds=1, confidence=0.5, resamples=100_000))
    recommended(g, ledger, size=g.state.size - 1, computed_with=Settings(confidence=0.8, resamples=1))
    # An entry that states none is checked with the agreed settings.
    recommended(g, ledger)
    for name, lag in (("folded-to", replay.LAG), ("folded-afresh", 1)):
        replica = checking(tmp_path, name)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(replay, "LAG", lag)
            follow(g, replica)
        assert replica.recommendations == 5


def forge_stated_week(g: Log, ledger: SigningKey) -> int:
    """Computed with the agreed settings, stating a week's window."""
    return recommended(g, ledger, now=g.at + 8 * DAY, settings=dataclasses.asdict(WEEK))


def forge_stated_agreed(g: Log, ledger: SigningKey) -> int:
    """Computed with a week's window, stating the agreed settings."""
    return recommended(g, ledger, now=g.at + 8 * DAY, computed_with=WEEK, settings=dataclasses.asdict(Settings()))


def forge_stated_none(g: Log, ledger: SigningKey) -> int:
    """Computed with a week's window, stating no settings (the agreed ones apply)."""
    return recommended(g, ledger, now=g.at + 8 * DAY, computed_with=WEEK, settings=...)


@pytest.mark.parametrize("forge", [forge_stated_week, forge_stated_agreed, forge_stated_none])
def test_a_recommendation_not_computed_with_the_settings_it_states_fails_naming_its_entry(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path, forge: Callable[[Log, SigningKey], int]
) -> None:
    g, ledger, _ = scored
    index = forge(g, ledger)
    replica = checking(tmp_path)
    with pytest.raises(Incomplete) as e:
        follow(g, replica)
    # A week's window holds no score: bronze; the agreed 30 days hold it: silver.
    assert str(e.value) == f"the recommendation at entry {index}: its recommended tier, not what the log up to size {index} gives"


@pytest.mark.parametrize("late", [False, True], ids=["in-time", "late"])
@pytest.mark.parametrize(
    "settings",
    [
        stated(window_seconds=0),
        stated(confidence=1.0),
        stated(confidence=0.0),
        stated(resamples=0),
        stated(resamples=100_001),
    ],
)
def test_a_recommendation_stating_settings_out_of_range_fails_the_replay_even_past_a_door_that_lets_it_in(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, Any], late: bool,
) -> None:
    """The rules refuse such an entry first (above); with a door that does not check the
    settings, the replay's own check fails it, after its time bounds (`late`: stated
    after it was sequenced) and before its view (it also recommends a tier the view
    does not give)."""
    g, ledger, _ = scored
    check = State._check_promotion_recommended

    def no_settings_checked(self: State, b: dict[str, Any], at: int, index: int, cite: Any) -> None:
        check(self, {k: v for k, v in b.items() if k != "settings"}, at, index, cite)

    monkeypatch.setattr(State, "_check_promotion_recommended", no_settings_checked)
    size = g.state.size
    now = g.at + 2 if late else None
    index = recommended(g, ledger, now=now, sequenced=g.at + 1, settings=settings, recommended_tier="gold")
    issued = decode_leaf(g.leaves[index]).payload["issued_at"]
    what = f"its time {issued} is after it was sequenced" if late else "its settings are out of range"
    with pytest.raises(Incomplete) as e:
        follow(g, checking(tmp_path))
    assert str(e.value) == f"the recommendation at entry {index}: {what}, not what the log up to size {size} gives"


@pytest.mark.parametrize("lag", [replay.LAG, 1], ids=["folded-to", "folded-afresh"])
@pytest.mark.parametrize("back", [0, 2], ids=["at-its-index", "further-back"])
@pytest.mark.parametrize("bound", ["after", "before"])
def test_a_recommendation_stating_a_time_out_of_its_bounds_fails_naming_its_entry(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    bound: str, back: int, lag: int,
) -> None:
    """Its time decides where the window starts: it must lie between the sequencing
    times of the last entry it rests on (entry size - 1) and of the recommendation
    itself. Each forged body is the view the log gives at the time it states, so only
    the time is out of bounds; with `lag` 1 and a checkpoint further back, the
    checkpoint is one the fold is past (folded afresh)."""
    g, ledger, rescore = scored
    monkeypatch.setattr(replay, "LAG", lag)
    recommended(g, ledger)
    for value in (0.3, 0.4, 0.5):
        rescore(value)
    size = g.state.size - back
    rests_on = decode_leaf(g.leaves[size - 1]).sequenced_at
    # Honest: stated exactly when the last entry it rests on was sequenced, and exactly
    # when it was itself sequenced.
    recommended(g, ledger, size=size, now=rests_on)
    recommended(g, ledger, size=size, now=g.at + 1, sequenced=g.at + 1)
    if bound == "after":
        index = recommended(g, ledger, size=size, now=g.at + 2, sequenced=g.at + 1)
        what = "is after it was sequenced"
    else:
        index = recommended(g, ledger, size=size, now=rests_on - 1)
        what = f"is before entry {size - 1} it rests on was sequenced"
    issued = decode_leaf(g.leaves[index]).payload["issued_at"]
    replica = checking(tmp_path)
    with pytest.raises(Incomplete) as e:
        follow(g, replica)
    assert str(e.value) == f"the recommendation at entry {index}: its time {issued} {what}, not what the log up to size {size} gives"
    assert replica.recommendations == 3
    # A plain follow does not check it.
    follow(g, Replica(tmp_path / "plain", []))


def test_the_last_entry_a_recommendation_rests_on_is_the_last_one_a_replica_saved(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path
) -> None:
    """A recommendation resting on exactly the entries a replica held when it was saved:
    the lower bound is the sequencing time its saved fold keeps."""
    g, ledger, rescore = scored
    replica = checking(tmp_path)

    def saved_and_opened() -> None:
        replica.fold = Projection.from_json(json.loads(json.dumps(replica.fold.to_json())))

    served = follow(g, replica)
    saved_and_opened()
    held = g.state.size
    rests_on = g.at
    rescore(0.3)
    recommended(g, ledger, size=held, now=rests_on)
    follow(g, replica, served)
    assert replica.recommendations == 1
    saved_and_opened()
    forged = recommended(g, ledger, size=replica.size, now=g.at - 1)
    issued = decode_leaf(g.leaves[forged]).payload["issued_at"]
    with pytest.raises(Incomplete) as e:
        follow(g, replica, served)
    assert str(e.value) == (f"the recommendation at entry {forged}: its time {issued} is before entry {forged - 1} it rests "
                            f"on was sequenced, not what the log up to size {forged} gives")


def test_a_checkpoint_the_fold_is_past_is_folded_afresh_from_the_first_entry(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g, ledger, rescore = scored
    replica = checking(tmp_path)
    served = follow(g, replica)
    held = g.state.size
    rescore(0.3)
    # Cites the log the last follow ended before: the fold is past it.
    recommended(g, ledger, size=held - 1)
    served.starts.clear()
    follow(g, replica, served)
    assert replica.recommendations == 1 and served.starts == [held, 0]
    assert replica.fold.to_json() == g.fold.to_json()
    # Within one follow, further back than the fold may lag.
    monkeypatch.setattr(replay, "LAG", 1)
    rescore(0.4)
    rescore(0.5)
    recommended(g, ledger, size=g.state.size - 2)
    served.starts.clear()
    follow(g, replica, served)
    assert replica.recommendations == 2 and served.starts[1:] == [0]
    forged = recommended(g, ledger, size=g.state.size - 3, recommended_tier="silver")
    with pytest.raises(Incomplete, match=f"the recommendation at entry {forged}: its recommended tier"):
        follow(g, replica, served)


def test_entries_served_again_that_are_not_the_replicas_are_a_fork(
    scored: tuple[Log, SigningKey, Callable[[float], int]], tmp_path: Path
) -> None:
    g, ledger, rescore = scored
    replica = checking(tmp_path)
    served = follow(g, replica)
    rescore(0.3)
    recommended(g, ledger, size=g.state.size - 2)

    class Lying(Served):
        def entries(self, start: int, limit: int = 1000) -> list[EntryView]:
            page = super().entries(start, limit)
            if start == 0:
                # The first entry served again holds the second one's leaf, which
                # folds to the same view (an enrolment): only its hash tells them apart.
                page[0] = dataclasses.replace(page[0], leaf=page[1].leaf)
            return page

    with pytest.raises(ForkDetected, match="are not the replica's"):
        follow(g, replica, Lying(g))
    assert served.starts == [0]
