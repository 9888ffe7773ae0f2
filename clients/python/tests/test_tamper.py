"""Attacks on what the server answers: each one named, each one typed failure."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any, Optional

import pytest

from conftest import Bench, LedgerServer
from evidence_ledger import Client, Replica, SigningKey, TrustedState, canonical, disclose, replay_projections
from evidence_ledger import events as ev
from evidence_ledger.envelope import decode_leaf
from evidence_ledger.replay import STATE_FILE
from evidence_ledger.errors import (
    BadSignature,
    DisclosureMismatch,
    EvidenceMismatch,
    ForkDetected,
    Incomplete,
    LeafMismatch,
    MalformedAnswer,
    ProofMismatch,
    StaleCheckpoint,
    VerificationError,
)
from evidence_ledger.verify import BUNDLE_STATEMENT, check_projection, check_receipt, verify_bundle
from evidence_ledger.wire import WriteReceipt, parse_projection


@pytest.fixture(scope="module")
def bench(server: LedgerServer) -> Bench:
    b = Bench(server, "tamper", cases=6)
    b.client.post_many([b.score(c, 0.75 + 0.04 * i, passed=i != 2).sign(b.harness) for i, c in enumerate(b.cases)])
    return b


@pytest.fixture()
def posted(bench: Bench) -> tuple[WriteReceipt, Any]:
    env = ev.RubricInvoked(bench.run_id, bench.cases[0].case_id, f"inv-{SigningKey.generate('x').key_id[:12]}").sign(bench.harness)
    return bench.client.post(env), env


def flip(h: str) -> str:
    return ("0" if h[0] != "0" else "1") + h[1:]


# --- receipts -----------------------------------------------------------------


def test_receipt_with_another_leaf_hash_is_refused(bench: Bench, posted: tuple[WriteReceipt, Any]) -> None:
    r, env = posted
    with pytest.raises(LeafMismatch):
        check_receipt(dataclasses.replace(r, leaf_hash=flip(r.leaf_hash)), bench.client.keys, env)


def test_receipt_with_another_sequencing_time_is_refused(bench: Bench, posted: tuple[WriteReceipt, Any]) -> None:
    r, env = posted
    with pytest.raises(LeafMismatch):
        check_receipt(dataclasses.replace(r, sequenced_at="2020-01-01T00:00:00.000000Z"), bench.client.keys, env)


def test_receipt_for_another_envelope_is_refused(bench: Bench, posted: tuple[WriteReceipt, Any]) -> None:
    r, _ = posted
    other = ev.RubricInvoked(bench.run_id, bench.cases[0].case_id, "inv-other-1").sign(bench.harness)
    with pytest.raises(LeafMismatch):
        check_receipt(r, bench.client.keys, other)


def test_receipt_with_a_wrong_inclusion_proof_is_refused(bench: Bench, posted: tuple[WriteReceipt, Any]) -> None:
    r, env = posted
    proof = [flip(r.inclusion_proof[0])] + r.inclusion_proof[1:]
    with pytest.raises(ProofMismatch):
        check_receipt(dataclasses.replace(r, inclusion_proof=proof), bench.client.keys, env)
    with pytest.raises(ProofMismatch):
        check_receipt(dataclasses.replace(r, inclusion_proof=r.inclusion_proof[:-1]), bench.client.keys, env)


def test_receipt_with_a_root_its_checkpoint_does_not_sign_is_refused(bench: Bench, posted: tuple[WriteReceipt, Any]) -> None:
    r, env = posted
    with pytest.raises(VerificationError, match="differs from its signed checkpoint"):
        check_receipt(dataclasses.replace(r, root=flip(r.root)), bench.client.keys, env)


def test_receipt_with_a_forged_checkpoint_signature_is_refused(bench: Bench, posted: tuple[WriteReceipt, Any]) -> None:
    r, env = posted
    body, _, sigs = r.checkpoint.partition("\n\n")
    name, sig = sigs.strip().split(" ")[1:]
    raw = bytearray(base64.b64decode(sig))
    raw[-1] ^= 1
    forged = f"{body}\n\n\u2014 {name} {base64.b64encode(bytes(raw)).decode()}\n"
    with pytest.raises(BadSignature):
        check_receipt(dataclasses.replace(r, checkpoint=forged), bench.client.keys, env)


def test_receipt_signed_by_an_impostor_log_key_is_refused(bench: Bench, posted: tuple[WriteReceipt, Any]) -> None:
    r, env = posted
    impostor = SigningKey(bench.server.log_key.name, b"\x07" * 32)
    text = r.checkpoint.partition("\n\n")[0] + "\n"
    with pytest.raises(BadSignature):
        check_receipt(dataclasses.replace(r, checkpoint=impostor.sign_note(text.encode())), bench.client.keys, env)


# --- projections ----------------------------------------------------------------


@pytest.fixture()
def raw_projection(bench: Bench) -> dict[str, Any]:
    p: dict[str, Any] = bench.client._json("GET", f"/v1/task-classes/{bench.name}")
    check_projection(parse_projection(p), bench.client.keys)
    assert p["view"]["held_out"]["cases"] == 6
    return p


def check(p: dict[str, Any], bench: Bench) -> None:
    check_projection(parse_projection(json.loads(json.dumps(p))), bench.client.keys)


def test_projection_with_a_higher_mean_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    raw_projection["view"]["held_out"]["mean"] += 0.05
    with pytest.raises(EvidenceMismatch) as e:
        check(raw_projection, bench)
    assert e.value.what == "view.held_out.mean"


def test_projection_with_a_raised_lower_bound_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    raw_projection["view"]["held_out"]["mean_ci"]["low"] = 0.9
    with pytest.raises(EvidenceMismatch) as e:
        check(raw_projection, bench)
    assert e.value.what == "view.held_out.mean_ci"


def test_projection_with_a_wilson_interval_off_by_one_ulp_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    import math

    ci = raw_projection["view"]["held_out"]["pass_rate_ci"]
    ci["low"] = math.nextafter(ci["low"], 1.0)
    with pytest.raises(EvidenceMismatch) as e:
        check(raw_projection, bench)
    assert e.value.what == "view.held_out.pass_rate_ci"


def test_projection_that_drops_a_low_score_from_its_evidence_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    del raw_projection["view"]["evidence"][0]
    del raw_projection["evidence"][0]
    with pytest.raises(EvidenceMismatch) as e:
        check(raw_projection, bench)
    assert e.value.what == "view.held_out.cases"


def test_projection_showing_a_score_its_evidence_leaf_does_not_hold_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    e0 = raw_projection["view"]["evidence"][0]
    e0["score"] = 0.5 if e0["score"] != 0.5 else 0.25
    with pytest.raises(EvidenceMismatch) as e:
        check(raw_projection, bench)
    assert e.value.what == f"evidence {e0['index']}"
    assert "the view says" in str(e.value)


def test_projection_whose_bundle_differs_from_its_cited_evidence_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    del raw_projection["evidence"][0]
    with pytest.raises(EvidenceMismatch, match="does not match"):
        check(raw_projection, bench)


def test_projection_with_an_edited_evidence_leaf_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    leaf = base64.b64decode(raw_projection["evidence"][0]["leaf"])
    raw_projection["evidence"][0]["leaf"] = base64.b64encode(leaf.replace(b'"sequenced_at":"2', b'"sequenced_at":"1')).decode()
    with pytest.raises(LeafMismatch):
        check(raw_projection, bench)


def test_projection_with_a_wrong_evidence_proof_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    e0 = raw_projection["evidence"][0]
    e0["proof"] = [flip(e0["proof"][0])] + e0["proof"][1:]
    with pytest.raises(ProofMismatch):
        check(raw_projection, bench)


def test_projection_citing_a_real_entry_that_is_not_a_score_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    size = raw_projection["tree_size"]
    entry = bench.client._json("GET", "/v1/entries/0")
    proof = bench.client._json("GET", f"/v1/proofs/inclusion?index=0&tree_size={size}")
    raw_projection["evidence"][0] = {"index": 0, "leaf_hash": entry["leaf_hash"], "leaf": entry["leaf"], "proof": proof["proof"]}
    raw_projection["view"]["evidence"][0]["index"] = 0
    raw_projection["view"]["evidence"][0]["leaf_hash"] = entry["leaf_hash"]
    with pytest.raises(EvidenceMismatch, match="not a score"):
        check(raw_projection, bench)


def test_projection_computed_at_another_tree_is_refused(bench: Bench, raw_projection: dict[str, Any]) -> None:
    raw_projection["view"]["tree_size"] -= 1
    with pytest.raises(VerificationError, match="another tree size"):
        check(raw_projection, bench)


# --- bundles --------------------------------------------------------------------


@pytest.fixture()
def bundle(bench: Bench) -> bytes:
    data, summary = bench.client.bundle(bench.name)
    assert summary.evidence == 6 and summary.requires_human_approval
    return data


def resign(bundle: bytes, key: SigningKey, edit: Any) -> bytes:
    doc = json.loads(bundle)
    edit(doc["body"])
    digest = __import__("hashlib").sha256(canonical.encode(doc["body"])).hexdigest()
    doc["attestation"] = key.sign_note(f"{BUNDLE_STATEMENT}\n{key.name}\n{digest}\n".encode())
    return canonical.encode(doc)


def test_bundle_verifies_offline_with_the_key_alone(bench: Bench, bundle: bytes) -> None:
    s = verify_bundle(bundle, [bench.server.vkey])
    assert s.task_class == bench.name and s.evidence == 6


def test_bundle_with_any_changed_byte_is_refused(bench: Bench, bundle: bytes) -> None:
    step = max(1, len(bundle) // 400)
    for i in range(0, len(bundle), step):
        bad = bytearray(bundle)
        bad[i] ^= 0x01
        with pytest.raises(VerificationError):
            verify_bundle(bytes(bad), [bench.server.vkey])


def test_bundle_re_formatted_is_refused_as_edited(bench: Bench, bundle: bytes) -> None:
    with pytest.raises(MalformedAnswer, match="canonical"):
        verify_bundle(json.dumps(json.loads(bundle), indent=1).encode(), [bench.server.vkey])


def test_bundle_with_an_edited_body_under_the_old_attestation_is_refused(bench: Bench, bundle: bytes) -> None:
    doc = json.loads(bundle)
    doc["body"]["view"]["recommendation"]["recommended_tier"] = "gold"
    with pytest.raises(VerificationError, match="does not cover"):
        verify_bundle(canonical.encode(doc), [bench.server.vkey])


def test_bundle_re_signed_by_an_untrusted_key_is_refused(bench: Bench, bundle: bytes) -> None:
    forger = SigningKey.generate(bench.server.log_key.name)
    bad = resign(bundle, forger, lambda b: None)
    with pytest.raises(BadSignature):
        verify_bundle(bad, [bench.server.vkey])


def test_bundle_with_a_raised_mean_signed_by_the_real_log_key_is_still_refused(bench: Bench, bundle: bytes) -> None:
    def raise_mean(body: dict[str, Any]) -> None:
        body["view"]["held_out"]["mean"] = 0.99

    bad = resign(bundle, bench.server.log_key, raise_mean)
    with pytest.raises(EvidenceMismatch) as e:
        verify_bundle(bad, [bench.server.vkey])
    assert e.value.what == "view.held_out.mean"


# --- the trusted state: forks and stale checkpoints --------------------------------


def test_a_fork_signed_with_the_real_log_key_is_refused(twins: tuple[LedgerServer, LedgerServer]) -> None:
    a, b = twins
    trust = TrustedState()
    ca = Client(a.url, a.vkey, trust=trust)
    k = SigningKey.generate("fork-a")
    ca.post(ev.PrincipalEnrolled.of(k, "fork-a@example.org", ["harness"]).sign(a.operator))
    cb = Client(b.url, b.vkey)
    for i in range(3):
        other = SigningKey.generate(f"fork-b{i}")
        cb.post(ev.PrincipalEnrolled.of(other, f"fork-b{i}@example.org", ["harness"]).sign(b.operator))
    assert a.vkey == b.vkey
    with pytest.raises(ForkDetected):
        Client(b.url, b.vkey, trust=trust).checkpoint()


def test_a_server_showing_an_older_tree_is_stale(twins: tuple[LedgerServer, LedgerServer]) -> None:
    a, b = twins
    trust = TrustedState()
    ca = Client(a.url, a.vkey, trust=trust)
    for i in range(2):
        k = SigningKey.generate(f"stale-{i}")
        ca.post(ev.PrincipalEnrolled.of(k, f"stale-{i}@example.org", ["harness"]).sign(a.operator))
    with pytest.raises(StaleCheckpoint):
        Client(b.url, b.vkey, trust=trust).checkpoint()


# --- disclosures served to a reader with a role (docs/PRIVACY.md) -------------------


class Serving(Client):
    """A client whose server answers entry `index`, alone or in a page of entries, with
    `edit` applied to the honest answer."""

    def __init__(self, honest: Client, index: int, edit: Any) -> None:
        super().__init__(honest.base, honest.keys, token=honest.token)
        self.index, self.edit = index, edit

    def _json(self, method: str, path: str, body: Optional[bytes] = None) -> Any:
        answer = super()._json(method, path, body)
        if path == f"/v1/entries/{self.index}":
            self.edit(answer)
        elif path.startswith("/v1/entries?"):
            for e in answer["entries"]:
                if e["index"] == self.index:
                    self.edit(e)
        return answer


@pytest.fixture(scope="module")
def disclosed(reader_server: LedgerServer, auditor_token: str) -> tuple[Client, int, int]:
    """The auditor's client and two case.added entries, each with five committed fields
    (the last, `case_name`, the value behind the case's handle)."""
    b = Bench(reader_server, "tamper-disclose", cases=0)
    receipts = []
    for i in range(2):
        d, bound = b.draft(f"{b.name}-case-{i}").bind()
        receipts.append(b.client.post(ev.CaseAdded.cosigned(
            b.name, d, source="curated", source_ref=f"bench/{i}", added_at="2026-11-20T00:00:00Z",
            added_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0], bound=[bound])))
    auditor = reader_server.client(token=auditor_token)
    e = auditor.entry(receipts[0].index)
    assert e.disclosed is not None and [o.path for o in e.disclosed if o.value is not None] == list(disclose.COMMITTED["case.added"])
    return auditor, receipts[0].index, receipts[1].index


