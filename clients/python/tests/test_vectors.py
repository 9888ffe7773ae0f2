"""The test vectors the Rust implementation is checked against, checked here too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidence_ledger import canonical, disclose, merkle
from evidence_ledger.envelope import Envelope, pae, PAYLOAD_TYPE
from evidence_ledger.errors import InvalidInput, ProofMismatch
from evidence_ledger.note import SigningKey, key_id
from evidence_ledger.stats import bca, bootstrap_seed, wilson

REPO = Path(__file__).resolve().parents[3]


def load(rel: str) -> Any:
    return json.loads((REPO / rel).read_text(encoding="utf-8"))


def test_format_vectors_leaf_content_chain_and_roots() -> None:
    entries = load("ledger/testdata/format_vectors.json")["entries"]
    chain = merkle.GENESIS_CHAIN
    hashes = []
    for e in entries:
        leaf = bytes.fromhex(e["leaf_hex"])
        assert merkle.leaf_hash(leaf).hex() == e["leaf_hash"]
        assert merkle.content_digest(leaf).hex() == e["content_digest_blake3"]
        chain = merkle.chain_hash(chain, leaf)
        assert chain.hex() == e["chain_hash"]
        hashes.append(merkle.leaf_hash(leaf))
        assert merkle.root_of(hashes).hex() == e["root_after"]


def test_rfc6962_roots_inclusion_and_consistency_vectors() -> None:
    v = load("ledger/testdata/rfc6962_vectors.json")
    leaves = [bytes.fromhex(h) for h in v["leaves_hex"]]
    hashes = [merkle.leaf_hash(x) for x in leaves]
    assert [h.hex() for h in hashes] == v["leaf_hashes"]
    roots = [merkle.root_of(hashes[:n]) for n in range(len(hashes) + 1)]
    assert [r.hex() for r in roots] == v["roots_by_size"]
    for c in v["inclusion"]:
        proof = [bytes.fromhex(p) for p in c["proof"]]
        merkle.verify_inclusion(c["index"], c["size"], hashes[c["index"]], proof, roots[c["size"]])
    for c in v["consistency"]:
        proof = [bytes.fromhex(p) for p in c["proof"]]
        merkle.verify_consistency(c["old"], roots[c["old"]], c["new"], roots[c["new"]], proof)


def test_every_proof_of_small_trees_verifies_and_a_flipped_bit_is_refused() -> None:
    """Builds proofs for every (index, size) and (old, new) up to 16 leaves from the
    tree itself, and checks one-bit corruptions of each hash are refused."""
    hashes = [merkle.leaf_hash(bytes([i])) for i in range(16)]

    def mth(xs: list[bytes]) -> bytes:
        return merkle.root_of(xs)

    def path(m: int, xs: list[bytes]) -> list[bytes]:
        if len(xs) == 1:
            return []
        k = 1 << ((len(xs) - 1).bit_length() - 1)
        return path(m, xs[:k]) + [mth(xs[k:])] if m < k else path(m - k, xs[k:]) + [mth(xs[:k])]

    def subproof(m: int, xs: list[bytes], whole: bool) -> list[bytes]:
        n = len(xs)
        if m == n:
            return [] if whole else [mth(xs)]
        k = 1 << ((n - 1).bit_length() - 1)
        if m <= k:
            return subproof(m, xs[:k], whole) + [mth(xs[k:])]
        return subproof(m - k, xs[k:], False) + [mth(xs[:k])]

    for size in range(1, 17):
        root = mth(hashes[:size])
        for i in range(size):
            p = path(i, hashes[:size])
            merkle.verify_inclusion(i, size, hashes[i], p, root)
            for j in range(len(p)):
                bad = list(p)
                bad[j] = bytes([bad[j][0] ^ 1]) + bad[j][1:]
                with pytest.raises(ProofMismatch):
                    merkle.verify_inclusion(i, size, hashes[i], bad, root)
        for old in range(1, size):
            p = subproof(old, hashes[:size], True)
            merkle.verify_consistency(old, mth(hashes[:old]), size, root, p)
            for j in range(len(p)):
                bad = list(p)
                bad[j] = bytes([bad[j][0] ^ 1]) + bad[j][1:]
                with pytest.raises(ProofMismatch):
                    merkle.verify_consistency(old, mth(hashes[:old]), size, root, bad)


def test_canonical_json_floats_and_objects_match_the_vectors() -> None:
    v = load("events/testdata/event_vectors.json")
    for f in v["floats"]:
        assert canonical.encode({"x": f["value"]}).decode() == f["canonical"]
        assert canonical.parse_canonical(f["canonical"].encode()) == {"x": f["value"]}
    for o in v["objects"]:
        assert canonical.encode(o["object"]).decode() == o["canonical"]


EVIDENCE_TREES = load("events/testdata/event_vectors.json")["evidence_trees"]


def test_the_evidence_tree_vectors_cover_the_empty_tree_one_leaf_and_an_unbalanced_tree() -> None:
    assert {t["count"] for t in EVIDENCE_TREES} >= {0, 1, 3, 13}
    empty = next(t for t in EVIDENCE_TREES if t["count"] == 0)
    assert empty["root"] == merkle.EMPTY_ROOT.hex()


@pytest.mark.parametrize("t", EVIDENCE_TREES, ids=lambda t: f"{t['count']} refs")
def test_each_evidence_tree_vector_has_its_leaves_count_and_root(t: dict[str, Any]) -> None:
    leaves = [merkle.evidence_tree_leaf(r["index"], r["leaf_hash"]) for r in t["refs"]]
    assert [leaf.decode() for leaf in leaves] == t["leaves"]
    assert merkle.root_of([merkle.leaf_hash(leaf) for leaf in leaves]).hex() == t["root"]
    assert len(t["refs"]) == t["count"]
    assert merkle.evidence_tree(t["refs"]) == (t["count"], t["root"])
    assert merkle.evidence_tree([(r["index"], r["leaf_hash"]) for r in t["refs"]]) == (t["count"], t["root"])


def test_dsse_vector_signs_and_verifies_byte_for_byte() -> None:
    d = load("events/testdata/event_vectors.json")["dsse"]
    key = SigningKey("vector", bytes.fromhex(d["seed_hex"]))
    assert key.public_key_b64 == d["public_key_b64"]
    assert key_id(key.public_key) == d["keyid"] == key.key_id
    payload = d["payload_canonical"].encode()
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    env = Envelope(payload, key.key_id, sig)
    assert env.to_dict() == d["envelope"]
    parsed = Envelope.parse(json.dumps(d["envelope"]).encode())
    assert parsed == env and parsed.verify(key.public_key)


def test_wilson_matches_scipy_within_1e_9() -> None:
    g = load("projections/testdata/stats_golden.json")
    for w in g["wilson"]:
        got = wilson(w["k"], w["n"], g["confidence"])
        assert got is not None
        assert abs(got.low - w["low"]) < 1e-9 and abs(got.high - w["high"]) < 1e-9, w


def test_bca_matches_scipy_within_0_01_at_20000_resamples() -> None:
    g = load("projections/testdata/stats_golden.json")
    for b in g["bca"][:4]:
        got = bca(b["data"], g["confidence"], g["bca_resamples"], bootstrap_seed(b["name"]))
        assert got is not None
        assert abs(got.low - b["low"]) < 0.01 and abs(got.high - b["high"]) < 0.01, b["name"]


def test_bca_edges_no_data_one_value_all_equal() -> None:
    assert bca([], 0.95, 100, 1) is None
    one = bca([0.42], 0.95, 100, 1)
    assert one is not None and one.low == one.high == 0.42
    same = bca([0.5] * 9, 0.95, 100, 1)
    assert same is not None and same.low == same.high == 0.5


# --- disclosures (docs/PRIVACY.md; events/testdata/disclosure_vectors.json) ----------

DISCLOSURES = load("events/testdata/disclosure_vectors.json")


def test_the_digest_is_sd_jwts() -> None:
    """RFC 9901's example disclosure of `"given_name": "John"` hashes to the digest the
    RFC gives: the hashing is SD-JWT's (`events::disclose::tests::the_digest_is_sd_jwts`)."""
    d = "WyIyR0xDNDJzS1F2ZUNmR2ZyeU5STjl3IiwgImdpdmVuX25hbWUiLCAiSm9obiJd"
    assert disclose.digest(d) == "jsu9yVulwQQlhFlM_3JlzMaSFzglhQG0DpfayQwLUK4"


@pytest.mark.parametrize("v", DISCLOSURES["valid"], ids=lambda v: str(v["field"]))
def test_each_valid_disclosure_vector_is_made_parsed_and_hashed_as_in_rust(v: dict[str, Any]) -> None:
    assert disclose.disclosure(bytes.fromhex(v["salt_hex"]), v["field"], v["value"]) == v["disclosure"]
    assert disclose.parse(v["disclosure"]) == (v["field"], v["value"])
    assert disclose.digest(v["disclosure"]) == v["digest"]
    assert disclose.is_digest(v["digest"])


@pytest.mark.parametrize("v", DISCLOSURES["invalid"], ids=lambda v: str(v["why"]))
def test_each_invalid_disclosure_vector_is_refused_as_malformed(v: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput) as e:
        disclose.parse(v["disclosure"], "disclosures[0]")
    assert e.value.code == "disclosure_malformed" and e.value.field == "disclosures[0]"
