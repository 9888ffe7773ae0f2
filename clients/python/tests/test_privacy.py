"""Sensitive values as commitments against a real server (docs/PRIVACY.md): the package
posts schema 3 with its disclosures (case ids, identities and workflow ids as handles,
the value committed where it is first named); a reader without a role sees commitments
only; the auditor listed in the server's readers file receives every disclosure, and
each one checks against the leaf; the door refuses what breaks the schema-2 and schema-3
rules, each with its typed exception."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import Bench, LedgerServer
from evidence_ledger import Incomplete, Replica, SigningKey, canonical, disclose, problems, replay_projections
from evidence_ledger import events as ev
from evidence_ledger.envelope import PAYLOAD_TYPE, Envelope, decode_leaf, pae, sign_payload
from evidence_ledger.wire import WriteReceipt


@dataclasses.dataclass
class Posted:
    receipt: WriteReceipt
    envelope: Envelope
    event: ev.Event


@pytest.fixture(scope="module")
def posted(reader_server: LedgerServer) -> list[Posted]:
    """One entry of each kind with committed fields, posted through the package."""
    b = Bench(reader_server, "privacy", cases=2)
    c, op = b.client, reader_server.operator
    out: list[Posted] = []

    def post(event: ev.Event, key: SigningKey) -> None:
        env = event.sign(key)
        out.append(Posted(c.post(env), env, event))

    post(b.score(b.cases[0], 0.8), b.harness)
    post(ev.CaseRetired.cosigned(b.cases[1].case_id, b.cases[1].case_digest, "superseded by a harder case",
                                 retired_by=b.curators[0], reviewed_by=b.curators[1]), b.curators[0])
    draft = dataclasses.replace(b.draft(f"{b.name}-p0"), curation_class="corpus-derived", disposition="negative")
    post(ev.CaseProposed(f"{b.name}-prop-0", b.name, draft, "outcome-ledger INC-4411"), b.reconciler)
    post(ev.ProposalRejected(f"{b.name}-prop-0", "not reproducible"), b.curators[1])
    gate = SigningKey.generate(f"{b.name}-rag-gate")
    post(ev.PrincipalEnrolled.of(gate, f"{gate.name}@example.org", ["gate"]), op)
    cp = c.checkpoint()
    post(ev.CapabilityMinted(f"{b.name}-cap", f"{b.name}-wf", "2026-11-21T00:00:00Z", ev.CheckpointRef(cp.size, cp.root_hex),
                             "2099-01-01T00:00:00Z"), gate)
    post(ev.RagRecordQuarantined(f"{b.name}-cap", "poisoned example"), gate)
    post(ev.PrincipalRevoked(gate.key_id, "rotated"), op)
    # A case whose curators co-sign its handle: bound before the statement is made.
    late, bound = b.draft(f"{b.name}-late").bind()
    added = ev.CaseAdded.cosigned(b.name, late, source="curated", source_ref="GHSA-2024-0001 \"axios\" é",
                                  added_at="2026-11-20T00:00:00Z", added_by=b.curators[0], reviewed_by=b.curators[1])
    env = added.sign(b.curators[0], bound=[bound])
    out.append(Posted(c.post(env), env, added))
    return out


def clear_values(p: Posted) -> list[tuple[str, Any]]:
    """The value of each committed field of the event as built: a schema-3 companion left
    out is the identifier's value (the package moved it there when it signed)."""
    body = p.event.body()
    h = disclose.handle_field(p.event.kind, body)
    if h is not None and h.name is None:
        body = json.loads(json.dumps(body))
        parts = h.spec.name_path.split(".")
        parent = body if len(parts) == 1 else body[parts[0]]
        parent[parts[-1]] = h.handle
    out = []
    for path in disclose.committed_paths(p.event.kind):
        v: Any = body
        for part in path.split("."):
            v = v[part]
        out.append((path, v))
    return out