def reopen(d: str, salt: Optional[bytes] = None, field: Optional[str] = None, value: Any = None) -> str:
    """`d` made again with one of its parts replaced."""
    raw = disclose.b64url_decode(d)
    assert raw is not None
    s, f, v = json.loads(raw)
    return disclose.disclosure(salt if salt is not None else disclose.b64url_decode(s) or b"", field or f, v if value is None else value)


def test_a_disclosure_of_another_value_is_refused(disclosed: tuple[Client, int, int]) -> None:
    auditor, index, _ = disclosed

    def edit(a: dict[str, Any]) -> None:
        a["disclosures"][0] = reopen(a["disclosures"][0], value="another title")

    with pytest.raises(DisclosureMismatch, match="matches no commitment") as e:
        Serving(auditor, index, edit).entry(index)
    assert e.value.what == f"entry {index}.disclosures[0]" and e.value.disclosure == 0


def test_a_disclosure_with_another_salt_is_refused(disclosed: tuple[Client, int, int]) -> None:
    auditor, index, _ = disclosed

    def edit(a: dict[str, Any]) -> None:
        a["disclosures"][1] = reopen(a["disclosures"][1], salt=b"\x00" * 32)

    with pytest.raises(DisclosureMismatch, match="matches no commitment") as e:
        Serving(auditor, index, edit).entry(index)
    assert e.value.disclosure == 1


