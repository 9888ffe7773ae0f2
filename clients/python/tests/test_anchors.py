"""Anchors against a live server (`ledger audit --anchors DIR`, in Python): the anchors
are published by the real `ledger anchor publish` (run with the server stopped, as it
must be: it opens the data directory), more entries are appended after them, and the
audit requires the served tree to extend every one. Each attack puts one forged anchor
into a copy of the directory and is refused with one typed failure naming the file; the
trusted checkpoint file is left as it was. The Rekor bundles kept beside the anchors are
made by the SYNTHETIC Sigstore instance (`synthetic_sigstore`, test-only keys) over the
anchor files' bytes and verified offline by sigstore-python: a bundle over another
anchor's bytes, one by another identity, a bundle beside no anchor and a missing one
(with `--rekor-require-all`) are refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pytest

from conftest import Bench, LedgerServer, ledger_bin
from evidence_ledger import (
    AnchorBundleInvalid,
    AnchorBundleMissing,
    AnchorBundleStray,
    AnchorError,
    AnchorFork,
    AnchorRewrite,
    AnchorTruncation,
    AnchorUnknownKey,
    AnchorWrongLog,
    Checkpoint,
    Client,
    InvalidInput,
    SigningKey,
    SigstoreUnavailable,
    check_anchors,
    check_rekor_bundles,
    read_anchors,
    sigstore_check,
)
from evidence_ledger.__main__ import main
from evidence_ledger.merkle import leaf_hash, root_of
from evidence_ledger.note import b64
from synthetic_sigstore import CURATOR, CURATOR_B, ISSUER, SYNTHETIC, Synthetic

SIGSTORE_ROOT = SYNTHETIC / "trusted_root.json"
#: Sorts after every real anchor: the real ones pass first, the forged one fails.
FORGED = "2099-01-01T000000Z-000000000099.checkpoint"
BUNDLE_OPTIONS = ("--rekor-identity", CURATOR, "--rekor-issuer", ISSUER, "--sigstore-root", str(SIGSTORE_ROOT))


@dataclass
class Anchored:
    server: LedgerServer
    #: Two anchors published by `ledger anchor publish`, the log grown after each.
    anchors: Path
    #: A trusted checkpoint saved before the last entries were appended: an audit that
    #: passes replaces it, one that fails leaves it as it is.
    baseline: bytes
    #: The served tree (nothing is appended while the tests run).
    size: int
    leaf_hashes: list[bytes]

    @property
    def origin(self) -> str:
        return self.server.log_key.name

    def client(self) -> Client:
        return self.server.client()


def publish(server: LedgerServer, anchors: Path) -> str:
    """`ledger anchor publish` into `anchors` (the server stopped); the file it wrote."""
    out = subprocess.run(
        [str(ledger_bin()), "anchor", "publish", "--data-dir", str(server.data), "--anchors", str(anchors)],
        check=True, capture_output=True, text=True,
    )
    line = next(line for line in out.stdout.splitlines() if line.startswith("published "))
    return Path(line.split(" ", 1)[1]).name


@pytest.fixture(scope="module")
def anchored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Anchored]:
    root = tmp_path_factory.mktemp("anchors")
    anchors = root / "anchors"
    s = LedgerServer(root / "data")
    first = publish(s, anchors)
    s.start("--anchor-interval-secs", "0")
    try:
        bench = Bench(s, "anchored", cases=2)
        s.stop()
        second = publish(s, anchors)
        s.start("--anchor-interval-secs", "0")
        assert sorted(p.name for p in anchors.iterdir()) == [first, second]
        baseline = root / "baseline.note"
        assert main(["audit", s.url, "--key", s.vkey.text, "--trusted", str(baseline), "--samples", "2"]) == 0
        bench.client = s.client()
        for case in bench.cases:
            bench.client.post(bench.score(case, 0.9).sign(bench.harness))
        c = s.client()
        size = c.checkpoint().size
        hashes = [bytes.fromhex(e.leaf_hash) for e in c.entries(0, size)]
        assert len(hashes) == size and root_of(hashes) == c.checkpoint().root
        yield Anchored(s, anchors, baseline.read_bytes(), size, hashes)
    finally:
        s.stop()


def checkpoint_note(key: SigningKey, size: int, root: bytes, origin: Optional[str] = None) -> str:
    return key.sign_note(f"{origin or key.name}\n{size}\n{b64(root)}\n".encode())


def forked_root(a: Anchored, size: int) -> bytes:
    """The root of a tree of `size` leaves that shares the log's first `size - 1` and then
    holds another leaf: a fork at entry `size - 1`."""
    return root_of(a.leaf_hashes[: size - 1] + [leaf_hash(b"a forked entry")])


def with_anchor(a: Anchored, tmp_path: Path, note: str, name: str = FORGED) -> Path:
    d = tmp_path / "anchors"
    shutil.copytree(a.anchors, d)
    (d / name).write_text(note, encoding="utf-8")
    return d


def audited(a: Anchored) -> Checkpoint:
    return a.client().checkpoint()


def run_audit(a: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str,
              keys: tuple[str, ...] = (), trusted: bool = True) -> tuple[int, str, str, Path]:
    """The audit CLI from the baseline trusted checkpoint (none with `trusted` false):
    exit status, standard output and error, and the trusted file."""
    path = tmp_path / "trusted.note"
    if trusted:
        path.write_bytes(a.baseline)
    capsys.readouterr()
    args = ["audit", a.server.url, "--key", a.server.vkey.text, *(x for k in keys for x in ("--key", k)),
            "--trusted", str(path), "--samples", "2", *extra]
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err, path


def refused(a: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], d: Path, code: str, *extra: str,
            keys: tuple[str, ...] = ()) -> str:
    """The audit CLI fails with exit 1 naming the forged file and `code`, and leaves the
    trusted file as it was; its error output."""
    status, out, err, path = run_audit(a, tmp_path, capsys, "--anchors", str(d), *extra, keys=keys)
    assert status == 1, (out, err)
    assert err.startswith("FAILED: ") and code in err, err
    assert path.read_bytes() == a.baseline, "a failed anchors check leaves the trusted checkpoint unchanged"
    assert "OK: saved" not in out
    return err


# --- the log extends its anchors --------------------------------------------------------


def test_the_audit_passes_with_real_anchors_after_more_entries(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = anchored
    code, out, err, path = run_audit(a, tmp_path, capsys, "--anchors", str(a.anchors))
    assert code == 0, err
    assert f"anchors:     the audited tree extends all 2 anchors in {a.anchors}" in out
    assert path.read_bytes() != a.baseline, "the newer checkpoint is saved"
    # The library: each anchor verified, smaller than the audited tree (a consistency
    # proof checked for each), oldest first.
    cp = audited(a)
    checked = check_anchors(a.client(), a.anchors, [a.server.vkey], cp)
    assert [c.name for c in checked] == sorted(p.name for p in a.anchors.iterdir())
    assert [c.size for c in checked] == sorted(c.size for c in checked) and all(0 < c.size < a.size for c in checked)
    assert cp.size == a.size
    # A function giving proofs is a proof source too; files other than anchors are ignored.
    d = tmp_path / "with-others"
    shutil.copytree(a.anchors, d)
    (d / "README.md").write_text("anchors of the test log\n", encoding="utf-8")
    assert len(check_anchors(a.client().consistency_proof, d, [a.server.vkey], cp)) == 2
    # The audited tree itself as an anchor (same size, same root) passes.
    same = with_anchor(a, tmp_path, cp.note)
    assert [c.size for c in check_anchors(a.client(), same, [a.server.vkey], cp)][-1] == a.size


def test_an_empty_anchors_directory_passes_and_a_missing_one_is_refused(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, _, _ = run_audit(anchored, tmp_path, capsys, "--anchors", str(empty))
    assert code == 0 and "extends all 0 anchors" in out
    code, out, err, path = run_audit(anchored, tmp_path, capsys, "--anchors", str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in err and path.read_bytes() == anchored.baseline
    assert out == "", "refused before the audit"
    with pytest.raises(InvalidInput):
        read_anchors(tmp_path / "nowhere")


# --- attacks: one forged anchor each ----------------------------------------------------


def test_attack_an_anchor_signed_by_another_key_is_unknown_key(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key of the log's name that is not the log's key signs the real checkpoint."""
    a = anchored
    cp = audited(a)
    d = with_anchor(a, tmp_path, checkpoint_note(SigningKey.generate(a.origin), cp.size, cp.root))
    with pytest.raises(AnchorUnknownKey) as e:
        check_anchors(a.client(), d, [a.server.vkey], cp)
    assert e.value.anchor == FORGED and e.value.code == "anchor_unknown_key"
    assert isinstance(e.value, AnchorError)
    err = refused(a, tmp_path, capsys, d, "anchor_unknown_key")
    assert f"anchor {FORGED}: signed by no trusted key" in err
    # Not a signed note at all: the same failure.
    (d / FORGED).write_text("not a checkpoint\n", encoding="utf-8")
    with pytest.raises(AnchorUnknownKey):
        check_anchors(a.client(), d, [a.server.vkey], cp)