def test_the_package_posts_schema_3_with_a_disclosure_for_each_committed_field(posted: list[Posted]) -> None:
    assert {p.event.kind for p in posted} == set(disclose.COMMITTED) - {"field.redacted"}  # below, on its own
    for p in posted:
        assert json.loads(p.envelope.payload)["schema"] == 3
        assert len(p.envelope.disclosures) == len(disclose.committed_paths(p.event.kind)) >= 1


def test_each_value_named_first_is_committed_beside_its_handle(posted: list[Posted]) -> None:
    """Where a case id, an identity or a workflow id is named first, the signed body holds
    the value's commitment in the companion and its digest, the handle, in the identifier;
    the disclosure of the companion (the last one) opens to the value."""
    named = [p for p in posted if disclose.handle_field(p.event.kind, p.event.body()) is not None]
    assert {p.event.kind for p in named} == set(disclose.HANDLE_FIELDS)
    for p in named:
        h = disclose.handle_field(p.event.kind, p.envelope.body)
        assert h is not None and h.derived and p.envelope.handle == h.handle
        assert h.handle == disclose.digest(p.envelope.disclosures[-1])
        assert disclose.parse(p.envelope.disclosures[-1]) == clear_values(p)[-1]
        assert clear_values(p)[-1][0] == h.spec.name_path


def test_a_reader_without_a_role_sees_commitments_only(reader_server: LedgerServer, posted: list[Posted]) -> None:
    for client in (reader_server.client(), reader_server.client(token="not-a-listed-reader")):
        for p in posted:
            e = client.entry(p.receipt.index)
            assert e.disclosures is None and e.redacted is None and e.disclosed is None
            leaf = decode_leaf(base64.b64decode(e.leaf))
            assert leaf.payload["schema"] == 3
            assert [(path, sd) for path, sd in disclose.commitments(e.kind, leaf.body)] == \
                [(path, disclose.digest(d)) for (path, _), d in zip(clear_values(p), p.envelope.disclosures)]
            for _, value in clear_values(p):
                assert json.dumps(value, ensure_ascii=False).encode() not in leaf.envelope.payload


def test_the_auditor_receives_each_disclosure_and_it_checks_against_the_leaf(
    reader_server: LedgerServer, auditor_token: str, posted: list[Posted]
) -> None:
    auditor = reader_server.client(token=auditor_token)
    for p in posted:
        e = auditor.entry(p.receipt.index)
        assert e.disclosures == list(p.envelope.disclosures) and e.redacted == []
        assert e.disclosed is not None and [(o.path, o.value) for o in e.disclosed] == clear_values(p)
        # As any holder of the disclosures can: against the leaf alone.
        leaf = decode_leaf(base64.b64decode(e.leaf))
        assert disclose.check_disclosed(leaf.kind, leaf.body, e.disclosures) == e.disclosed
    first = min(p.receipt.index for p in posted)
    last = max(p.receipt.index for p in posted)
    page = {e.index: e for e in auditor.entries(first, last - first + 1)}
    for p in posted:
        d = page[p.receipt.index].disclosed
        assert d is not None and [(o.path, o.value) for o in d] == clear_values(p)


def test_a_replay_by_the_auditor_checks_every_disclosure_and_agrees_with_every_projection(
    reader_server: LedgerServer, auditor_token: str, posted: list[Posted], tmp_path: Path
) -> None:
    for name, client in (("auditor", reader_server.client(token=auditor_token)), ("public", reader_server.client())):
        r = replay_projections(client, Replica.open(tmp_path / name, client.keys))
        assert r.task_classes >= 1 and r.size == client.checkpoint().size
        rules = Replica.open(tmp_path / name, client.keys).rules
        assert rules.commitments_from == 0 and rules.handles_from == 0 and rules.schema() == 3
        genesis = decode_leaf(base64.b64decode(client.entry(0).leaf))
        assert rules.handle_origin("identity", genesis.body["identity"]) == 0


# --- the door (events::disclose::open; docs/PRIVACY.md, "Writing") -----------------------


@pytest.fixture(scope="module")
def door(reader_server: LedgerServer) -> Bench:
    return Bench(reader_server, "door", cases=1)