def test_a_disclosure_naming_another_field_is_refused(disclosed: tuple[Client, int, int]) -> None:
    """A leaf whose `title` commits to a disclosure naming `difficulty` (one the ledger's
    door refuses: here signed by hand) does not open: the disclosure's field is checked
    against the field whose commitment it matches."""
    auditor, index, _ = disclosed
    body = dict(decode_leaf(base64.b64decode(auditor.entry(index).leaf)).body)
    wrong = disclose.disclosure(b"\x01" * 32, "difficulty", "case title")
    body["title"] = {"_sd": disclose.digest(wrong)}
    with pytest.raises(DisclosureMismatch, match="names `difficulty` but opens `title`") as e:
        disclose.check_disclosed("case.added", body, [wrong], f"entry {index}")
    assert e.value.field == "title" and e.value.disclosure == 0


def test_another_entrys_disclosure_is_refused(disclosed: tuple[Client, int, int]) -> None:
    auditor, index, other = disclosed
    theirs = auditor.entry(other).disclosures
    assert theirs is not None

    def edit(a: dict[str, Any]) -> None:
        a["disclosures"][0] = theirs[0]

    with pytest.raises(DisclosureMismatch, match="matches no commitment"):
        Serving(auditor, index, edit).entry(index)


def test_a_disclosure_served_twice_is_refused(disclosed: tuple[Client, int, int]) -> None:
    auditor, index, _ = disclosed

    def edit(a: dict[str, Any]) -> None:
        a["disclosures"].append(a["disclosures"][2])

    with pytest.raises(DisclosureMismatch, match="opens `difficulty` twice") as e:
        Serving(auditor, index, edit).entry(index)
    assert e.value.disclosure == 5  # after the five the entry commits to


