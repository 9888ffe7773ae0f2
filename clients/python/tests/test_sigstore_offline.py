"""Co-signatures by Sigstore identity through the package's acceptance rules, with no
server (`api/tests/sigstore_approvals.rs`, replayed): a curator enrolled only by SAN and
OIDC issuer co-signs a case with a Sigstore bundle, verified offline by sigstore-python
against the trusted root the log records at that entry. The bundles come from the
SYNTHETIC Sigstore instance (`synthetic_sigstore`: a test CA, CT log and Rekor key whose
private keys are public), made at run time over the ledger's own statements; nothing in
the verifier is mocked, and no test reaches the network. Each attack breaks one thing
and is refused with the code the ledger refuses it with."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from evidence_ledger import RuleBroken, SigningKey, SigstoreUnavailable, canonical, sigstore_check
from evidence_ledger import events as ev
from evidence_ledger.acceptance import (
    MAY_APPEND,
    State,
    case_provenance_statement,
    sigstore_principal_id,
    sigstore_statement,
)
from evidence_ledger.envelope import PAYLOAD_TYPE, Envelope, decode_leaf, pae, sign_payload
from synthetic_sigstore import CURATOR, CURATOR_B, ISSUER, SYNTHETIC, TRUSTED_ROOT, Synthetic, Tamper

ORIGIN = "test.example/log"
OTHER_ISSUER = "https://other-issuer.example.test"
GOOD = (CURATOR, ISSUER)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check here is offline: a connection attempted fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a network connection was attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def synthetic() -> Synthetic:
    return Synthetic()


def digest(tag: str) -> str:
    import hashlib

    return "blake3:" + hashlib.sha256(tag.encode()).hexdigest()


class Log:
    """A log built in memory, entries checked and folded as a replica does: the operator,
    two curators enrolled by key, a task class, the trusted root (unless `root` is
    false), and the two synthetic curators enrolled by Sigstore identity,
    curator@example.org under `issuer` (`Fixture::enrolled`: one SAN is enrolled under
    one issuer only)."""

    def __init__(self, root: bool = True, origin: Optional[str] = None, issuer: str = ISSUER) -> None:
        self.state = State()
        self.origin = origin
        self.at = 1_790_000_000_000_000
        self.leaves: list[bytes] = []
        self.op = SigningKey.generate("op")
        self.append(ev.PrincipalEnrolled.of(self.op, "op@example.org", ["operator"]).sign(self.op))
        self.cur = (SigningKey.generate("cur-a"), SigningKey.generate("cur-b"))
        for k in self.cur:
            self.append(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", ["curator"]).sign(self.op))
        self.append(ev.TaskClassRegistered(task_class="tc", silver=ev.TierRule(1, 0.5), gold=ev.TierRule(2, 0.9),
                                           failure_modes=[], breakdown_keys=[], rubric_digest=digest("rubric")).sign(self.op))
        if root:
            self.append(root_event(self.op, ORIGIN, TRUSTED_ROOT))
        for who, identity, iss in (("sigstore-curator", CURATOR, issuer), ("sigstore-curator-b", CURATOR_B, ISSUER)):
            self.append(enrol_by_identity(self.op, who, identity, iss))

    def append(self, env: Envelope) -> None:
        self.at += 1
        leaf = env.leaf_bytes(self.at)
        d = decode_leaf(leaf)
        index = self.state.size
        self.state.check(d, index, lambda size, root, field: None, self.origin)
        self.state.apply(d, index)
        self.leaves.append(leaf)

    def fold(self, env: Envelope) -> None:
        """Folds `env` without checking it: what a state saved before a rule existed holds."""
        self.at += 1
        index = self.state.size
        self.state.apply(decode_leaf(env.leaf_bytes(self.at)), index)

    def refused(self, env: Envelope, code: str, field: str) -> RuleBroken:
        """`env` breaks the rules with `code` at a field ending in `field`; nothing folded."""
        size = self.state.size
        with pytest.raises(RuleBroken) as e:
            self.append(env)
        assert e.value.code == code, e.value
        assert e.value.field.endswith(field), e.value
        assert self.state.size == size
        return e.value


def root_event(op: SigningKey, origin: str, root: str) -> Envelope:
    return sign_payload(op, "sigstore.root_trusted", {"origin": origin, "trusted_root": root})


def enrol_by_identity(op: SigningKey, who: str, identity: str, issuer: str, roles: tuple[str, ...] = ("curator",)) -> Envelope:
    body = {"sigstore": {"identity": identity, "issuer": issuer}, "identity": f"{who}@people.example", "roles": list(roles)}
    return sign_payload(op, "principal.enrolled", body)


def by_bundle(signer: tuple[str, str], bundle: str) -> dict[str, str]:
    return {"key_id": sigstore_principal_id(*signer), "sigstore_bundle": bundle}


def case(name: str) -> tuple[ev.CaseDraft, Any]:
    return ev.CaseDraft(name, f"case {name}", "positive", "medium", "held-out", digest(name), digest(f"cassette {name}")).bind()


def case_body(g: Log, d: ev.CaseDraft) -> dict[str, Any]:
    """The case `d`, co-signed by the two curators' keys."""
    return ev.CaseAdded.cosigned("tc", d, source="curated", source_ref="bench", added_at="2026-11-20T00:00:00Z",
                                 added_by=g.cur[0], reviewed_by=g.cur[1]).body()


def statement(d: ev.CaseDraft) -> bytes:
    return case_provenance_statement(d.case_id, "2026-11-20T00:00:00Z", d.case_digest)