def retire(b: Bench, reason: str = "superseded") -> Envelope:
    c = b.cases[0]
    return ev.CaseRetired.cosigned(c.case_id, c.case_digest, reason, retired_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0])


def test_a_schema_1_write_to_a_log_in_schema_3_is_refused(door: Bench) -> None:
    with pytest.raises(problems.SchemaSuperseded) as e:
        door.client.post(ev.RunFinished(door.run_id).sign(door.harness, schema=1))
    assert e.value.status == 422 and e.value.field == "schema"


def test_a_schema_2_write_to_a_log_in_schema_3_is_refused(door: Bench) -> None:
    """`ledger init` writes genesis in schema 3: the log switched at entry 0."""
    with pytest.raises(problems.SchemaSuperseded) as e:
        door.client.post(ev.RunFinished(door.run_id).sign(door.harness, schema=2))
    assert e.value.status == 422 and e.value.field == "schema" and "from entry 0 on" in e.value.detail


def test_a_write_without_its_disclosures_is_refused(door: Bench) -> None:
    with pytest.raises(problems.DisclosureMissing) as e:
        door.client.post(dataclasses.replace(retire(door), disclosures=()))
    assert e.value.field == "event.body.reason"


def test_a_write_with_a_disclosure_no_field_commits_to_is_refused(door: Bench) -> None:
    env = retire(door)
    extra = disclose.disclosure(b"\x07" * 32, "reason", "another reason")
    with pytest.raises(problems.DisclosureUnused) as e:
        door.client.post(dataclasses.replace(env, disclosures=env.disclosures + (extra,)))
    assert e.value.field == "disclosures[1]"


def test_a_write_whose_disclosure_names_another_field_is_refused(door: Bench) -> None:
    body = json.loads(retire(door).payload)["event"]["body"]
    wrong = disclose.disclosure(b"\x07" * 32, "case_id", "superseded")
    body["reason"] = {"_sd": disclose.digest(wrong)}
    env = sign_payload(door.curators[0], "case.retired", body)
    assert env.disclosures == ()
    with pytest.raises(problems.DisclosureFieldMismatch) as e:
        door.client.post(dataclasses.replace(env, disclosures=(wrong,)))
    assert e.value.field == "disclosures[0]"


def test_a_malformed_disclosure_is_refused(door: Bench) -> None:
    body = json.loads(retire(door).payload)["event"]["body"]
    spaced = disclose.b64url(b'["AAAAAAAAAAAAAAAAAAAAAA", "reason", "superseded"]')
    body["reason"] = {"_sd": disclose.digest(spaced)}
    env = sign_payload(door.curators[0], "case.retired", body)
    with pytest.raises(problems.DisclosureMalformed):
        door.client.post(dataclasses.replace(env, disclosures=(spaced,)))


def test_a_value_in_clear_in_schema_2_is_refused(door: Bench) -> None:
    body = ev.CaseRetired.cosigned(door.cases[0].case_id, door.cases[0].case_digest, "superseded",
                                   retired_by=door.curators[0], reviewed_by=door.curators[1]).body()
    k = door.curators[0]
    payload = canonical.encode({"schema": 2, "id": f"clear-{k.key_id[:12]}", "signer": k.key_id,
                                "issued_at": "2026-11-20T00:00:00Z", "event": {"kind": "case.retired", "body": body}})
    with pytest.raises(problems.SensitiveValueInClear) as e:
        door.client.post(Envelope(payload, k.key_id, k.sign(pae(PAYLOAD_TYPE, payload))))
    assert e.value.field == "event.body.reason"


# --- redaction (field.redacted) ----------------------------------------------------------