def test_a_field_said_redacted_while_disclosed_is_refused(disclosed: tuple[Client, int, int]) -> None:
    auditor, index, _ = disclosed

    def edit(a: dict[str, Any]) -> None:
        a["redacted"] = ["title"]

    with pytest.raises(MalformedAnswer, match="`title` is both disclosed and answered as redacted") as e:
        Serving(auditor, index, edit).entry(index)
    assert e.value.what == f"entry {index}.redacted[0]"


def test_a_committed_field_neither_disclosed_nor_said_redacted_is_refused(disclosed: tuple[Client, int, int]) -> None:
    """The server leaves `title`'s disclosure out, and does not claim a redaction either:
    every other disclosure still opens its commitment."""
    auditor, index, _ = disclosed

    def edit(a: dict[str, Any]) -> None:
        del a["disclosures"][0]

    with pytest.raises(MalformedAnswer, match="`title` is neither disclosed nor answered as redacted") as e:
        Serving(auditor, index, edit).entry(index)
    assert e.value.what == f"entry {index}.disclosures"


def test_a_field_said_redacted_that_the_entry_does_not_commit_is_refused(disclosed: tuple[Client, int, int]) -> None:
    auditor, index, _ = disclosed

    def edit(a: dict[str, Any]) -> None:
        a["redacted"] = ["case_id"]

    with pytest.raises(MalformedAnswer, match="`case_id` is answered as redacted, but the entry commits to no such field") as e:
        Serving(auditor, index, edit).entry(index)
    assert e.value.what == f"entry {index}.redacted[0]"