def reviewed(g: Log, s: Synthetic, name: str, reviewer: tuple[str, str] = GOOD, label: str = "curator",
             tamper: Tamper = Tamper.NONE, origin: str = ORIGIN, role: str = "curator") -> Envelope:
    """Case `name`, added by curator a's key and reviewed by `label`'s bundle (the synthetic
    certificate of that label) as the principal enrolled as `reviewer`, over the Sigstore
    statement for `origin` and `role`."""
    d, bound = case(name)
    body = case_body(g, d)
    body["provenance"]["reviewed_by"] = by_bundle(reviewer, s.sign(label, sigstore_statement(origin, role, statement(d)), tamper))
    return sign_payload(g.cur[0], "case.added", body, bound=[bound])


def test_the_replayed_co_signature_and_identity_shapes_are_the_published_schemas() -> None:
    from evidence_ledger.acceptance import BODIES, COSIG, Omittable

    docs = SYNTHETIC.parents[2] / "docs" / "schemas" / "events"
    for kind, schema, name in (("case.added", COSIG, "CoSignature"),
                               ("principal.enrolled", BODIES["principal.enrolled"]["sigstore"].inner, "SigstoreIdentity")):
        published = json.loads((docs / f"{kind}.json").read_text())["$defs"][name]
        assert set(schema) == set(published["properties"]), name
        assert {k for k, sub in schema.items() if not isinstance(sub, Omittable)} == set(published["required"]), name


# --- first: sigstore-python verifies the committed synthetic fixtures ------------------


def test_the_rekor_v2_fixture_verifies_at_its_rfc3161_time() -> None:
    """A Rekor v2 entry states no time: the timestamp authority's is the verified time."""
    bundle, msg = (SYNTHETIC / "rekor-v2.bundle.json").read_text(), (SYNTHETIC / "statement.txt").read_bytes()
    v = sigstore_check.verify_message(bundle, msg, CURATOR, ISSUER, TRUSTED_ROOT)
    assert (v.identity, v.issuer) == (CURATOR, ISSUER)
    t0 = int(json.loads((SYNTHETIC / "good.bundle.json").read_text())["verificationMaterial"]["tlogEntries"][0]["integratedTime"]) - 30
    assert v.signed_at == t0 + 6 * 60 + 30
    untimed = json.loads(bundle)
    del untimed["verificationMaterial"]["timestampVerificationData"]
    with pytest.raises(sigstore_check.Refusal):
        sigstore_check.verify_message(json.dumps(untimed), msg, CURATOR, ISSUER, TRUSTED_ROOT)


@pytest.mark.parametrize("fixture, identity, issuer, message, code", [
    ("good.bundle.json", CURATOR, ISSUER, "statement.txt", None),
    ("second-curator.bundle.json", CURATOR_B, ISSUER, "statement.txt", None),
    ("uri-identity.bundle.json", "https://ci.example.test/workflows/release.yml@refs/heads/main", ISSUER, "statement.txt", None),
    ("good.bundle.json", "someone-else@example.org", ISSUER, "statement.txt", "sigstore_identity_mismatch"),
    ("second-curator.bundle.json", CURATOR, ISSUER, "statement.txt", "sigstore_identity_mismatch"),
    ("good.bundle.json", CURATOR, OTHER_ISSUER, "statement.txt", "sigstore_issuer_mismatch"),
    ("good.bundle.json", CURATOR, ISSUER, "other-statement.txt", "sigstore_message_mismatch"),
    ("cert-expired.bundle.json", CURATOR, ISSUER, "statement.txt", "sigstore_certificate_not_valid_at_time"),
    ("set-flipped.bundle.json", CURATOR, ISSUER, "statement.txt", "sigstore_tlog_promise_invalid"),
    ("checkpoint-flipped.bundle.json", CURATOR, ISSUER, "statement.txt", "sigstore_tlog_checkpoint_invalid"),
    ("inclusion-flipped.bundle.json", CURATOR, ISSUER, "statement.txt", "sigstore_tlog_inclusion_invalid"),
    ("sct-bad-signature.bundle.json", CURATOR, ISSUER, "statement.txt", "sigstore_sct_invalid"),
    ("sct-untrusted-log.bundle.json", CURATOR, ISSUER, "statement.txt", "sigstore_sct_invalid"),
])
def test_the_committed_synthetic_fixtures_verify_or_fail_as_their_table_says(
    fixture: str, identity: str, issuer: str, message: str, code: Optional[str]
) -> None:
    """sigstore-check/testdata/synthetic/README.md's table, through sigstore-python."""
    bundle, msg = (SYNTHETIC / fixture).read_text(), (SYNTHETIC / message).read_bytes()
    if code is None:
        v = sigstore_check.verify_message(bundle, msg, identity, issuer, TRUSTED_ROOT)
        assert (v.identity, v.issuer) == (identity, issuer)
        assert v.signed_at == int(json.loads(bundle)["verificationMaterial"]["tlogEntries"][0]["integratedTime"])
    else:
        with pytest.raises(sigstore_check.Refusal) as e:
            sigstore_check.verify_message(bundle, msg, identity, issuer, TRUSTED_ROOT)
        assert e.value.code == code, e.value


