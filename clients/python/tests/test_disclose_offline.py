"""Sensitive fields as commitments, without a server (docs/PRIVACY.md): what signing
commits, the write body, the form each schema requires when a payload is decoded, and
the table of committed fields held to the published one; schema 3's handles: what
signing derives, keeps or takes from a binding, and the companion each schema holds
or not."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evidence_ledger import SigningKey, canonical, disclose
from evidence_ledger import events as ev
from evidence_ledger.envelope import PAYLOAD_TYPE, Envelope, decode_leaf, pae, sign_payload
from evidence_ledger.errors import InvalidInput

REPO = Path(__file__).resolve().parents[3]
KEY = SigningKey.generate("disclose")
OTHER = SigningKey.generate("disclose-other")
D = "blake3:" + "ab" * 32
DRAFT = ev.CaseDraft("case-7", "a held-out case", "ambiguous", "hard", "held-out", D, D)
#: A case named by an earlier handle (`case-7`), its name committed beside it.
NAMED = ev.CaseDraft("case-7", "a held-out case", "ambiguous", "hard", "held-out", D, D, case_name="GHSA-2024-0007")
CP = ev.CheckpointRef(3, "00" * 32)


def case_added(draft: ev.CaseDraft = DRAFT) -> ev.CaseAdded:
    st = ev.CoSignature.sign(KEY, b"statement")
    st2 = ev.CoSignature.sign(OTHER, b"statement")
    return ev.CaseAdded("tc", draft, ev.Provenance("curated", "GHSA-2024-0001 \"axios\" é", "2026-11-20T00:00:00Z", st, st2))


def one_of_each() -> list[ev.Event]:
    """One event of each kind that has committed fields."""
    st = ev.CoSignature.sign(KEY, b"statement")
    st2 = ev.CoSignature.sign(OTHER, b"statement")
    return [
        ev.PrincipalEnrolled.of(OTHER, "other@example.org", ["harness"]),
        ev.PrincipalRevoked(KEY.key_id, "key lost"),
        case_added(NAMED),
        ev.CaseRetired("case-7", "superseded by case-8", st, st2),
        ev.CaseProposed("prop-7", "tc", DRAFT, "outcome-ledger INC-7"),
        ev.ProposalRejected("prop-7", "not reproducible"),
        ev.ScoreRecorded(run_id="run-1", task_class="tc", case_id="case-7", case_digest=D, rubric_digest=D, cassette_digest=D,
                         harness_version="h 1", image_digest=D, score=ev.BenchScore(True, 0.5), started_at="2026-11-20T00:00:00Z",
                         finished_at="2026-11-20T00:01:00Z", operator_fingerprint="runner-3"),
        ev.CapabilityMinted("cap-1", "wf-1", "2026-11-20T00:00:00Z", CP, "2099-01-01T00:00:00Z"),
        ev.RagRecordQuarantined("cap-1", "poisoned"),
    ]


def at(body: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        body = body[part]
    return body


def value(event: ev.Event, path: str) -> Any:
    """The value of the committed field `path` of `event` as built: a schema-3 companion
    left out is the identifier's value."""
    h = disclose.handle_field(event.kind, event.body())
    if h is not None and path == h.spec.name_path and h.name is None:
        return h.handle
    return at(event.body(), path)


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: e.kind)
def test_signing_commits_every_sensitive_value_and_its_disclosures_open_the_commitments(event: ev.Event) -> None:
    env = event.sign(KEY)
    payload = json.loads(env.payload)
    body = payload["event"]["body"]
    paths = disclose.committed_paths(event.kind)
    assert payload["schema"] == 3 and paths and len(env.disclosures) == len(paths)
    for path, d in zip(paths, env.disclosures):
        assert at(body, path) == {"_sd": disclose.digest(d)}
        assert disclose.parse(d) == (path, value(event, path))
        assert len(disclose.b64url_decode(json.loads(disclose.b64url_decode(d) or b"")[0]) or b"") == 32
    opened = disclose.check_disclosed(event.kind, body, env.disclosures)
    assert [(o.path, o.value) for o in opened] == [(p, value(event, p)) for p in paths]
    # The leaf decodes (the form schema 3 requires), and holds no value of them.
    leaf = decode_leaf(env.leaf_bytes(1_790_000_000_000_000))
    assert leaf.body == body
    for p in paths:
        assert json.dumps(value(event, p), ensure_ascii=False).encode() not in env.payload
    # Fresh salts: the same event signed again commits to other digests.
    again = json.loads(event.sign(KEY, id=payload["id"], issued_at=payload["issued_at"]).payload)["event"]["body"]
    assert all(at(again, p) != at(body, p) for p in paths)


