"""Schema 3's handles against a real server (docs/PRIVACY.md, "Handles").

A case id, an identity or a workflow id is committed where it is first named, and the
identifier holds the commitment's digest, its handle; every later event, and every
co-signed statement, names the handle. The package writes schema 3 by default; the
server accepts what it writes, refuses each break of the rules with its typed problem,
and the package's own acceptance rules and disclosure check agree with the server's on
the same entries.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import CASE_NAMES, Bench, LedgerServer, digest
from evidence_ledger import Replica, RuleBroken, SigningKey, canonical, disclose, problems
from evidence_ledger import events as ev
from evidence_ledger.envelope import PAYLOAD_TYPE, Envelope, decode_leaf, pae, sign_payload


@pytest.fixture(scope="module")
def bench(reader_server: LedgerServer) -> Bench:
    return Bench(reader_server, "handles", cases=2)


def enrol(b: Bench, name: str, role: str) -> tuple[SigningKey, Envelope]:
    """A new key enrolled for the identity `name@example.org`, given its handle."""
    k = SigningKey.generate(f"{b.name}-{name}")
    env = ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", [role]).sign(b.server.operator)
    b.client.post(env)
    return k, env


def raw(key: SigningKey, schema: int, kind: str, body: dict[str, Any]) -> Envelope:
    """An envelope over a payload written by hand (no commitment made for it)."""
    payload = canonical.encode({"schema": schema, "id": f"raw-{SigningKey.generate('x').key_id[:16]}", "signer": key.key_id,
                                "issued_at": "2026-11-20T00:00:00Z", "event": {"kind": kind, "body": body}})
    return Envelope(payload, key.key_id, key.sign(pae(PAYLOAD_TYPE, payload)))


# --- what the package writes --------------------------------------------------------------


def test_a_schema_3_case_is_added_and_scored_by_its_handle(bench: Bench, auditor_token: str, tmp_path: Path) -> None:
    b = bench
    case = b.cases[0]
    name = CASE_NAMES[case.case_id]
    assert case.case_name == name and disclose.is_digest(case.case_id)
    # Added: the leaf holds the handle and the commitment to the name, never the name.
    auditor = b.server.client(token=auditor_token)
    added = next(e for e in auditor.entries(0, auditor.checkpoint().size)
                 if e.kind == "case.added" and decode_leaf(base64.b64decode(e.leaf)).body["case_id"] == case.case_id)
    leaf = decode_leaf(base64.b64decode(added.leaf))
    assert leaf.payload["schema"] == 3 and leaf.body["case_name"] == {"_sd": case.case_id}
    assert name.encode() not in base64.b64decode(added.leaf)
    assert added.disclosed is not None and (added.disclosed[-1].path, added.disclosed[-1].value) == ("case_name", name)
    # Scored, invoked and retired by the handle; the name names no case.
    score = b.client.post(b.score(case, 0.75).sign(b.harness))
    assert decode_leaf(base64.b64decode(b.client.entry(score.index).leaf)).body["case_id"] == case.case_id
    with pytest.raises(problems.CaseUnknown) as e:
        b.client.post(dataclasses.replace(b.score(case, 0.75), case_id=name).sign(b.harness))
    assert e.value.field == "event.body.case_id"
    b.client.post(ev.RubricInvoked(b.run_id, case.case_id, f"{b.name}-inv-1").sign(b.harness))
    b.client.post(ev.RubricCompleted(f"{b.name}-inv-1").sign(b.harness))
    # The projection counts the case under its handle.
    assert case.case_id in [x.case_id for x in b.client.projection(b.name).view.evidence]
    retired = b.client.post(ev.CaseRetired.cosigned(case.case_id, case.case_digest, "superseded",
                                                    retired_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0]))
    assert decode_leaf(base64.b64decode(b.client.entry(retired.index).leaf)).body["case_id"] == case.case_id
    with pytest.raises(problems.CaseNotActive):
        b.client.post(b.score(case, 0.5).sign(b.harness))
    # The package's own replay accepts every entry the server accepted.
    r = Replica.open(tmp_path / "replica", auditor.keys)
    r.follow(auditor, auditor.checkpoint())
    assert r.rules.handle_origin("case", case.case_id) == added.index and r.rules.schema() == 3


def test_the_packages_disclosure_check_agrees_with_the_servers_on_a_schema_3_entry(bench: Bench, auditor_token: str) -> None:
    """The server checks a write's disclosures at its door and keeps them in field order
    (`events::disclose::open`); the auditor is served exactly the ones the package sent,
    in the order the package sent them, companion last, and the package's check of them
    against the leaf (`disclose.check_disclosed`) opens every committed field."""
    b = bench
    case, bound = b.draft(f"{b.name}-agree").bind()
    env = ev.CaseAdded.cosigned(b.name, case, source="curated", source_ref="GHSA-2026-agree é", added_at="2026-11-20T00:00:00Z",
                                added_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0], bound=[bound])
    r = b.client.post(env)
    e = b.server.client(token=auditor_token).entry(r.index)
    assert e.disclosures == list(env.disclosures) and env.disclosures[-1] == bound.disclosure
    leaf = decode_leaf(base64.b64decode(e.leaf))
    opened = disclose.check_disclosed(leaf.kind, leaf.body, e.disclosures)
    assert opened == e.disclosed
    assert [(o.path, o.value) for o in opened] == [
        ("title", case.title), ("disposition", case.disposition), ("difficulty", case.difficulty),
        ("provenance.source_ref", "GHSA-2026-agree é"), ("case_name", f"{b.name}-agree")]
    h = disclose.handle_field(leaf.kind, leaf.body)
    assert h is not None and h.derived and h.handle == case.case_id == bound.handle


def test_a_value_written_in_the_identifier_gets_its_handle_at_signing(bench: Bench) -> None:
    """No companion given: the package moves the value into it and names the handle, as
    `events::disclose::commit` does; the handle is what later events name."""
    b = bench
    gate, enrolled = enrol(b, "rag-gate", "gate")
    writer, _ = enrol(b, "writer", "rag-writer")
    assert enrolled.handle is not None and enrolled.body["identity_name"] == {"_sd": enrolled.handle}
    cp = b.client.checkpoint()
    minted = ev.CapabilityMinted(f"{b.name}-cap", f"{b.name}-wf", "2026-11-21T00:00:00Z", ev.CheckpointRef(cp.size, cp.root_hex),
                                 "2099-01-01T00:00:00Z").sign(gate)
    b.client.post(minted)
    assert minted.handle is not None and minted.handle != f"{b.name}-wf"
    with pytest.raises(problems.CapabilityWorkflowMismatch):
        b.client.post(ev.RagExampleWritten(f"{b.name}-cap", f"{b.name}-wf", digest("example")).sign(writer))
    b.client.post(ev.RagExampleWritten(f"{b.name}-cap", minted.handle, digest("example")).sign(writer))


def test_another_key_of_one_person_names_their_handle_and_cannot_co_sign_with_the_first(bench: Bench) -> None:
    """What handles are for: two keys of one person share one identity handle, so the
    rule that two co-signers have different identities still holds without the
    identities in the log."""
    b = bench
    first, env = enrol(b, "curator-c", "curator")
    assert env.handle is not None
    second = SigningKey.generate(f"{b.name}-curator-c-2")
    b.client.post(ev.PrincipalEnrolled(second.public_key_b64, env.handle, ["curator"],
                                       identity_name=f"{first.name}@example.org").sign(b.server.operator))
    case, bound = b.draft(f"{b.name}-one-person").bind()
    with pytest.raises(problems.CosignersNotDistinct):
        b.client.post(ev.CaseAdded.cosigned(b.name, case, source="curated", source_ref="r", added_at="2026-11-20T00:00:00Z",
                                            added_by=first, reviewed_by=second).sign(first, bound=[bound]))


# --- the door refuses, each with its typed problem ----------------------------------------


def test_attack_a_case_under_a_handle_no_event_gave_is_refused_at_the_door_as_by_the_package(
    bench: Bench, auditor_token: str, tmp_path: Path
) -> None:
    """`handle_not_derived`: the server's rule (`State::check_handle`) and the package's
    (`acceptance.State`, at the state of the server's own log) refuse the same envelope."""
    b = bench
    value = disclose.bind("case_name", f"{b.name}-stray")
    stranger = disclose.bind("case_name", f"{b.name}-stray").handle
    d = dataclasses.replace(b.draft(f"{b.name}-stray"), case_id=stranger, case_name=f"{b.name}-stray")
    env = ev.CaseAdded.cosigned(b.name, d, source="curated", source_ref="r", added_at="2026-11-20T00:00:00Z",
                                added_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0], bound=[value])
    assert env.handle == stranger and env.body["case_name"] == {"_sd": value.handle}
    auditor = b.server.client(token=auditor_token)
    replica = Replica.open(tmp_path / "replica", auditor.keys)
    replica.follow(auditor, auditor.checkpoint())
    with pytest.raises(RuleBroken) as mine:
        replica.rules.check(decode_leaf(env.leaf_bytes(replica.fold.last_at or 0)), replica.size, lambda *_: None)
    with pytest.raises(problems.HandleNotDerived) as theirs:
        b.client.post(env)
    assert (mine.value.code, mine.value.field) == (theirs.value.code, theirs.value.field) == ("handle_not_derived", "event.body.case_id")