def test_a_bundle_made_at_run_time_verifies_and_each_tamper_is_refused_by_its_check(synthetic: Synthetic) -> None:
    m = b"a statement that did not exist before the test"
    v = sigstore_check.verify_message(synthetic.sign("curator", m), m, CURATOR, ISSUER, TRUSTED_ROOT)
    assert v.signed_at == synthetic.certs["curator"].not_before + 30
    sigstore_check.verify_message(synthetic.sign("curator-b", m), m, CURATOR_B, ISSUER, TRUSTED_ROOT)
    for tamper, code in ((Tamper.LOGGED_AFTER_EXPIRY, "sigstore_certificate_not_valid_at_time"),
                         (Tamper.SET_FLIPPED, "sigstore_tlog_promise_invalid"),
                         (Tamper.CHECKPOINT_FLIPPED, "sigstore_tlog_checkpoint_invalid"),
                         (Tamper.INCLUSION_FLIPPED, "sigstore_tlog_inclusion_invalid")):
        with pytest.raises(sigstore_check.Refusal) as e:
            sigstore_check.verify_message(synthetic.sign("curator", m, tamper), m, CURATOR, ISSUER, TRUSTED_ROOT)
        assert e.value.code == code, (tamper, e.value)
    for label in ("bad-sct", "rogue-ct"):
        with pytest.raises(sigstore_check.Refusal) as e:
            sigstore_check.verify_message(synthetic.sign(label, m), m, CURATOR, ISSUER, TRUSTED_ROOT)
        assert e.value.code == "sigstore_sct_invalid", (label, e.value)


def test_what_the_library_leaves_out_is_checked_here(synthetic: Synthetic) -> None:
    """An integrated time in the future, a DSSE envelope, a bundle that is not one, and a
    Rekor key or Fulcio authority of the root not valid at the integrated time are each
    refused as the Rust crate refuses them."""
    m = b"m"
    bundle = synthetic.sign("curator", m)
    integrated = synthetic.certs["curator"].not_before + 30
    with pytest.raises(sigstore_check.Refusal) as e:
        sigstore_check.verify_message(bundle, m, CURATOR, ISSUER, TRUSTED_ROOT, now=integrated - 1)
    assert e.value.code == "sigstore_tlog_time_invalid"
    sigstore_check.verify_message(bundle, m, CURATOR, ISSUER, TRUSTED_ROOT, now=integrated)
    dsse = json.loads(bundle)
    del dsse["messageSignature"]
    dsse["dsseEnvelope"] = {"payload": "e30=", "payloadType": "application/vnd.in-toto+json",
                            "signatures": [{"sig": json.loads(bundle)["messageSignature"]["signature"]}]}
    with pytest.raises(sigstore_check.Refusal) as e:
        sigstore_check.verify_message(json.dumps(dsse), m, CURATOR, ISSUER, TRUSTED_ROOT)
    assert e.value.code == "sigstore_bundle_unsupported"
    for junk in ("not json", "{}", json.dumps({"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"})):
        with pytest.raises(sigstore_check.Refusal) as e:
            sigstore_check.verify_message(junk, m, CURATOR, ISSUER, TRUSTED_ROOT)
        assert e.value.code == "sigstore_bundle_malformed", junk
    root = json.loads(TRUSTED_ROOT)
    root["tlogs"][0]["publicKey"]["validFor"]["start"] = "2025-06-02T00:00:00Z"
    with pytest.raises(sigstore_check.Refusal) as e:
        sigstore_check.verify_message(bundle, m, CURATOR, ISSUER, json.dumps(root))
    assert e.value.code == "sigstore_tlog_promise_invalid" and "no log key valid at integrated time" in e.value.detail
    root = json.loads(TRUSTED_ROOT)
    root["certificateAuthorities"][0]["validFor"]["end"] = "2025-06-01T00:00:00Z"
    with pytest.raises(sigstore_check.Refusal) as e:
        sigstore_check.verify_message(bundle, m, CURATOR, ISSUER, json.dumps(root))
    assert e.value.code == "sigstore_certificate_invalid" and "no Fulcio authority" in e.value.detail


def test_a_trusted_root_that_is_not_one_is_refused() -> None:
    sigstore_check.check_root(TRUSTED_ROOT)
    root = json.loads(TRUSTED_ROOT)
    twice = dict(root, tlogs=root["tlogs"] * 2)
    backwards = json.loads(TRUSTED_ROOT)
    backwards["ctlogs"][0]["publicKey"]["validFor"]["end"] = "2024-01-01T00:00:00Z"
    no_key = json.loads(TRUSTED_ROOT)
    no_key["tlogs"][0]["publicKey"]["rawBytes"] = "AAAA"
    for bad in ('{"mediaType": 1}', "{", "[]", json.dumps(dict(root, tlogs=[])), json.dumps(dict(root, certificateAuthorities=[])),
                json.dumps(twice), json.dumps(backwards), json.dumps(no_key)):
        with pytest.raises(sigstore_check.Refusal) as e:
            sigstore_check.check_root(bad)
        assert e.value.code == "sigstore_trust_root_invalid", bad[:80]


# --- through the acceptance rules (api/tests/sigstore_approvals.rs) ---------------------


