"""Witness cosignatures and policies with no server: the C2SP example line's framing,
each change to a cosignature refused, quorums through groups, and every malformed
policy refused naming its line (the cases of anchors/src/cosign.rs's tests)."""

from __future__ import annotations

import base64

import pytest

from evidence_ledger import (
    BadSignature,
    CosignatureVerifier,
    CosignerKey,
    InvalidInput,
    LogNotListed,
    NoQuorum,
    Policy,
    PolicyError,
    SigningKey,
    cosignatures,
)
from evidence_ledger.cosign import cosigned_message, cosigner_key_id

SPEC_BODY = b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"


def test_the_spec_example_line_frames_a_timestamped_signature() -> None:
    # c2sp.org/tlog-cosignature's example line: key ID ‖ u64 timestamp ‖ 64-byte
    # signature, with the timestamp of its message example. The specification
    # publishes no key for it.
    line = "jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA=="
    blob = base64.b64decode(line, validate=True)
    assert len(blob) == 4 + 8 + 64
    assert blob[:4].hex() == "8d66cf3f"
    assert int.from_bytes(blob[4:12], "big") == 1_679_315_147
    assert cosigned_message(SPEC_BODY, 1_679_315_147) == (
        b"cosignature/v1\ntime 1679315147\n"
        b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )


LOG = SigningKey("example.com/log", bytes([1] * 32))


def note(size: int = 5) -> tuple[str, bytes]:
    text = f"example.com/log\n{size}\n{base64.b64encode(bytes([3] * 32)).decode()}\n".encode()
    return LOG.sign_note(text), text


def blob_of(line: str) -> bytearray:
    return bytearray(base64.b64decode(line.rstrip("\n").rsplit(" ", 1)[1]))


def test_a_cosignature_verifies_and_every_change_is_refused() -> None:
    w = CosignerKey("witness.example/w1", bytes([7] * 32))
    v = w.verifier_key
    assert v.text.startswith("witness.example/w1+") and v.key_id == cosigner_key_id(w.name, w.public_key)
    assert CosignerKey.from_private(f"PRIVATE+KEY+witness.example/w1+{w.key_id:08x}+"
                                    + base64.b64encode(b"\x04" + bytes([7] * 32)).decode()).verifier_key.text == v.text
    n, text = note()
    line = w.cosign(text, 1_700_000_000)
    got = cosignatures(n + line, [v])
    assert [(c.witness, c.timestamp) for c in got] == [("witness.example/w1", 1_700_000_000)]
    # Another timestamp under the same signature.
    blob = blob_of(line)
    blob[11] ^= 1
    with pytest.raises(BadSignature):
        cosignatures(n + f"\u2014 witness.example/w1 {base64.b64encode(bytes(blob)).decode()}\n", [v])
    # One flipped byte of the signature itself.
    blob = blob_of(line)
    blob[40] ^= 0x80
    with pytest.raises(BadSignature):
        cosignatures(n + f"\u2014 witness.example/w1 {base64.b64encode(bytes(blob)).decode()}\n", [v])
    # The line moved to another checkpoint.
    other, _ = note(6)
    with pytest.raises(BadSignature):
        cosignatures(other + line, [v])
    # A stranger's key under the same name is ignored, not an error.
    stranger = CosignerKey("witness.example/w1", bytes([8] * 32))
    assert cosignatures(n + stranger.cosign(text, 1), [v]) == []
    # A type 0x01 key is not a cosigner key, nor the reverse.
    with pytest.raises(InvalidInput):
        CosignatureVerifier(LOG.verifier_key.text)


def policy_with(ws: list[CosignerKey], tail: str) -> str:
    return "# test policy\n" + "".join(f"witness w{i} {w.verifier_key}\n" for i, w in enumerate(ws)) + tail