def test_a_redacted_field_is_listed_as_redacted_and_the_rest_still_opens(
    reader_server: LedgerServer, auditor_token: str, tmp_path: Path
) -> None:
    b = Bench(reader_server, "redact", cases=0)
    case, bound = b.draft(f"{b.name}-pasted").bind()
    env = ev.CaseAdded.cosigned(b.name, case, source="curated", source_ref="a customer's name",
                                added_at="2026-11-20T00:00:00Z", added_by=b.curators[0], reviewed_by=b.curators[1]).sign(b.curators[0], bound=[bound])
    r = b.client.post(env)
    m = b.maintainers

    def redact(field: str, leaf_hash: str = r.leaf_hash) -> Envelope:
        return ev.FieldRedacted.cosigned(r.index, leaf_hash, field, "pasted by mistake", requested_by=m[0], confirmed_by=m[1]).sign(m[0])

    redaction = b.client.post(redact("provenance.source_ref"))
    auditor = reader_server.client(token=auditor_token)
    e = auditor.entry(r.index)
    assert e.redacted == ["provenance.source_ref"] and e.disclosures is not None and len(e.disclosures) == 4
    assert e.disclosed is not None
    assert {o.path: o.value for o in e.disclosed} == {
        "title": f"case {b.name}-pasted", "disposition": "positive", "difficulty": "medium", "provenance.source_ref": None,
        "case_name": f"{b.name}-pasted"}
    # The redaction's own reason is committed, and opens for the auditor.
    d = auditor.entry(redaction.index).disclosed
    assert d is not None and [(o.path, o.value) for o in d] == [("reason", "pasted by mistake")]
    with pytest.raises(problems.AlreadyRedacted):
        b.client.post(redact("provenance.source_ref"))
    with pytest.raises(problems.RedactionFieldNotCommitted):
        b.client.post(redact("case_id"))
    with pytest.raises(problems.RedactionTargetMismatch):
        b.client.post(redact("title", leaf_hash="0" * 64))
    # A replay checks the redaction against the entry it names, and keeps it.
    rp = replay_projections(auditor, Replica.open(tmp_path / "replica", auditor.keys))
    assert rp.size > redaction.index
    saved = Replica.open(tmp_path / "replica", auditor.keys).rules
    assert (r.index, "provenance.source_ref") in saved.redactions
    assert saved.committed[r.index] == [r.leaf_hash, list(disclose.COMMITTED["case.added"])]


def test_a_walk_after_a_real_redaction_passes_and_one_to_a_checkpoint_before_it_is_told_to_run_again(
    reader_server: LedgerServer, auditor_token: str, tmp_path: Path
) -> None:
    """An honest server answers a redacted field as redacted from the moment the
    redaction is acknowledged. A walk to a checkpoint taken before the redaction finds
    no `field.redacted` entry below it for that answer (`Incomplete`, asking to run
    again); a walk to the checkpoint after it passes, as does a full replay."""
    b = Bench(reader_server, "walk-redact", cases=0)
    case, bound = b.draft(f"{b.name}-pasted").bind()
    r = b.client.post(ev.CaseAdded.cosigned(b.name, case, source="curated", source_ref="a customer's name",
                                            added_at="2026-11-20T00:00:00Z", added_by=b.curators[0],
                                            reviewed_by=b.curators[1]).sign(b.curators[0], bound=[bound]))
    auditor = reader_server.client(token=auditor_token)
    before = auditor.checkpoint()
    m = b.maintainers
    redaction = b.client.post(
        ev.FieldRedacted.cosigned(r.index, r.leaf_hash, "title", "pasted by mistake", requested_by=m[0], confirmed_by=m[1]).sign(m[0])
    )
    assert auditor.entry(r.index).redacted == ["title"]
    with pytest.raises(Incomplete, match="no `field.redacted` entry below .* run again") as e:
        Replica.open(tmp_path / "early", auditor.keys).follow(auditor, before)
    assert e.value.what == f"entry {r.index}.redacted" and "`title`" in e.value.reason
    after = auditor.checkpoint()
    assert after.size > redaction.index
    replica = Replica.open(tmp_path / "late", auditor.keys)
    assert replica.follow(auditor, after) == after.size
    assert (r.index, "title") in replica.rules.redactions
    rp = replay_projections(auditor, Replica.open(tmp_path / "audit", auditor.keys))
    assert rp.size >= after.size