def test_attack_a_second_handle_for_one_case_is_refused_at_the_door(bench: Bench) -> None:
    """`handle_value_bound`: the door knows the values (it holds the disclosures); the log
    alone cannot show two handles are one case, so only the door refuses this."""
    b = bench
    name = CASE_NAMES[b.cases[1].case_id]
    again, bound = b.draft(name).bind()
    assert again.case_id != b.cases[1].case_id
    with pytest.raises(problems.HandleValueBound) as e:
        b.client.post(ev.CaseAdded.cosigned(b.name, again, source="curated", source_ref="r", added_at="2026-11-20T00:00:00Z",
                                            added_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0], bound=[bound]))
    assert e.value.field == "event.body.case_id"


def test_attack_an_earlier_handle_beside_another_value_is_refused_at_the_door(bench: Bench) -> None:
    """`handle_value_mismatch`: a key enrolled under someone else's identity handle."""
    b = bench
    _, env = enrol(b, "curator-d", "curator")
    assert env.handle is not None
    mallory = SigningKey.generate(f"{b.name}-mallory")
    with pytest.raises(problems.HandleValueMismatch) as e:
        b.client.post(ev.PrincipalEnrolled(mallory.public_key_b64, env.handle, ["curator"],
                                           identity_name="mallory@example.org").sign(b.server.operator))
    assert e.value.field == "event.body.identity"