def test_quorums_count_witnesses_through_groups() -> None:
    ws = [CosignerKey(f"w.example/{i}", bytes([i + 10] * 32)) for i in range(3)]
    n, text = note()

    def with_(*idx: int) -> str:
        return n + "".join(ws[i].cosign(text, 1_700_000_000) for i in idx)

    two_of_three = Policy.parse(policy_with(ws, "group g 2 w0 w1 w2\nquorum g\n"))
    w = two_of_three.open_checkpoint(with_(0, 2), [LOG.verifier_key])
    assert w.size == 5 and [c.witness for c in w.cosigned] == ["w.example/0", "w.example/2"]
    with pytest.raises(NoQuorum) as e:
        two_of_three.open_checkpoint(with_(1), [LOG.verifier_key])
    assert e.value.have == ("w1",) and e.value.needs == "g"
    nested = Policy.parse(policy_with(ws, "group a any w0 w1\ngroup b all a w2\nquorum b\n"))
    nested.open_checkpoint(with_(1, 2), [LOG.verifier_key])
    with pytest.raises(NoQuorum):
        nested.open_checkpoint(with_(0, 1), [LOG.verifier_key])
    assert not Policy.parse("quorum none\n").needs_witnesses
    Policy.parse("quorum none\n").open_checkpoint(n, [LOG.verifier_key])
    listed = Policy.parse(f"log {LOG.verifier_key}\nquorum none\n")
    assert listed.allows_log(LOG.verifier_key)
    other = SigningKey("example.com/other", bytes([2] * 32))
    assert not listed.allows_log(other.verifier_key)
    other_note = other.sign_note(f"example.com/other\n5\n{base64.b64encode(bytes([3] * 32)).decode()}\n".encode())
    with pytest.raises(LogNotListed):
        listed.open_checkpoint(other_note, [other.verifier_key])
    # The log's own signature is still required.
    with pytest.raises(BadSignature):
        two_of_three.open_checkpoint(with_(0, 1), [other.verifier_key])


def test_malformed_policies_are_refused_with_their_line() -> None:
    v = CosignerKey("w.example/0", bytes([1] * 32)).verifier_key.text
    cases = [
        ("witness a notakey\nquorum a\n", 1),
        (f"witness a {v}\nwitness b {v}\nquorum a\n", 2),
        (f"witness a {v}\ngroup g 2 a\nquorum g\n", 2),
        (f"witness a {v}\ngroup g 01 a\nquorum g\n", 2),
        (f"witness a {v}\ngroup g any a a\nquorum g\n", 2),
        ("group g any x\nquorum g\n", 1),
        (f"witness a {v}\nquorum b\n", 2),
        (f"witness a {v}\nquorum a\nquorum a\n", 3),
        (f"witness a {v}\nfrobnicate a\nquorum a\n", 2),
        (f"witness none {v}\nquorum none\n", 1),
        (f"witness a {v}\n", 0),
        # And the ones the Rust test leaves implicit.
        (f"log {v}\nquorum none\n", 1),
        (f"witness a {v}\ngroup g\nquorum g\n", 2),
        (f"witness a {v}\ngroup a any a\nquorum a\n", 2),
        (f"witness a {v}\x0b\nquorum a\n", 1),
        (f"witness a {v}\ngroup g 0 a\nquorum g\n", 2),
        (f"witness a {v}\ngroup g +1 a\nquorum g\n", 2),
    ]
    for text, line in cases:
        with pytest.raises(PolicyError) as e:
            Policy.parse(text, "test.policy")
        assert e.value.line == line, (text, e.value)
        assert isinstance(e.value, InvalidInput) and e.value.rule
        assert e.value.field == (f"test.policy line {line}" if line else "test.policy")


def test_a_well_formed_policy_keeps_urls_comments_and_tabs() -> None:
    w = CosignerKey("w.example/0", bytes([1] * 32)).verifier_key.text
    p = Policy.parse(f"# comment\n\nlog {LOG.verifier_key} https://log.example\r\nwitness\ta {w} https://w.example/\ngroup g all a\nquorum g")
    assert [x.text for x in p.logs] == [LOG.verifier_key.text]
    assert [(x.name, x.url) for x in p.witnesses] == [("a", "https://w.example")]
    assert p.quorum == "g" and p.satisfied_by({"a"}) and not p.satisfied_by(set())