def test_attack_an_anchor_of_another_log_is_wrong_log(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An anchor of another log whose key the auditor also trusts."""
    a = anchored
    cp = audited(a)
    other = SigningKey.generate("other.example/log")
    d = with_anchor(a, tmp_path, checkpoint_note(other, cp.size, cp.root))
    with pytest.raises(AnchorWrongLog) as e:
        check_anchors(a.client(), d, [a.server.vkey, other.verifier_key], cp)
    assert (e.value.anchor, e.value.expected, e.value.found) == (FORGED, a.origin, "other.example/log")
    err = refused(a, tmp_path, capsys, d, "anchor_wrong_log", keys=(other.verifier_key.text,))
    assert f"origin `other.example/log` is not this log's `{a.origin}`" in err
    # Trusting only the audited log's key, the other log's anchor is signed by no trusted key.
    with pytest.raises(AnchorUnknownKey):
        check_anchors(a.client(), d, [a.server.vkey], cp)


def test_attack_an_anchor_larger_than_the_served_tree_is_truncation(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log key signed a tree of more entries than the server now serves."""
    a = anchored
    cp = audited(a)
    bigger = a.size + 3
    d = with_anchor(a, tmp_path, checkpoint_note(a.server.log_key, bigger, forked_root(a, a.size)))
    with pytest.raises(AnchorTruncation) as e:
        check_anchors(a.client(), d, [a.server.vkey], cp)
    assert (e.value.anchor, e.value.log_size, e.value.anchor_size) == (FORGED, a.size, bigger)
    err = refused(a, tmp_path, capsys, d, "anchor_truncation")
    assert f"it has {a.size} entries, the anchor covers {bigger}" in err


def test_attack_an_anchor_of_the_same_size_with_another_root_is_rewrite(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log key signed another tree of the served size: the log was rewritten."""
    a = anchored
    cp = audited(a)
    other = forked_root(a, a.size)
    d = with_anchor(a, tmp_path, checkpoint_note(a.server.log_key, a.size, other))
    with pytest.raises(AnchorRewrite) as e:
        check_anchors(a.client(), d, [a.server.vkey], cp)
    assert (e.value.anchor, e.value.size, e.value.log_root, e.value.anchor_root) == (FORGED, a.size, cp.root.hex(), other.hex())
    refused(a, tmp_path, capsys, d, "anchor_rewrite")
    # A first audit (no trusted file yet) that fails writes none.
    first = tmp_path / "first"
    first.mkdir()
    code, _, err, path = run_audit(a, first, capsys, "--anchors", str(d), trusted=False)
    assert code == 1 and "anchor_rewrite" in err and not path.exists()


def test_attack_an_anchor_of_a_forked_tree_is_fork(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log key signed a smaller tree that the served one does not extend: the same
    first entries, then another one."""
    a = anchored
    cp = audited(a)
    size = a.size - 2
    d = with_anchor(a, tmp_path, checkpoint_note(a.server.log_key, size, forked_root(a, size)))
    with pytest.raises(AnchorFork) as e:
        check_anchors(a.client(), d, [a.server.vkey], cp)
    assert (e.value.anchor, e.value.anchor_size, e.value.log_size) == (FORGED, size, a.size)
    err = refused(a, tmp_path, capsys, d, "anchor_fork")
    assert f"the log forked after it: no consistency from size {size} to {a.size}" in err
    # The honest tree of that size passes: only the fork is refused.
    (d / FORGED).write_text(checkpoint_note(a.server.log_key, size, root_of(a.leaf_hashes[:size])), encoding="utf-8")
    assert len(check_anchors(a.client(), d, [a.server.vkey], cp)) == 3


# --- Rekor bundles beside the anchors ---------------------------------------------------


@pytest.fixture(scope="module")
def synthetic() -> Synthetic:
    return Synthetic()


def with_bundles(a: Anchored, tmp_path: Path, synthetic: Synthetic, label: str = "curator") -> tuple[Path, list[Path]]:
    """A copy of the anchors with a bundle beside each, by the certificate `label`, over
    the anchor file's bytes; the anchor files, oldest first."""
    d = tmp_path / "anchors"
    shutil.copytree(a.anchors, d)
    files = sorted(d.glob("*.checkpoint"))
    for f in files:
        (d / (f.name + ".sigstore.json")).write_text(synthetic.sign(label, f.read_bytes()), encoding="utf-8")
    return d, files


def test_bundles_over_each_anchor_verify_offline(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic: Synthetic
) -> None:
    a = anchored
    d, files = with_bundles(a, tmp_path, synthetic)
    code, out, err, path = run_audit(a, tmp_path, capsys, "--anchors", str(d), *BUNDLE_OPTIONS)
    assert code == 0, err
    assert "extends all 2 anchors" in out
    assert f"Rekor: 2 anchors' bundles verified offline (logged, signed by {CURATOR} (issuer {ISSUER})" in out
    assert "not yet published" not in err and path.read_bytes() != a.baseline
    r = check_rekor_bundles(d, CURATOR, ISSUER, SIGSTORE_ROOT.read_text())
    assert r.verified == tuple(f.name for f in files) and r.missing == ()


def test_attack_a_bundle_over_another_anchors_bytes_is_refused(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic: Synthetic
) -> None:
    """The newer anchor's bundle is moved beside the older one (as if the older anchor
    had been swapped for a file its bundle does not sign)."""
    a = anchored
    d, files = with_bundles(a, tmp_path, synthetic)
    older, newer = files
    (d / (older.name + ".sigstore.json")).write_text(synthetic.sign("curator", newer.read_bytes()), encoding="utf-8")
    with pytest.raises(AnchorBundleInvalid) as e:
        check_rekor_bundles(d, CURATOR, ISSUER, SIGSTORE_ROOT.read_text())
    assert (e.value.anchor, e.value.code, e.value.sigstore_code) == (older.name, "anchor_bundle_invalid", "sigstore_message_mismatch")
    err = refused(a, tmp_path, capsys, d, "anchor_bundle_invalid", *BUNDLE_OPTIONS)
    assert f"Rekor bundle {older.name}.sigstore.json" in err and "sigstore_message_mismatch" in err


def test_attack_a_bundle_by_another_identity_is_refused(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic: Synthetic
) -> None:
    a = anchored
    d, files = with_bundles(a, tmp_path, synthetic, label="curator-b")
    with pytest.raises(AnchorBundleInvalid) as e:
        check_rekor_bundles(d, CURATOR, ISSUER, SIGSTORE_ROOT.read_text())
    assert (e.value.anchor, e.value.sigstore_code) == (files[0].name, "sigstore_identity_mismatch")
    refused(a, tmp_path, capsys, d, "sigstore_identity_mismatch", *BUNDLE_OPTIONS)
    # Named as their signer, they verify.
    assert len(check_rekor_bundles(d, CURATOR_B, ISSUER, SIGSTORE_ROOT.read_text()).verified) == 2


def test_attack_a_bundle_beside_no_anchor_is_refused(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic: Synthetic
) -> None:
    """An anchor removed from the directory, its bundle left behind."""
    a = anchored
    d, files = with_bundles(a, tmp_path, synthetic)
    files[0].unlink()
    with pytest.raises(AnchorBundleStray) as e:
        check_rekor_bundles(d, CURATOR, ISSUER, SIGSTORE_ROOT.read_text())
    assert e.value.anchor == files[0].name + ".sigstore.json" and e.value.code == "anchor_bundle_stray"
    err = refused(a, tmp_path, capsys, d, "anchor_bundle_stray", *BUNDLE_OPTIONS)
    assert "a Rekor bundle without its anchor file" in err


def test_a_missing_bundle_is_listed_and_fails_when_all_are_required(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic: Synthetic
) -> None:
    a = anchored
    d, files = with_bundles(a, tmp_path, synthetic)
    (d / (files[1].name + ".sigstore.json")).unlink()
    code, out, err, path = run_audit(a, tmp_path, capsys, "--anchors", str(d), *BUNDLE_OPTIONS)
    assert code == 0, err
    assert "Rekor: 1 anchors' bundles verified offline" in out
    assert "note: 1 anchors are not yet published to Rekor" in err and files[1].name in err
    assert path.read_bytes() != a.baseline
    r = check_rekor_bundles(d, CURATOR, ISSUER, SIGSTORE_ROOT.read_text())
    assert (r.verified, r.missing) == ((files[0].name,), (files[1].name,))
    with pytest.raises(AnchorBundleMissing) as e:
        check_rekor_bundles(d, CURATOR, ISSUER, SIGSTORE_ROOT.read_text(), require_all=True)
    assert e.value.anchor == files[1].name and e.value.code == "anchor_bundle_missing"
    err = refused(a, tmp_path, capsys, d, "anchor_bundle_missing", *BUNDLE_OPTIONS, "--rekor-require-all")
    assert "no Rekor bundle kept beside it" in err


def test_without_sigstore_python_anchors_are_checked_and_bundles_are_not(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic: Synthetic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = anchored
    d, _ = with_bundles(a, tmp_path, synthetic)
    monkeypatch.setitem(sys.modules, "sigstore.verify", None)  # as if not installed
    assert not sigstore_check.available()
    code, out, _, _ = run_audit(a, tmp_path, capsys, "--anchors", str(d))
    assert code == 0 and "extends all 2 anchors" in out
    code, _, err, path = run_audit(a, tmp_path, capsys, "--anchors", str(d), *BUNDLE_OPTIONS)
    assert code == 2 and "pip install evidence-ledger[sigstore]" in err and path.read_bytes() == a.baseline
    with pytest.raises(SigstoreUnavailable) as e:
        check_rekor_bundles(d, CURATOR, ISSUER, SIGSTORE_ROOT.read_text())
    assert "pip install evidence-ledger[sigstore]" in str(e.value)
    # Nothing accepted unverified, even with no bundle to check.
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SigstoreUnavailable):
        check_rekor_bundles(empty, CURATOR, ISSUER, SIGSTORE_ROOT.read_text())


@pytest.mark.parametrize(
    "extra, says",
    [
        (BUNDLE_OPTIONS, "give --anchors"),
        (("--anchors", "{anchors}", "--rekor-issuer", ISSUER, "--sigstore-root", str(SIGSTORE_ROOT)), "give both --rekor-identity"),
        (("--anchors", "{anchors}", "--rekor-identity", CURATOR, "--sigstore-root", str(SIGSTORE_ROOT)), "give both --rekor-identity"),
        (("--anchors", "{anchors}", "--rekor-require-all"), "go with --rekor-identity"),
        (("--anchors", "{anchors}", "--sigstore-root", str(SIGSTORE_ROOT)), "go with --rekor-identity"),
        (("--anchors", "{anchors}", "--rekor-identity", CURATOR, "--rekor-issuer", ISSUER), "this package embeds none"),
        (("--anchors", "{anchors}", "--rekor-pub", "anchoring.pub"), "ledger audit --anchors DIR --rekor-pub"),
        (("--anchors", "{anchors}", *BUNDLE_OPTIONS[:4], "--sigstore-root", str(SYNTHETIC / "signers.json")),
         "sigstore_trust_root_invalid"),
    ],
)
def test_options_that_cannot_be_honoured_are_refused(
    anchored: Anchored, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], says: str
) -> None:
    args = [x.replace("{anchors}", str(anchored.anchors)) for x in extra]
    code, out, err, path = run_audit(anchored, tmp_path, capsys, *args)
    assert code == 2 and err.startswith("error: ") and says in err, err
    assert out == "" and path.read_bytes() == anchored.baseline