def test_schema_1_signs_the_values_in_clear_with_no_disclosures() -> None:
    event = case_added()
    env = event.sign(KEY, schema=1)
    payload = json.loads(env.payload)
    assert payload["schema"] == 1 and payload["event"]["body"] == event.body() and env.disclosures == ()
    assert env.write_body() == env.to_json()
    assert decode_leaf(env.leaf_bytes(0)).body == event.body()


def test_the_write_body_is_the_envelope_alone_or_its_disclosures_then_the_envelope() -> None:
    plain = ev.RunFinished("run-1").sign(KEY)
    assert plain.disclosures == () and plain.write_body() == plain.to_json()
    env = case_added(NAMED).sign(KEY)
    body = env.write_body()
    assert body.startswith(b'{"disclosures":["') and body == canonical.encode(json.loads(body))
    doc = json.loads(body)
    assert list(doc) == ["disclosures", "envelope"]
    assert doc["disclosures"] == list(env.disclosures) and doc["envelope"] == env.to_dict()
    assert Envelope.parse(doc["envelope"]) == env


def schema_committed(schema: dict[str, Any]) -> set[str]:
    """The paths of the fields a published body schema lets hold a `Commitment`."""
    defs = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].removeprefix("#/$defs/")]
        return node

    def commitment(node: dict[str, Any]) -> bool:
        # A `Commitment`, or a type one of whose alternatives is (`Sensitive<T>`, and a
        # schema-3 companion `Option<Sensitive<T>>`).
        if node.get("$ref") == "#/$defs/Commitment":
            return True
        return any(commitment(alt) for alt in resolve(node).get("anyOf", []))

    def walk(node: dict[str, Any], prefix: str) -> set[str]:
        out: set[str] = set()
        for name, sub in node.get("properties", {}).items():
            if commitment(sub):
                out.add(prefix + name)
            else:
                out |= walk(resolve(sub), f"{prefix}{name}.")
        return out

    return walk(schema, "")


def test_the_committed_fields_are_those_of_the_published_schemas_and_of_docs_privacy() -> None:
    published = {}
    for f in sorted((REPO / "docs/schemas/events").glob("*.json")):
        paths = schema_committed(json.loads(f.read_text(encoding="utf-8")))
        if paths:
            published[f.stem] = paths
    assert published == {k: set(v) for k, v in disclose.COMMITTED.items()}
    text = (REPO / "docs/PRIVACY.md").read_text(encoding="utf-8")
    # The committed fields of every kind, in order: a row that ends in a schema-3
    # companion says so, and only those do.
    table = text[text.index("| kind | committed fields |"):]
    rows = re.findall(r"^\| `([a-z_.]+)` \| (`[^|]+?`)( \(schema 3\))? \|$", table.split("\n\n")[0], re.M)
    assert {kind for kind, _, _ in rows} == set(disclose.COMMITTED)
    for kind, fields, schema_3 in rows:
        assert tuple(re.findall(r"`([a-z_.]+)`", fields)) == disclose.committed_paths(kind), kind
        assert bool(schema_3) == (kind in disclose.HANDLE_FIELDS), kind
    # Schema 3's table: where each value is named first, (identifier, companion).
    handles = text[text.index("| value | named first in (identifier, companion) |"):].split("\n\n")[0]
    named = re.findall(r"`([a-z_.]+)` \(`([a-z_.]+)`, `([a-z_.]+)`\)", handles)
    assert {kind: (h, n) for kind, h, n in named} == {
        kind: (spec.handle_path, spec.name_path) for kind, spec in disclose.HANDLE_FIELDS.items()}
    for kind, spec in disclose.HANDLE_FIELDS.items():
        assert disclose.committed_paths(kind)[-1] == spec.name_path, kind


def forged(schema: int, body: dict[str, Any], kind: str = "case.retired") -> bytes:
    """An envelope signed over a payload this package would not write."""
    payload = canonical.encode({"schema": schema, "id": "forged-0001", "signer": KEY.key_id,
                                "issued_at": "2026-11-20T00:00:00Z", "event": {"kind": kind, "body": body}})
    return Envelope(payload, KEY.key_id, KEY.sign(pae(PAYLOAD_TYPE, payload))).to_json()


def retired(reason: Any) -> dict[str, Any]:
    cs = {"key_id": KEY.key_id, "signature": "A" * 86 + "=="}
    return {"case_id": "case-7", "reason": reason, "retired_by": cs, "reviewed_by": cs}


def test_a_commitment_in_a_schema_1_payload_is_refused() -> None:
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(forged(1, retired({"_sd": disclose.digest("x")})))
    assert e.value.code == "commitment_not_allowed" and e.value.field == "envelope.payload.event.body.reason"


def test_a_value_in_clear_in_a_schema_2_payload_is_refused() -> None:
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(forged(2, retired("superseded")))
    assert e.value.code == "sensitive_value_in_clear" and e.value.field == "envelope.payload.event.body.reason"