def test_a_curator_enrolled_by_sigstore_identity_co_signs_a_case(synthetic: Synthetic) -> None:
    g = Log()
    pid = sigstore_principal_id(CURATOR, ISSUER)
    p = g.state.principals[pid]
    assert p["public_key"] is None and p["sigstore"] == {"identity": CURATOR, "issuer": ISSUER} and p["roles"] == ["curator"]
    assert g.state.sigstore is not None and g.state.sigstore["origin"] == ORIGIN and g.state.sigstore["since"] == 4
    g.append(reviewed(g, synthetic, "sig-1"))
    # Both co-signatures by Sigstore identity: two distinct identities.
    d, bound = case("sig-2")
    body = case_body(g, d)
    st = sigstore_statement(ORIGIN, "curator", statement(d))
    body["provenance"]["added_by"] = by_bundle((CURATOR_B, ISSUER), synthetic.sign("curator-b", st))
    body["provenance"]["reviewed_by"] = by_bundle(GOOD, synthetic.sign("curator", st))
    g.append(sign_payload(g.cur[0], "case.added", body, bound=[bound]))
    assert {c for c in g.state.cases} >= {d.case_id}
    # The state a replica saves keeps the trust and the principals; the log replays whole
    # (every bundle verified again against the root recorded before it).
    saved = State.from_json(json.loads(json.dumps(g.state.to_json())))
    assert saved.sigstore == g.state.sigstore and saved.principals == g.state.principals
    again = State()
    for i, leaf in enumerate(g.leaves):
        again.check(decode_leaf(leaf), i, lambda size, root, field: None)
        again.apply(decode_leaf(leaf), i)
    assert again.to_json() == g.state.to_json()
    g.state = saved
    g.append(reviewed(g, synthetic, "sig-3"))


def test_attack_wrong_identity_is_refused(synthetic: Synthetic) -> None:
    g = Log()
    # curator-b's certificate, presented for the principal enrolled as curator.
    g.refused(reviewed(g, synthetic, "w-id", label="curator-b"), "sigstore_identity_mismatch", "provenance.reviewed_by.sigstore_bundle")


def test_attack_wrong_issuer_is_refused(synthetic: Synthetic) -> None:
    # Enrolled under another issuer than its certificates name.
    g = Log(issuer=OTHER_ISSUER)
    g.refused(reviewed(g, synthetic, "w-iss", reviewer=(CURATOR, OTHER_ISSUER)), "sigstore_issuer_mismatch",
              "provenance.reviewed_by.sigstore_bundle")


def test_attack_certificate_expired_at_the_verified_time_is_refused(synthetic: Synthetic) -> None:
    g = Log()
    g.refused(reviewed(g, synthetic, "w-exp", tamper=Tamper.LOGGED_AFTER_EXPIRY), "sigstore_certificate_not_valid_at_time",
              "reviewed_by.sigstore_bundle")


@pytest.mark.parametrize("tamper, code", [
    (Tamper.SET_FLIPPED, "sigstore_tlog_promise_invalid"),
    (Tamper.CHECKPOINT_FLIPPED, "sigstore_tlog_checkpoint_invalid"),
    (Tamper.INCLUSION_FLIPPED, "sigstore_tlog_inclusion_invalid"),
])
def test_attack_flipped_set_checkpoint_and_proof_are_refused(synthetic: Synthetic, tamper: Tamper, code: str) -> None:
    g = Log()
    g.refused(reviewed(g, synthetic, "w-tlog", tamper=tamper), code, "reviewed_by.sigstore_bundle")


@pytest.mark.parametrize("label", ["bad-sct", "rogue-ct"])
def test_attack_flipped_sct_and_untrusted_ct_key_are_refused(synthetic: Synthetic, label: str) -> None:
    g = Log()
    g.refused(reviewed(g, synthetic, "w-sct", label=label), "sigstore_sct_invalid", "reviewed_by.sigstore_bundle")


def test_attack_the_same_curator_twice_is_refused(synthetic: Synthetic) -> None:
    g = Log()
    d, bound = case("w-twice")
    body = case_body(g, d)
    bundle = synthetic.sign("curator", sigstore_statement(ORIGIN, "curator", statement(d)))
    body["provenance"]["added_by"] = by_bundle(GOOD, bundle)
    body["provenance"]["reviewed_by"] = by_bundle(GOOD, bundle)
    g.refused(sign_payload(g.cur[0], "case.added", body, bound=[bound]), "cosigners_not_distinct", "provenance.reviewed_by")


def test_attack_replayed_bundle_is_refused(synthetic: Synthetic) -> None:
    g = Log()
    # A bundle that approved another case (public in Rekor once logged).
    approved = reviewed(g, synthetic, "r-1")
    bundle = json.loads(approved.payload)["event"]["body"]["provenance"]["reviewed_by"]["sigstore_bundle"]
    g.append(approved)
    d, bound = case("r-2")
    body = case_body(g, d)
    body["provenance"]["reviewed_by"] = by_bundle(GOOD, bundle)
    g.refused(sign_payload(g.cur[0], "case.added", body, bound=[bound]), "sigstore_message_mismatch", "reviewed_by.sigstore_bundle")


def test_attack_bundle_for_another_log_or_role_is_refused(synthetic: Synthetic) -> None:
    g = Log()
    g.refused(reviewed(g, synthetic, "o-1", origin="other.example/log"), "sigstore_message_mismatch", "reviewed_by.sigstore_bundle")
    g.refused(reviewed(g, synthetic, "o-2", role="maintainer"), "sigstore_message_mismatch", "reviewed_by.sigstore_bundle")


def test_a_bundle_before_any_trusted_root_is_refused(synthetic: Synthetic) -> None:
    g = Log(root=False)
    g.refused(reviewed(g, synthetic, "n-1"), "sigstore_root_missing", "event.body.provenance.reviewed_by.sigstore_bundle")


def test_each_bundle_is_verified_against_the_root_in_force_when_it_was_appended(synthetic: Synthetic) -> None:
    """A later root (one without the synthetic instance: sigstore-python's copy of the
    public-good root) replaces the first: the bundles appended before it still replay,
    and a bundle after it is checked against it."""
    import sigstore

    production = (Path(sigstore.__file__).parent / "_store" / "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev" / "trusted_root.json")
    g = Log()
    g.append(reviewed(g, synthetic, "f-1"))
    g.append(root_event(g.op, ORIGIN, production.read_text()))
    assert g.state.sigstore is not None and g.state.sigstore["since"] == len(g.leaves) - 1
    g.refused(reviewed(g, synthetic, "f-2"), "sigstore_tlog_promise_invalid", "reviewed_by.sigstore_bundle")
    again = State()
    for i, leaf in enumerate(g.leaves):
        again.check(decode_leaf(leaf), i, lambda size, root, field: None)
        again.apply(decode_leaf(leaf), i)
    assert again.size == len(g.leaves)


