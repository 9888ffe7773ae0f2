"""One value, one handle, audited without a server (`handles.Audit`; docs/PRIVACY.md,
"Handles"): the audit itself, as the Rust unit test drives it, and a replica's walk of an
in-memory log served to a reader with a role, which finds what only the door refuses."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

import pytest

from evidence_ledger import LeafMismatch, RuleBroken, SigningKey, disclose
from evidence_ledger import events as ev
from evidence_ledger.client import checked_disclosures
from evidence_ledger.disclose import Disclosed
from evidence_ledger.envelope import Envelope
from evidence_ledger.handles import Audit
from evidence_ledger.merkle import leaf_hash
from evidence_ledger.replay import Replica
from evidence_ledger.wire import EntryView
from test_replay_offline import Log, Served, follow

# --- the audit (events::handles::Audit) -----------------------------------------------


def payload(schema: int, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"schema": schema, "id": "enrol-someone", "signer": "0" * 64, "issued_at": "2026-11-01T00:00:00Z",
            "event": {"kind": kind, "body": body}}


def enrol(schema: int, identity: str, companion: str) -> dict[str, Any]:
    """An enrolment under `identity`; in schema 3 its companion's digest is `companion`
    (the handle it gives when that is `identity`)."""
    body: dict[str, Any] = {"public_key": "", "identity": identity, "roles": ["curator"]}
    if schema >= disclose.SCHEMA_HANDLES:
        body["identity_name"] = {"_sd": companion}
    return payload(schema, "principal.enrolled", body)


def named(value: Optional[str]) -> list[Disclosed]:
    return [Disclosed("identity_name", value)]


def redaction(entry: int, field: str) -> dict[str, Any]:
    return payload(3, "field.redacted", {"entry": entry, "leaf_hash": "", "field": field, "reason": {"_sd": "r"},
                                         "requested_by": {}, "confirmed_by": {}})


def test_the_audit_finds_two_handles_for_one_value_and_two_values_for_one_handle() -> None:
    a = Audit()
    a.see(0, enrol(1, "bob@example.org", ""), None)  # in clear
    a.see(1, enrol(3, "h-alice", "h-alice"), named("alice@example.org"))  # a handle given
    a.see(2, enrol(3, "h-alice", "c-2"), named("alice@example.org"))  # her handle again, for her
    a.see(3, enrol(3, "h-other", "h-other"), None)  # not disclosed: nothing to check
    with pytest.raises(RuleBroken) as two_handles:
        a.see(4, enrol(3, "h-alice-2", "h-alice-2"), named("alice@example.org"))
    assert "`h-alice` (entry 1)" in str(two_handles.value)
    assert (two_handles.value.index, two_handles.value.code, two_handles.value.field) == (4, "handle_value_bound", "event.body.identity")
    with pytest.raises(RuleBroken) as two_values:
        a.see(5, enrol(3, "h-alice", "c-5"), named("mallory@example.org"))
    assert "given at entry 1" in str(two_values.value)
    assert (two_values.value.index, two_values.value.code, two_values.value.field) == (5, "handle_value_mismatch", "event.body.identity")
    # Bob was named in clear: his handle is his id.
    with pytest.raises(RuleBroken) as clear_then_new:
        a.see(6, enrol(3, "h-bob", "h-bob"), named("bob@example.org"))
    assert "`bob@example.org`" in str(clear_then_new.value) and clear_then_new.value.code == "handle_value_bound"
    # A redaction of the companion that gave alice's handle unbinds it, as the door forgets it.
    a.see(7, redaction(1, "identity_name"), None)
    a.see(8, enrol(3, "h-alice-3", "h-alice-3"), named("alice@example.org"))  # her value is no longer bound


def test_the_audit_passes_over_what_it_is_not_shown_and_keeps_classes_apart() -> None:
    a = Audit()
    a.see(0, enrol(3, "h-alice", "h-alice"), named("alice@example.org"))
    # A companion answered as redacted is not shown: nothing to check.
    a.see(1, enrol(3, "h-alice-2", "h-alice-2"), named(None))
    a.see(2, enrol(3, "h-alice", "c-2"), [Disclosed("title", "alice@example.org")])
    # The same string as a workflow id is another value: its own class.
    minted = payload(3, "rag.capability.minted", {"capability_id": "cap-1", "workflow_id": "h-wf", "workflow_name": {"_sd": "h-wf"}})
    a.see(3, minted, [Disclosed("workflow_name", "alice@example.org")])
    # A redaction of another field, or of an entry that gave no handle, unbinds nothing.
    a.see(4, redaction(0, "reason"), None)
    a.see(5, redaction(2, "identity_name"), None)
    with pytest.raises(RuleBroken, match="already has the handle `h-alice` \\(entry 0\\)"):
        a.see(6, enrol(3, "h-alice-3", "h-alice-3"), named("alice@example.org"))
    assert a.known == 2
    # Kinds that name no value first are passed over.
    a.see(7, payload(3, "case.retired", {"case_id": "h-alice"}), None)


# --- a replica's walk, served as to a reader with a role ------------------------------


class Kept(Log):
    """A log that keeps each entry's disclosures beside it, as the ledger does."""

    def __init__(self) -> None:
        self.kept: list[tuple[str, ...]] = []
        super().__init__()

    def append(self, env: Envelope, at: int | None = None) -> None:
        super().append(env, at)
        self.kept.append(env.disclosures)