def test_attack_a_schema_2_write_after_the_switch_is_refused(bench: Bench) -> None:
    with pytest.raises(problems.SchemaSuperseded) as e:
        bench.client.post(ev.PrincipalRevoked(SigningKey.generate("x").key_id, "never enrolled").sign(bench.server.operator, schema=2))
    assert e.value.field == "schema"


def test_attack_a_companion_in_schema_2_is_refused(bench: Bench) -> None:
    b = bench
    k = SigningKey.generate(f"{b.name}-companion-2")
    d = disclose.disclosure(b"\x07" * 32, "identity_name", "k@example.org")
    body = {"public_key": k.public_key_b64, "identity": "k@example.org", "roles": ["harness"], "identity_name": {"_sd": disclose.digest(d)}}
    with pytest.raises(problems.UnknownField) as e:
        b.client.post(dataclasses.replace(raw(b.server.operator, 2, "principal.enrolled", body), disclosures=(d,)))
    assert e.value.field == "event.body.identity_name"


def test_attack_a_schema_3_enrolment_without_its_companion_is_refused(bench: Bench) -> None:
    b = bench
    k = SigningKey.generate(f"{b.name}-companion-3")
    body = {"public_key": k.public_key_b64, "identity": "k@example.org", "roles": ["harness"]}
    with pytest.raises(problems.MissingField) as e:
        b.client.post(raw(b.server.operator, 3, "principal.enrolled", body))
    assert e.value.field == "event.body.identity_name"
    # What the package signs from the same body holds it.
    assert json.loads(sign_payload(b.server.operator, "principal.enrolled", body).payload)["event"]["body"]["identity_name"]


# --- a reader with a role checks the door's rule again ------------------------------------


def test_a_walk_with_a_reader_token_passes_on_an_honest_log_with_handles(bench: Bench, auditor_token: str, tmp_path: Path) -> None:
    """One value, one handle, checked again from the disclosures a reader with a role is
    served (`handles.Audit`, as `ledger verify --token` does): a replica that follows the
    server's log from entry 0 meets every handle given, a person's second key naming
    theirs, and, after their identity is redacted where its handle was given, the same
    person enrolled under a new handle, which the door and the walk both allow."""
    b = bench
    auditor = b.server.client(token=auditor_token)
    first, env = enrol(b, "curator-e", "curator")
    assert env.handle is not None
    second = SigningKey.generate(f"{b.name}-curator-e-2")
    b.client.post(ev.PrincipalEnrolled(second.public_key_b64, env.handle, ["curator"],
                                       identity_name=f"{first.name}@example.org").sign(b.server.operator))
    replica = Replica.open(tmp_path / "replica", auditor.keys)
    replica.follow(auditor, auditor.checkpoint())
    assert replica.handles.known >= len(b.cases) + 8  # the bench's people and cases, and curator-e
    origin = replica.rules.handle_origin("identity", env.handle)
    assert origin is not None
    b.client.post(ev.FieldRedacted.cosigned(origin, auditor.entry(origin).leaf_hash, "identity_name", "asked to be forgotten",
                                            requested_by=b.maintainers[0], confirmed_by=b.maintainers[1]).sign(b.maintainers[0]))
    again = ev.PrincipalEnrolled.of(SigningKey.generate(f"{b.name}-curator-e-3"), f"{first.name}@example.org",
                                    ["curator"]).sign(b.server.operator)
    b.client.post(again)
    assert again.handle is not None and again.handle != env.handle
    # The replica walks on from where it stood (the redaction forgets the first handle)...
    replica.follow(auditor, auditor.checkpoint())
    # ... and a walk from entry 0 is served the first companion as redacted: passed over.
    Replica.open(tmp_path / "again", auditor.keys).follow(auditor, auditor.checkpoint())