def test_attack_trusted_root_for_another_origin_or_malformed_is_refused() -> None:
    g = Log()
    g.refused(root_event(g.op, "other.example/log", TRUSTED_ROOT), "sigstore_origin_mismatch", "event.body.origin")
    g.refused(root_event(g.op, ORIGIN, '{"mediaType": 1}'), "sigstore_trust_root_invalid", "event.body.trusted_root")
    g.refused(root_event(g.op, " ", TRUSTED_ROOT), "invalid_text", "event.body.origin")
    g.append(root_event(g.op, ORIGIN, TRUSTED_ROOT))  # the same origin again: a new root in force
    # Only the operator records a root.
    assert {r for r, kinds in MAY_APPEND.items() if "sigstore.root_trusted" in kinds} == {"operator"}
    g.refused(root_event(g.cur[0], ORIGIN, TRUSTED_ROOT), "role_not_permitted", "event.kind")


def test_a_first_root_naming_another_origin_than_the_logs_checkpoints_is_refused() -> None:
    """The ledger's door refuses it before any rule; a replay that knows the checkpoint
    origin (`Replica.follow` passes it) does too. Without it, the first root sets the
    origin."""
    g = Log(root=False, origin=ORIGIN)
    g.refused(root_event(g.op, "other.example/log", TRUSTED_ROOT), "sigstore_origin_mismatch", "event.body.origin")
    # At the door, before the signer's role is looked at.
    g.refused(root_event(g.cur[0], "other.example/log", TRUSTED_ROOT), "sigstore_origin_mismatch", "event.body.origin")
    g.append(root_event(g.op, ORIGIN, TRUSTED_ROOT))
    g = Log(root=False)
    g.append(root_event(g.op, "other.example/log", TRUSTED_ROOT))
    assert g.state.sigstore is not None and g.state.sigstore["origin"] == "other.example/log"


def test_a_key_co_signature_for_a_sigstore_principal_and_the_reverse_are_refused(synthetic: Synthetic) -> None:
    g = Log()
    # The principal enrolled by identity, named with a key signature.
    d, bound = case("k-1")
    body = case_body(g, d)
    body["provenance"]["reviewed_by"]["key_id"] = sigstore_principal_id(*GOOD)
    g.refused(sign_payload(g.cur[0], "case.added", body, bound=[bound]), "cosignature_invalid", "reviewed_by.sigstore_bundle")
    # A principal enrolled by key, given a bundle.
    env = reviewed(g, synthetic, "k-2")
    body = json.loads(env.payload)["event"]["body"]
    body["provenance"]["reviewed_by"]["key_id"] = g.cur[1].key_id
    g.refused(sign_payload(g.cur[0], "case.added", body), "cosignature_invalid", "reviewed_by.sigstore_bundle")
    # A bundle beside a signature.
    body = json.loads(reviewed(g, synthetic, "k-3").payload)["event"]["body"]
    body["provenance"]["reviewed_by"]["signature"] = "A" * 88
    g.refused(sign_payload(g.cur[0], "case.added", body), "invalid_value", "reviewed_by.signature")
    # A present `null` is not an absent bundle.
    body["provenance"]["reviewed_by"] = {"key_id": sigstore_principal_id(*GOOD), "sigstore_bundle": None}
    g.refused(sign_payload(g.cur[0], "case.added", body), "invalid_type", "reviewed_by.sigstore_bundle")
    # Not JSON: outside the ledger's profile, before the bundle is read as one.
    body["provenance"]["reviewed_by"] = by_bundle(GOOD, "not a bundle")
    g.refused(sign_payload(g.cur[0], "case.added", body), "sigstore_bundle_unsupported", "reviewed_by.sigstore_bundle")


def test_a_principal_enrolled_by_identity_is_enrolled_once_with_neither_operator_nor_ledger_role() -> None:
    g = Log()
    for roles in (("operator",), ("curator", "ledger")):
        g.refused(enrol_by_identity(g.op, "op", "op@example.org", ISSUER, roles), "invalid_value", "event.body.roles")
    g.refused(enrol_by_identity(g.op, "again", CURATOR, ISSUER), "principal_exists", "event.body.sigstore.identity")
    g.refused(enrol_by_identity(g.op, "no-at", "curator.example.org", ISSUER), "invalid_value", "event.body.sigstore.identity")
    g.refused(enrol_by_identity(g.op, "space", "a b@example.org", ISSUER), "invalid_value", "event.body.sigstore.identity")
    g.refused(enrol_by_identity(g.op, "http", "x@example.org", "http://issuer.example.test"), "invalid_value",
              "event.body.sigstore.issuer")
    both = {"public_key": SigningKey.generate("k").public_key_b64, "sigstore": {"identity": "x@example.org", "issuer": ISSUER},
            "identity": "x@people.example", "roles": ["curator"]}
    g.refused(sign_payload(g.op, "principal.enrolled", both), "invalid_value", "event.body.sigstore")
    neither = {"identity": "y@people.example", "roles": ["curator"]}
    g.refused(sign_payload(g.op, "principal.enrolled", neither), "invalid_value", "event.body.public_key")
    g.append(enrol_by_identity(g.op, "uri", "https://ci.example.test/workflows/release.yml@refs/heads/main", ISSUER))
    # Revoked, its SAN may be enrolled again under another issuer, not under the same one
    # (that principal id is taken for good).
    g.append(ev.PrincipalRevoked(sigstore_principal_id(CURATOR, ISSUER), "moved").sign(g.op))
    g.refused(enrol_by_identity(g.op, "again", CURATOR, ISSUER), "principal_exists", "event.body.sigstore")
    g.append(enrol_by_identity(g.op, "again", CURATOR, OTHER_ISSUER))