def test_a_commitment_that_is_not_a_sha256_digest_is_refused() -> None:
    good = disclose.digest("x")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    stray = good[:-1] + alphabet[alphabet.index(good[-1]) + 1]  # the same 32 bytes, a stray bit set
    assert disclose.is_digest(good) and not disclose.is_digest(stray)
    for bad in ("short", good + "A", good[:-1] + "=", good.replace(good[0], "+", 1), stray):
        with pytest.raises(InvalidInput) as e:
            Envelope.parse(forged(2, retired({"_sd": bad})))
        assert e.value.code == "invalid_value" and e.value.field == "envelope.payload.event.body.reason._sd", bad


def test_a_schema_other_than_1_to_3_is_refused() -> None:
    for schema in (1, 2, 3):
        Envelope.parse(forged(schema, {"run_id": "run-1"}, "run.finished"))
    for schema in (0, 4):
        with pytest.raises(InvalidInput) as e:
            Envelope.parse(forged(schema, {"run_id": "run-1"}, "run.finished"))
        assert e.value.code == "unsupported_schema"
        with pytest.raises(InvalidInput):
            sign_payload(KEY, "run.finished", {"run_id": "run-1"}, schema=schema)


# --- handles (schema 3; docs/PRIVACY.md, "Handles") ------------------------------------

#: Each kind that names a value first, built with the identifier holding the value and
#: no companion (as a schema-1 or schema-2 client writes it).
NAMED_FIRST: list[ev.Event] = [
    case_added(),
    ev.CaseProposed("prop-7", "tc", DRAFT, "outcome-ledger INC-7"),
    ev.PrincipalEnrolled.of(OTHER, "other@example.org", ["harness"]),
    ev.CapabilityMinted("cap-1", "wf-1", "2026-11-20T00:00:00Z", CP, "2099-01-01T00:00:00Z"),
]


@pytest.mark.parametrize("event", NAMED_FIRST, ids=lambda e: e.kind)
def test_a_companion_left_out_is_the_identifiers_value_and_the_identifier_becomes_its_handle(event: ev.Event) -> None:
    """`events::disclose::commit`: the value moves into the companion, committed last, and
    the identifier holds the commitment's digest."""
    body = event.body()
    spec = disclose.HANDLE_FIELDS[event.kind]
    named, disclosures = disclose.commit(event.kind, body)
    h = disclose.handle_field(event.kind, named)
    assert h is not None and h.derived and h.name == {"_sd": h.handle}
    assert h.handle == disclose.digest(disclosures[-1]) and disclose.is_digest(h.handle)
    assert disclose.parse(disclosures[-1]) == (spec.name_path, at(body, spec.handle_path))
    assert len(disclosures) == len(disclose.committed_paths(event.kind))
    # A companion in clear holding the identifier's value is derived the same way.
    again = json.loads(json.dumps(body))
    parent = again["draft"] if spec.name_path.startswith("draft.") else again
    parent[spec.name_path.split(".")[-1]] = at(body, spec.handle_path)
    h2 = disclose.handle_field(event.kind, disclose.commit(event.kind, again)[0])
    assert h2 is not None and h2.derived and h2.handle != h.handle  # a fresh salt, a fresh handle
    # Schema 2 commits no companion and keeps the identifier in clear.
    two, _ = disclose.commit(event.kind, body, schema=2)
    h3 = disclose.handle_field(event.kind, two)
    assert h3 is not None and h3.name is None and h3.handle == at(body, spec.handle_path)


def test_a_companion_beside_another_identifier_is_committed_and_the_identifier_kept() -> None:
    """Naming an earlier handle (`case-7`) beside the value: the value is committed, the
    handle stays as it is (not derived: the log must already know it)."""
    env = case_added(NAMED).sign(KEY)
    h = disclose.handle_field("case.added", env.body)
    assert h is not None and h.handle == "case-7" and not h.derived and env.handle == "case-7"
    assert disclose.parse(env.disclosures[-1]) == ("case_name", "GHSA-2024-0007")
    assert h.name == {"_sd": disclose.digest(env.disclosures[-1])}


