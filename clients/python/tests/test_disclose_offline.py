"""Sensitive fields as commitments, without a server (docs/PRIVACY.md): what signing
commits, the write body, the form each schema requires when a payload is decoded, and
the table of committed fields held to the published one."""

from __future__ import annotations

import json
import re
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


def one_of_each() -> list[ev.Event]:
    """One event of each kind that has committed fields."""
    st = ev.CoSignature.sign(KEY, b"statement")
    st2 = ev.CoSignature.sign(OTHER, b"statement")
    return [
        ev.PrincipalRevoked(KEY.key_id, "key lost"),
        ev.CaseAdded("tc", DRAFT, ev.Provenance("curated", "GHSA-2024-0001 \"axios\" é", "2026-11-20T00:00:00Z", st, st2)),
        ev.CaseRetired("case-7", "superseded by case-8", st, st2),
        ev.CaseProposed("prop-7", "tc", DRAFT, "outcome-ledger INC-7"),
        ev.ProposalRejected("prop-7", "not reproducible"),
        ev.ScoreRecorded(run_id="run-1", task_class="tc", case_id="case-7", case_digest=D, rubric_digest=D, cassette_digest=D,
                         harness_version="h 1", image_digest=D, score=ev.BenchScore(True, 0.5), started_at="2026-11-20T00:00:00Z",
                         finished_at="2026-11-20T00:01:00Z", operator_fingerprint="runner-3"),
        ev.RagRecordQuarantined("cap-1", "poisoned"),
    ]


def at(body: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        body = body[part]
    return body


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: e.kind)
def test_signing_commits_every_sensitive_value_and_its_disclosures_open_the_commitments(event: ev.Event) -> None:
    env = event.sign(KEY)
    payload = json.loads(env.payload)
    body, clear = payload["event"]["body"], event.body()
    paths = disclose.committed_paths(event.kind)
    assert payload["schema"] == 2 and paths and len(env.disclosures) == len(paths)
    for path, d in zip(paths, env.disclosures):
        assert at(body, path) == {"_sd": disclose.digest(d)}
        assert disclose.parse(d) == (path, at(clear, path))
        assert len(disclose.b64url_decode(json.loads(disclose.b64url_decode(d) or b"")[0]) or b"") == 32
    opened = disclose.check_disclosed(event.kind, body, env.disclosures)
    assert [(o.path, o.value) for o in opened] == [(p, at(clear, p)) for p in paths]
    # The leaf decodes (the form schema 2 requires), and holds no value of them.
    leaf = decode_leaf(env.leaf_bytes(1_790_000_000_000_000))
    assert leaf.body == body
    for p in paths:
        assert json.dumps(at(clear, p), ensure_ascii=False).encode() not in env.payload
    # Fresh salts: the same event signed again commits to other digests.
    again = json.loads(event.sign(KEY, id=payload["id"], issued_at=payload["issued_at"]).payload)["event"]["body"]
    assert all(at(again, p) != at(body, p) for p in paths)


def test_schema_1_signs_the_values_in_clear_with_no_disclosures() -> None:
    event = one_of_each()[1]
    env = event.sign(KEY, schema=1)
    payload = json.loads(env.payload)
    assert payload["schema"] == 1 and payload["event"]["body"] == event.body() and env.disclosures == ()
    assert env.write_body() == env.to_json()
    assert decode_leaf(env.leaf_bytes(0)).body == event.body()


def test_the_write_body_is_the_envelope_alone_or_its_disclosures_then_the_envelope() -> None:
    plain = ev.RunFinished("run-1").sign(KEY)
    assert plain.disclosures == () and plain.write_body() == plain.to_json()
    env = one_of_each()[1].sign(KEY)
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

    def walk(node: dict[str, Any], prefix: str) -> set[str]:
        out: set[str] = set()
        for name, sub in node.get("properties", {}).items():
            if any(alt.get("$ref") == "#/$defs/Commitment" for alt in resolve(sub).get("anyOf", [])):
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
    table = text[text.index("| kind | committed fields |"):]
    rows = re.findall(r"^\| `([a-z_.]+)` \| (`[^|]+`) \|$", table.split("\n\n")[0], re.M)
    assert len(rows) >= 7
    for kind, fields in rows:
        assert tuple(re.findall(r"`([a-z_.]+)`", fields)) == disclose.committed_paths(kind), kind


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


def test_a_schema_other_than_1_or_2_is_refused() -> None:
    with pytest.raises(InvalidInput) as e:
        Envelope.parse(forged(3, {"run_id": "run-1"}, "run.finished"))
    assert e.value.code == "unsupported_schema"
    with pytest.raises(InvalidInput):
        sign_payload(KEY, "run.finished", {"run_id": "run-1"}, schema=3)


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