def test_a_principal_enrolled_by_identity_signs_no_envelope() -> None:
    g = Log()
    pid = sigstore_principal_id(*GOOD)
    stranger = SigningKey.generate("stranger")
    payload = canonical.encode({"schema": 3, "id": "rogue-envelope-1", "signer": pid, "issued_at": "2026-11-20T00:00:00Z",
                                "event": {"kind": "run.finished", "body": {"run_id": "run-1"}}})
    env = Envelope(payload, pid, stranger.sign(pae(PAYLOAD_TYPE, payload)), ())
    e = g.refused(env, "unknown_signer", "signer")
    assert "Sigstore identity" in e.reason


def test_without_sigstore_python_a_bundle_or_root_stops_the_replay_unverified(
    synthetic: Synthetic, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = Log()
    env = reviewed(g, synthetic, "u-1")
    monkeypatch.setitem(sys.modules, "sigstore.verify", None)  # as if not installed
    assert not sigstore_check.available()
    size = g.state.size
    with pytest.raises(SigstoreUnavailable) as e:
        g.append(env)
    assert (e.value.index, e.value.field) == (size, "event.body.provenance.reviewed_by.sigstore_bundle")
    assert "pip install evidence-ledger[sigstore]" in str(e.value) and g.state.size == size
    assert not isinstance(e.value, RuleBroken)
    with pytest.raises(SigstoreUnavailable) as e:
        g.append(root_event(g.op, ORIGIN, TRUSTED_ROOT))
    assert e.value.field == "event.body.trusted_root" and g.state.size == size
    # Entries without one replay as before.
    g.append(ev.PrincipalRevoked(g.cur[1].key_id, "rotated").sign(g.op))
    monkeypatch.undo()
    assert sigstore_check.available()


# --- one SAN, one person; bundles in the ledger's profile -------------------------------


def test_attack_one_san_enrolled_again_under_another_issuer_is_refused() -> None:
    """Public-good Fulcio issues one e-mail SAN through several issuers: enrolled twice, one
    person would be two co-signers. Refused whatever the issuer and the SAN's ASCII case,
    after the checks of the enrolment's own form."""
    g = Log()
    for identity in (CURATOR, "Curator@Example.org"):
        e = g.refused(enrol_by_identity(g.op, "again", identity, "https://github.com/login/oauth"), "principal_exists",
                      "event.body.sigstore.identity")
        assert e.field == "event.body.sigstore.identity" and ISSUER in e.reason
    # The roles are checked first: a role refused, not the SAN.
    g.refused(enrol_by_identity(g.op, "again", CURATOR, OTHER_ISSUER, ("operator",)), "invalid_value", "event.body.roles")
    g.refused(enrol_by_identity(g.op, "again", CURATOR, OTHER_ISSUER, ()), "invalid_value", "event.body.roles")
    # Another SAN is another person; a principal enrolled by key has no SAN.
    g.append(enrol_by_identity(g.op, "third", "third@example.org", OTHER_ISSUER))
    g.append(ev.PrincipalEnrolled.of(SigningKey.generate("k"), CURATOR, ["curator"]).sign(g.op))


@pytest.mark.parametrize("identity", [CURATOR, "Curator@Example.org"])
def test_attack_two_co_signers_with_one_san_under_two_issuers_are_not_distinct(synthetic: Synthetic, identity: str) -> None:
    """A state saved before the rule above may hold one SAN under two issuers: both bundles
    verify, and the two co-signers are still one person (SANs equal ignoring ASCII case)."""
    synthetic.issue(f"other-issuer/{identity}", identity, OTHER_ISSUER)
    g = Log()
    twin = (identity, OTHER_ISSUER)
    g.refused(enrol_by_identity(g.op, "twin", *twin), "principal_exists", "event.body.sigstore.identity")
    g.fold(enrol_by_identity(g.op, "twin", *twin))
    assert g.state.principals[sigstore_principal_id(*twin)]["sigstore"] == {"identity": identity, "issuer": OTHER_ISSUER}

    def cosigned(name: str, added_by: tuple[str, str], added_label: str) -> Envelope:
        d, bound = case(name)
        body = case_body(g, d)
        st = sigstore_statement(ORIGIN, "curator", statement(d))
        body["provenance"]["added_by"] = by_bundle(added_by, synthetic.sign(added_label, st))
        body["provenance"]["reviewed_by"] = by_bundle(GOOD, synthetic.sign("curator", st))
        return sign_payload(g.cur[0], "case.added", body, bound=[bound])

    e = g.refused(cosigned("twin-1", twin, f"other-issuer/{identity}"), "cosigners_not_distinct", "provenance.reviewed_by")
    assert e.field == "event.body.provenance.reviewed_by"
    # Each bundle verifies: beside another SAN, the pair goes in.
    g.append(cosigned("twin-2", (CURATOR_B, ISSUER), "curator-b"))


def test_attack_a_genuine_bundle_padded_outside_the_profile_is_refused(synthetic: Synthetic) -> None:
    """The bundle's JSON is not signed: whoever posts it can add what one verifier ignores
    and another refuses. Each pad is refused before any cryptography, and nothing is
    appended."""
    g = Log()
    good = reviewed(g, synthetic, "p-0")
    bundle = json.loads(good.payload)["event"]["body"]["provenance"]["reviewed_by"]["sigstore_bundle"]
    v = json.loads(bundle)
    unknown = json.loads(bundle)
    unknown["verificationMaterial"]["note"] = "ignored by one verifier"
    two_entries = json.loads(bundle)
    two_entries["verificationMaterial"]["tlogEntries"].append(v["verificationMaterial"]["tlogEntries"][0])
    repeated = bundle.replace("{", '{"mediaType":"x",', 1)
    huge = json.loads(bundle)
    huge["messageSignature"]["signature"] = "A" * 20_000
    def compact(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"))

    pads = [compact(unknown), compact(two_entries), repeated, compact(huge)]
    for i, padded in enumerate(pads):
        d, bound = case(f"p-{i + 1}")
        body = case_body(g, d)
        body["provenance"]["reviewed_by"] = by_bundle(GOOD, padded)
        e = g.refused(sign_payload(g.cur[0], "case.added", body, bound=[bound]), "sigstore_bundle_unsupported",
                      "reviewed_by.sigstore_bundle")
        assert e.field == "event.body.provenance.reviewed_by.sigstore_bundle" and "outside the profile" in e.reason, e
    # The bundle as made still goes in.
    g.append(good)


def test_the_profile_comes_after_the_root_and_before_any_cryptography(
    synthetic: Synthetic, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, bound = case("q-1")
    padded = json.loads(synthetic.sign("curator", sigstore_statement(ORIGIN, "curator", statement(d))))
    padded["extra"] = 1

    def env(g: Log) -> Envelope:
        body = case_body(g, d)
        body["provenance"]["reviewed_by"] = by_bundle(GOOD, json.dumps(padded))
        return sign_payload(g.cur[0], "case.added", body, bound=[bound])

    g = Log(root=False)
    g.refused(env(g), "sigstore_root_missing", "reviewed_by.sigstore_bundle")
    g = Log()
    monkeypatch.setitem(sys.modules, "sigstore.verify", None)  # no sigstore-python: refused all the same
    g.refused(env(g), "sigstore_bundle_unsupported", "reviewed_by.sigstore_bundle")


def _bundle(synthetic: Synthetic) -> dict[str, Any]:
    v: dict[str, Any] = json.loads(synthetic.sign("curator", b"m"))
    return v


def test_the_bundle_profile_follows_the_rust_one_line_by_line(synthetic: Synthetic) -> None:
    """`principals::bundle_profile`: what it accepts and each way it refuses."""
    from evidence_ledger.acceptance import MAX_BUNDLE_BYTES, bundle_profile

    good = _bundle(synthetic)
    cert = good["verificationMaterial"]["certificate"]
    entry = good["verificationMaterial"]["tlogEntries"][0]

    def edit(f: Any) -> str:
        v = _bundle(synthetic)
        f(v)
        return json.dumps(v)

    def vm(v: dict[str, Any]) -> dict[str, Any]:
        m: dict[str, Any] = v["verificationMaterial"]
        return m

    def chain(n: int) -> Any:
        return lambda v: (vm(v).pop("certificate"), vm(v).update(x509CertificateChain={"certificates": [cert] * n}))

    def stamps(n: int) -> Any:
        return lambda v: vm(v).update(timestampVerificationData={"rfc3161Timestamps": [{"signedTimestamp": "AA=="}] * n})

    accepted = [
        json.dumps(good),
        json.dumps(good, indent=2),
        edit(lambda v: v.update(mediaType="application/vnd.dev.sigstore.bundle+json;version=0.1")),
        edit(chain(1)), edit(chain(3)), edit(stamps(0)), edit(stamps(2)),
        edit(lambda v: vm(v)["tlogEntries"][0].pop("inclusionPromise")),
        edit(lambda v: vm(v)["tlogEntries"][0].update(logIndex=9007199254740991)),
        edit(lambda v: vm(v)["tlogEntries"][0].update(logIndex=-1.5e300)),
        # serde_json reads an integer beyond u64 (or a negative one beyond 2^63) as a float.
        json.dumps(good).replace('"hashes": [', '"hashes": [18446744073709551616, -9223372036854775809, ', 1),
        # 127 nested arrays or objects, serde_json's most.
        edit(lambda v: vm(v)["tlogEntries"][0]["inclusionProof"].update(hashes=json.loads("[" * 122 + "]" * 122))),
    ]
    assert "18446744073709551616" in accepted[-2]
    for b in accepted:
        assert bundle_profile(b) is None, b[:200]
    refused = [
        ("size", json.dumps(dict(good, messageSignature=dict(good["messageSignature"], signature="A" * MAX_BUNDLE_BYTES)))),
        ("not json", "not json"),
        ("trailing data", json.dumps(good) + " {}"),
        ("repeated key deep inside", json.dumps(good).replace('"rawBytes":', '"rawBytes":"x","rawBytes":', 1)),
        ("NaN", edit(lambda v: vm(v)["tlogEntries"][0].update(logIndex=float("nan")))),
        ("Infinity", json.dumps(good).replace('{', '{"x":-Infinity,', 1)),
        ("float out of range", json.dumps(good).replace('{', '{"x":1e400,', 1)),
        ("integer precision", edit(lambda v: vm(v)["tlogEntries"][0].update(logIndex=9007199254740992))),
        ("negative integer precision", edit(lambda v: vm(v)["tlogEntries"][0].update(logIndex=-(1 << 63)))),
        ("lone surrogate", json.dumps(good).replace('"rawBytes":', '"rawBytes\\ud800":', 1)),
        ("nesting", edit(lambda v: vm(v)["tlogEntries"][0]["inclusionProof"].update(hashes=json.loads("[" * 124 + "]" * 124)))),
        ("not an object", "[]"),
        ("unknown top-level field", edit(lambda v: v.update(dsseEnvelope={}))),
        ("no media type", edit(lambda v: v.pop("mediaType"))),
        ("unknown media type", edit(lambda v: v.update(mediaType="application/vnd.dev.sigstore.bundle.v0.4+json"))),
        ("no verification material", edit(lambda v: v.pop("verificationMaterial"))),
        ("unknown material", edit(lambda v: vm(v).update(publicKey={"hint": "x"}))),
        ("certificate and chain", edit(lambda v: vm(v).update(x509CertificateChain={"certificates": [cert]}))),
        ("neither", edit(lambda v: vm(v).pop("certificate"))),
        ("null certificate", edit(lambda v: vm(v).update(certificate=None))),
        ("certificate field", edit(lambda v: vm(v)["certificate"].update(extra=1))),
        ("empty chain", edit(chain(0))),
        ("long chain", edit(chain(4))),
        ("chain without certificates", edit(lambda v: (vm(v).pop("certificate"), vm(v).update(x509CertificateChain={})))),
        ("chain entry field", edit(lambda v: (vm(v).pop("certificate"),
                                                vm(v).update(x509CertificateChain={"certificates": [dict(cert, x=1)]})))),
        ("three timestamps", edit(stamps(3))),
        ("timestamps missing", edit(lambda v: vm(v).update(timestampVerificationData={}))),
        ("null timestamps", edit(lambda v: vm(v).update(timestampVerificationData=None))),
        ("timestamp field", edit(lambda v: vm(v).update(timestampVerificationData={"rfc3161Timestamps": [{"x": 1}]}))),
        ("no log entry", edit(lambda v: vm(v).update(tlogEntries=[]))),
        ("no tlogEntries", edit(lambda v: vm(v).pop("tlogEntries"))),
        ("two log entries", edit(lambda v: vm(v)["tlogEntries"].append(entry))),
        ("entry field", edit(lambda v: vm(v)["tlogEntries"][0].update(extra=1))),
        ("no logId", edit(lambda v: vm(v)["tlogEntries"][0].pop("logId"))),
        ("logId field", edit(lambda v: vm(v)["tlogEntries"][0]["logId"].update(extra=1))),
        ("no kindVersion", edit(lambda v: vm(v)["tlogEntries"][0].pop("kindVersion"))),
        ("kindVersion field", edit(lambda v: vm(v)["tlogEntries"][0]["kindVersion"].update(extra=1))),
        ("null promise", edit(lambda v: vm(v)["tlogEntries"][0].update(inclusionPromise=None))),
        ("promise field", edit(lambda v: vm(v)["tlogEntries"][0]["inclusionPromise"].update(extra=1))),
        ("no inclusion proof", edit(lambda v: vm(v)["tlogEntries"][0].pop("inclusionProof"))),
        ("null inclusion proof", edit(lambda v: vm(v)["tlogEntries"][0].update(inclusionProof=None))),
        ("proof field", edit(lambda v: vm(v)["tlogEntries"][0]["inclusionProof"].update(extra=1))),
        ("no checkpoint", edit(lambda v: vm(v)["tlogEntries"][0]["inclusionProof"].pop("checkpoint"))),
        ("checkpoint field", edit(lambda v: vm(v)["tlogEntries"][0]["inclusionProof"]["checkpoint"].update(extra=1))),
        ("no message signature", edit(lambda v: v.pop("messageSignature"))),
        ("message signature field", edit(lambda v: v["messageSignature"].update(extra=1))),
        ("no message digest", edit(lambda v: v["messageSignature"].pop("messageDigest"))),
        ("message digest field", edit(lambda v: v["messageSignature"]["messageDigest"].update(extra=1))),
    ]
    for why, b in refused:
        assert bundle_profile(b) is not None, why
    # serde_json's limit: 127 nested arrays or objects are read, 128 are not.
    assert bundle_profile("[" * 127 + "]" * 127) == "`` is not an object"
    assert "not strict JSON" in (bundle_profile("[" * 128 + "]" * 128) or "")
    # Integer literals as serde_json reads them: beyond u64 (or below -2^63) a float.
    for n in ("18446744073709551616", "-9223372036854775809", "9007199254740991", "-9007199254740991", "-0"):
        assert bundle_profile(n) == "`` is not an object", n
    for n in ("9007199254740992", "18446744073709551615", "-9007199254740992", "-9223372036854775808", "1" + "0" * 400):
        assert "not strict JSON" in (bundle_profile(n) or ""), n
    # The limit is on UTF-8 bytes, as Rust's `str::len`.
    def signed(signature: str) -> str:
        return json.dumps(dict(good, messageSignature=dict(good["messageSignature"], signature=signature)), ensure_ascii=False)

    room = MAX_BUNDLE_BYTES - len(signed("").encode())
    text = signed("é" * (room // 2) + "A" * (room % 2))
    assert len(text.encode()) == MAX_BUNDLE_BYTES and len(text) < MAX_BUNDLE_BYTES and bundle_profile(text) is None
    assert bundle_profile(signed("é" * (room // 2) + "A" * (room % 2) + "A")) == f"more than {MAX_BUNDLE_BYTES} bytes"