def test_a_bound_value_keeps_the_handle_its_binding_gave_it() -> None:
    """`bind` first (the handle goes into the co-signed statement), then sign with the
    binding: the companion is committed with the binding's disclosure, so the handle is
    the one the curators co-signed, whether the draft names it or leaves it to `commit`."""
    b = disclose.bind("case_name", "GHSA-2024-0009")
    assert b.handle == disclose.digest(b.disclosure) and disclose.parse(b.disclosure) == ("case_name", "GHSA-2024-0009")
    assert disclose.bind("case_name", "GHSA-2024-0009") != b  # a random salt each time
    st = ev.case_provenance_statement(b.handle, "2026-11-20T00:00:00Z", D)
    cs = ev.CoSignature.sign(KEY, st), ev.CoSignature.sign(OTHER, st)
    prov = ev.Provenance("curated", "r", "2026-11-20T00:00:00Z", *cs)
    handled = ev.CaseAdded("tc", replace(DRAFT, case_id=b.handle, case_name="GHSA-2024-0009"), prov).sign(KEY, bound=[b])
    by_name = ev.CaseAdded("tc", replace(DRAFT, case_id="GHSA-2024-0009"), prov).sign(KEY, bound=[b])
    for env in (handled, by_name):
        assert env.handle == b.handle and env.disclosures[-1] == b.disclosure
        assert env.body["case_name"] == {"_sd": b.handle}
    # A companion committed already is opened by the binding whose handle it holds.
    body = handled.body
    again, disclosures = disclose.commit("case.added", body, bound=[b])
    assert again == body and disclosures == [b.disclosure]
    # `CaseDraft.bind` does the same for a draft named by its id.
    d, b2 = DRAFT.bind("draft.case_name")
    assert (d.case_id, d.case_name) == (b2.handle, "case-7") and disclose.parse(b2.disclosure) == ("draft.case_name", "case-7")
    env = ev.CaseProposed("prop-7", "tc", d, "outcome-ledger INC-7").sign(KEY, bound=[b2])
    assert env.handle == b2.handle and env.disclosures[-1] == b2.disclosure


def test_a_case_left_to_get_a_fresh_handle_cannot_carry_its_curators_co_signatures() -> None:
    """The curators co-sign the case's handle; a handle made at signing is one they did
    not sign: refused before anything is posted, naming the companion."""
    with pytest.raises(InvalidInput) as e:
        case_added().sign(KEY)
    assert e.value.code == "missing_field" and e.value.field == "event.body.case_name"
    case_added().sign(KEY, schema=2)  # identifiers in clear: nothing to bind


def companion(schema: int, name: Any, kind: str = "principal.enrolled") -> bytes:
    body: dict[str, Any] = {"public_key": OTHER.public_key_b64, "identity": "other@example.org", "roles": ["harness"]}
    if name is not disclose._MISSING:
        body["identity_name"] = name
    return forged(schema, body, kind)


def test_a_companion_in_schema_2_is_an_unknown_field() -> None:
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(companion(2, {"_sd": disclose.digest("x")}))
    assert e.value.code == "unknown_field" and e.value.field == "envelope.payload.event.body.identity_name"


def test_a_companion_in_schema_1_is_an_unknown_field() -> None:
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(companion(1, "other@example.org"))
    assert e.value.code == "unknown_field" and e.value.field == "envelope.payload.event.body.identity_name"


def test_a_companion_in_clear_in_schema_2_is_a_value_in_clear() -> None:
    """As `events::disclose::check_form` orders its checks: the sensitive fields' form first."""
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(companion(2, "other@example.org"))
    assert e.value.code == "sensitive_value_in_clear" and e.value.field == "envelope.payload.event.body.identity_name"


@pytest.mark.parametrize("name", [disclose._MISSING, None], ids=["absent", "null"])
def test_a_missing_companion_in_schema_3_is_a_missing_field(name: Any) -> None:
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(companion(3, name))
    assert e.value.code == "missing_field" and e.value.field == "envelope.payload.event.body.identity_name"
    # Schemas 1 and 2 read a `null` companion as absent, as serde does.
    for schema in (1, 2):
        Envelope.parse(companion(schema, name))


def test_a_companion_in_schema_3_is_committed_to_a_digest() -> None:
    Envelope.parse(companion(3, {"_sd": disclose.digest("x")}))
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(companion(3, "other@example.org"))
    assert e.value.code == "sensitive_value_in_clear"
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(companion(3, {"_sd": "short"}))
    assert e.value.code == "invalid_value" and e.value.field == "envelope.payload.event.body.identity_name._sd"


def test_a_disclosure_with_a_salt_of_16_and_64_bytes_parses_and_one_outside_is_malformed() -> None:
    for n in (16, 64):
        assert disclose.parse(disclose.disclosure(b"\x01" * n, "title", "t")) == ("title", "t")
    for n in (15, 65):
        with pytest.raises(InvalidInput, match="salt"):
            disclose.parse(disclose.disclosure(b"\x01" * n, "title", "t"))
    # A salt with stray bits is not the one encoding of its bytes.
    stray = disclose.b64url(canonical.encode(["AAAAAAAAAAAAAAAAAAAAAB", "title", "t"]))
    with pytest.raises(InvalidInput, match="salt"):
        disclose.parse(stray)