class Reader(Served):
    """The log served to a reader with a role: each entry with its kept disclosures, those
    of the fields redacted so far listed under `redacted` instead, checked against the
    leaf as `Client.entries` checks them; `kinds` serves some entries as another kind."""

    def __init__(self, g: Kept, kinds: Optional[dict[int, str]] = None) -> None:
        super().__init__(g)
        self.kept = g
        self.kinds = kinds or {}

    def entries(self, start: int, limit: int = 1000) -> list[EntryView]:
        page = []
        for e in super().entries(start, limit):
            body = e.payload["event"]["body"]
            redacted = [p for p, _ in disclose.commitments(e.kind, body) if (e.index, p) in self.kept.state.redactions]
            shown = [d for d in self.kept.kept[e.index] if disclose.parse(d)[0] not in redacted]
            served = dataclasses.replace(e, kind=self.kinds.get(e.index, e.kind), disclosures=shown, redacted=redacted)
            page.append(checked_disclosures(served))
        return page


@pytest.fixture()
def people() -> tuple[Kept, SigningKey, tuple[SigningKey, SigningKey]]:
    """A schema-3 log: alice enrolled (her identity given a handle), two maintainers."""
    g = Kept()
    alice = SigningKey.generate("alice")
    g.append(ev.PrincipalEnrolled.of(alice, "alice@example.org", ["curator"]).sign(g.op))
    m = (SigningKey.generate("maint-a"), SigningKey.generate("maint-b"))
    for k in m:
        g.append(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", ["maintainer"]).sign(g.op))
    return g, alice, m


def handle_of(g: Kept, key: SigningKey) -> str:
    return str(g.state.principals[key.key_id]["identity"])


def test_an_honest_walk_with_the_disclosures_passes_and_forgets_what_a_redaction_forgets(
    people: tuple[Kept, SigningKey, tuple[SigningKey, SigningKey]], tmp_path: Path
) -> None:
    g, alice, m = people
    given = handle_of(g, alice)
    # Another key of hers names her handle, her identity committed beside it again.
    second = SigningKey.generate("alice-2")
    g.append(ev.PrincipalEnrolled(second.public_key_b64, given, ["curator"], identity_name="alice@example.org").sign(g.op))
    replica = Replica(tmp_path / "r", [])
    follow(g, replica, Reader(g))
    assert replica.handles.known == 4  # the operator, alice and the two maintainers
    # Her identity redacted where its handle was given: the door forgets it, and a later
    # enrolment may give her a new handle; the walk, which met the handle, forgets it too.
    origin = g.state.handles[f"identity/{given}"]
    g.append(ev.FieldRedacted.cosigned(origin, leaf_hash(g.leaves[origin]).hex(), "identity_name", "asked to be forgotten",
                                       requested_by=m[0], confirmed_by=m[1]).sign(m[0]))
    third = SigningKey.generate("alice-3")
    g.append(ev.PrincipalEnrolled.of(third, "alice@example.org", ["curator"]).sign(g.op))
    assert handle_of(g, third) != given
    follow(g, replica, Reader(g))
    # A walk from the first entry is served her first companion as redacted: passed over.
    follow(g, Replica(tmp_path / "again", []), Reader(g))


def test_attack_a_second_handle_for_one_person_is_found_by_a_walk_with_the_disclosures(
    people: tuple[Kept, SigningKey, tuple[SigningKey, SigningKey]], tmp_path: Path
) -> None:
    g, alice, _ = people
    # A log the door would have refused (`handle_value_bound`), which the rules cannot:
    # alice enrolled again under a new handle, so she can co-sign with herself.
    again = SigningKey.generate("alice-again")
    g.append(ev.PrincipalEnrolled.of(again, "alice@example.org", ["curator"]).sign(g.op))
    assert handle_of(g, again) != handle_of(g, alice)
    with pytest.raises(RuleBroken) as e:
        follow(g, Replica(tmp_path / "reader", []), Reader(g))
    assert (e.value.index, e.value.code, e.value.field) == (g.state.size - 1, "handle_value_bound", "event.body.identity")
    assert f"already has the handle `{handle_of(g, alice)}` (entry 1)" in str(e.value)
    # A reader without a role takes it on the ledger's word.
    follow(g, Replica(tmp_path / "plain", []))


def test_attack_a_handle_beside_another_value_is_found_by_a_walk_with_the_disclosures(
    people: tuple[Kept, SigningKey, tuple[SigningKey, SigningKey]], tmp_path: Path
) -> None:
    g, alice, _ = people
    # Mallory's key enrolled under alice's handle (the door: `handle_value_mismatch`).
    mallory = SigningKey.generate("mallory")
    g.append(ev.PrincipalEnrolled(mallory.public_key_b64, handle_of(g, alice), ["curator"],
                                  identity_name="mallory@example.org").sign(g.op))
    with pytest.raises(RuleBroken) as e:
        follow(g, Replica(tmp_path / "reader", []), Reader(g))
    assert (e.value.index, e.value.code, e.value.field) == (g.state.size - 1, "handle_value_mismatch", "event.body.identity")
    follow(g, Replica(tmp_path / "plain", []))


def test_attack_an_entry_served_as_another_kind_beside_its_disclosures_is_refused(
    people: tuple[Kept, SigningKey, tuple[SigningKey, SigningKey]], tmp_path: Path
) -> None:
    g, _, _ = people
    with pytest.raises(LeafMismatch, match="entry 1.kind: served as `score.recorded`, but its leaf is a `principal.enrolled`"):
        follow(g, Replica(tmp_path / "r", []), Reader(g, kinds={1: "score.recorded"}))