def test_a_disclosure_withheld_as_redacted_without_a_redaction_is_caught_by_the_walk(
    disclosed: tuple[Client, int, int], tmp_path: Path
) -> None:
    """The server answers `title` as redacted and leaves its disclosure out, with no
    `field.redacted` entry in the log. One answer cannot tell (a real redaction looks
    the same); the walk of the log finds no redaction that records it."""
    auditor, index, _ = disclosed

    def edit(a: dict[str, Any]) -> None:
        del a["disclosures"][0]
        a["redacted"] = ["title"]

    lying = Serving(auditor, index, edit)
    e = lying.entry(index)
    assert e.redacted == ["title"] and e.disclosed is not None and e.disclosed[0] == ("title", None)
    replica = Replica.open(tmp_path / "replica", lying.keys)
    with pytest.raises(Incomplete, match="no `field.redacted` entry below") as caught:
        replica.follow(lying, lying.checkpoint())
    assert caught.value.what == f"entry {index}.redacted" and "`title`" in caught.value.reason
    assert "run again" in caught.value.reason
    with pytest.raises(Incomplete, match="no `field.redacted` entry"):
        replay_projections(lying, Replica.open(tmp_path / "audit", lying.keys))
    assert not (tmp_path / "audit" / STATE_FILE).exists()
    # The honest server, walked the same way, passes.
    Replica.open(tmp_path / "honest", auditor.keys).follow(auditor, auditor.checkpoint())
