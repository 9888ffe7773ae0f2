"""Sigstore bundles verified offline, every check required (`sigstore-check`, in Python).

The ledger accepts a co-signature by a principal enrolled by Sigstore identity
when its bundle verifies, offline, against the trusted root its log records
(`sigstore.root_trusted`; docs/SIGSTORE.md). This module is that check for the
replay (`acceptance.State`), with sigstore-python (the optional `sigstore`
package, `pip install evidence-ledger[sigstore]`), its `Verifier` built from
the recorded root's JSON: no TUF, no network.

`verify_message(bundle, message, identity, issuer, trusted_root)` accepts a
bundle only when all of these hold (what `sigstore_check::verify_message`
requires in Rust), checked in the Rust crate's order, the first that fails
being the refusal:

1. it is a message signature, never a DSSE envelope (`sigstore_bundle_unsupported`);
2. a verified time: the Rekor v1 entry's SET verifies with the key its log ID
   names, valid at the integrated time, which is not in the future (or an
   RFC 3161 time from a timestamp authority of the root);
3. the certificate chains to a Fulcio authority of the root, with code-signing
   usage, and was valid at every verified time; the authority's window in the
   root covers that time;
4. its SCT verifies against a CT log key of the root;
5. its SAN (the first e-mail address or URI) equals `identity`, and its OIDC
   issuer extension (1.3.6.1.4.1.57264.1.8, else the older .1.1) equals `issuer`,
   both exactly;
6. the inclusion proof, the checkpoint signed by a Rekor key of the root, and the
   SET verify;
7. the signature verifies over `message`, and the log entry describes this
   signature, certificate and message.

sigstore-python's `Verifier.verify_artifact` does 3, 4, 6 and 7 and its own share
of 2; 1, the SET's key and time, the authority's window and 5 are done here, as
the Rust crate does them. A refusal is a `Refusal` with the ledger's code
(`sigstore_*`, docs/reject_codes.md), read from the library's exception where it
tells the check apart, and `sigstore_refused` where it does not.

The ledger's rules refuse, before this check, a bundle outside its profile
(`acceptance.bundle_profile`, `sigstore_bundle_unsupported`): more than one log
entry, no inclusion proof, a field the bundle format does not define, repeated
keys, more than 16 KiB. What sigstore-python still refuses and the Rust crate
accepts, so that a replay here may stop (`RuleBroken`) at an entry the ledger
appended: a certificate with more than one SCT; a trusted root of another media
type than version 0.1, with fields it does not define or without any
transparency log or Fulcio authority. No bundle of the Sigstore clients or of
the ledger's own signer is any of these.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, Sequence

from .errors import SigstoreUnavailable

#: What to install to verify Sigstore bundles.
INSTALL = "pip install evidence-ledger[sigstore]"

# Fulcio's OIDC issuer extensions: the current one (a DER UTF8String) and the legacy
# one (the URL's raw bytes).
_ISSUER_V2 = "1.3.6.1.4.1.57264.1.8"
_ISSUER_V1 = "1.3.6.1.4.1.57264.1.1"
#: How much of the library's words a refusal keeps (an inclusion proof's repr is long).
_DETAIL = 300


class Refusal(Exception):
    """A bundle or trusted root refused: `code` is the ledger's (`sigstore_…`),
    `detail` the reason, in the library's words where it gave some."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class Verified:
    """What a bundle that passed establishes."""

    identity: str
    issuer: str
    #: The earliest verified signing time (unix seconds).
    signed_at: int


def available() -> bool:
    """Whether sigstore-python is installed (the `sigstore` extra)."""
    try:
        import sigstore.verify  # noqa: F401
    except ImportError:
        return False
    return True


def _require(what: str) -> None:
    if not available():
        raise SigstoreUnavailable(what)


def _short(e: BaseException) -> str:
    s = str(e) or type(e).__name__
    return s if len(s) <= _DETAIL else s[: _DETAIL - 1] + "…"


# --- the trusted root --------------------------------------------------------------------


class _Root:
    """A trusted root parsed once: sigstore-python's root and verifier, and the windows of
    its authorities and Rekor keys."""

    def __init__(self, json_text: str) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import load_der_public_key
        from sigstore.models import TrustedRoot
        from sigstore.verify import Verifier
        from sigstore_models.trustroot import v1 as trustroot_v1

        def bad(detail: str) -> Refusal:
            return Refusal("sigstore_trust_root_invalid", detail)

        try:
            inner = trustroot_v1.TrustedRoot.from_json(json_text)
        except Exception as e:  # pydantic's ValidationError, a JSON error
            raise bad(f"not a Sigstore trusted root: {_short(e)}") from None

        def window(w: Any, what: str) -> None:
            if w is not None and w.end is not None and w.end < w.start:
                raise bad(f"{what}: its validity window ends before it starts")

        # As `sigstore_verify::Verifier::new` checks a root: every log key loads, no log
        # ID twice, every authority's chain is present and parses, no window backwards.
        ids: set[tuple[bool, bytes]] = set()
        logs = [(True, t) for t in inner.tlogs] + [(False, t) for t in inner.ctlogs]
        for is_rekor, log in logs:
            what = f"{'transparency' if is_rekor else 'CT'} log {log.base_url}"
            window(log.public_key.valid_for, what)
            if len(log.log_id.key_id) != 32:
                raise bad(f"{what}: a log ID is 32 bytes")
            if (is_rekor, log.log_id.key_id) in ids:
                raise bad(f"duplicate trusted log ID: {log.log_id.key_id.hex()}")
            ids.add((is_rekor, log.log_id.key_id))
            try:
                load_der_public_key(log.public_key.raw_bytes or b"")
            except (ValueError, TypeError) as e:
                raise bad(f"{what}: its key does not load: {_short(e)}") from None
        for ca in [*inner.certificate_authorities, *inner.timestamp_authorities]:
            window(ca.valid_for, f"authority {ca.uri or ca.subject}")
            if not ca.cert_chain.certificates:
                raise bad("trusted authority has an empty certificate chain")
            for c in ca.cert_chain.certificates:
                try:
                    x509.load_der_x509_certificate(c.raw_bytes)
                except ValueError as e:
                    raise bad(f"authority {ca.uri or ca.subject}: a certificate does not parse: {_short(e)}") from None
        from sigstore._internal.trust import KeyringPurpose

        try:
            root = TrustedRoot(inner)
            self.verifier = Verifier(trusted_root=root)
            self.rekor_keyring = root.rekor_keyring(KeyringPurpose.VERIFY)
        except Exception as e:  # sigstore.errors.Error and MetadataError: unusable
            raise bad(_short(e)) from None
        self.root = root
        #: Fulcio authorities: (start, end or None, certificates).
        self.fulcio = [
            (ca.valid_for.start, ca.valid_for.end, [x509.load_der_x509_certificate(c.raw_bytes) for c in ca.cert_chain.certificates])
            for ca in inner.certificate_authorities
        ]
        #: Rekor keys by log ID: (start or None, end or None).
        self.rekor: dict[bytes, tuple[Optional[datetime], Optional[datetime]]] = {
            t.log_id.key_id: (
                t.public_key.valid_for.start if t.public_key.valid_for else None,
                t.public_key.valid_for.end if t.public_key.valid_for else None,
            )
            for t in inner.tlogs
        }


_ROOTS: dict[str, _Root] = {}
_ROOTS_LOCK = threading.Lock()
#: Roots kept parsed (a log records few).
_ROOTS_KEPT = 16


def _root(json_text: str) -> _Root:
    """The root parsed once per process however often its bundles are checked (keyed by
    the SHA-256 of its JSON)."""
    key = hashlib.sha256(json_text.encode()).hexdigest()
    with _ROOTS_LOCK:
        r = _ROOTS.get(key)
    if r is None:
        r = _Root(json_text)
        with _ROOTS_LOCK:
            if len(_ROOTS) >= _ROOTS_KEPT:
                _ROOTS.pop(next(iter(_ROOTS)))
            _ROOTS[key] = r
    return r


def check_root(json_text: str) -> None:
    """Raises `Refusal` (`sigstore_trust_root_invalid`) unless `json_text` is a usable
    Sigstore trusted root, `SigstoreUnavailable` without sigstore-python."""
    _require("a Sigstore trusted root")
    _root(json_text)


# --- the signer: SAN and issuer, as the Rust crate reads them ------------------------------


class _Mismatch(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


def _der_utf8(b: bytes) -> Optional[str]:
    """The text of a DER UTF8String (tag 12), or None."""
    if len(b) < 2 or b[0] != 0x0C:
        return None
    n, pos = b[1], 2
    if n & 0x80:
        count = n & 0x7F
        if count == 0 or count > 4 or len(b) < 2 + count:
            return None
        n, pos = int.from_bytes(b[2 : 2 + count], "big"), 2 + count
    if len(b) != pos + n:
        return None
    try:
        return b[pos:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _issuer(cert: Any) -> Optional[str]:
    """The certificate's OIDC issuer: the current extension (a DER UTF8String) when
    present, else the legacy one (a DER UTF8String, or the raw bytes as UTF-8)."""
    from cryptography import x509

    def ext(oid: str) -> Optional[bytes]:
        try:
            v = cert.extensions.get_extension_for_oid(x509.ObjectIdentifier(oid)).value
        except x509.ExtensionNotFound:
            return None
        return bytes(v.value) if isinstance(v, x509.UnrecognizedExtension) else None

    v2 = ext(_ISSUER_V2)
    if v2 is not None:
        s = _der_utf8(v2)
        if s is None:
            raise _Mismatch("sigstore_certificate_invalid", "malformed Fulcio issuer v2 extension")
        return s
    v1 = ext(_ISSUER_V1)
    if v1 is None:
        return None
    s = _der_utf8(v1)
    if s is not None:
        return s
    try:
        return v1.decode("utf-8")
    except UnicodeDecodeError:
        raise _Mismatch("sigstore_certificate_invalid", "malformed Fulcio issuer extension") from None


def _san(cert: Any) -> Optional[str]:
    """The certificate's identity: its first SAN that is an e-mail address or a URI."""
    from cryptography import x509

    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None
    for n in names:
        if isinstance(n, (x509.RFC822Name, x509.UniformResourceIdentifier)):
            return str(n.value)
    return None


class _Signer:
    """The verification policy (sigstore-python calls `verify(cert)` after the chain
    and SCT checks, before the log's): a Fulcio authority valid at each verified time
    issued the certificate, then the SAN, then the issuer, compared exactly."""

    def __init__(self, identity: str, issuer: str, root: "_Root", times: list[datetime]) -> None:
        self.identity = identity
        self.issuer = issuer
        self.root = root
        self.times = times

    def verify(self, cert: Any) -> None:
        for t in self.times:
            _authority_at(self.root, cert, t)
        san = _san(cert)
        if san != self.identity:
            raise _Mismatch("sigstore_identity_mismatch", f"the certificate names {san!r}, not {self.identity!r}")
        issuer = _issuer(cert)
        if issuer != self.issuer:
            raise _Mismatch("sigstore_issuer_mismatch", f"the certificate's OIDC issuer is {issuer!r}, not {self.issuer!r}")


# --- the library's refusals, as the ledger's codes -----------------------------------------

#: (words in the library's message, code), first match wins; "invalid log entry: …"
#: (the log's checks) is read with `_TLOG`.
_WORDS: tuple[tuple[str, str], ...] = (
    # The chain at the verified time: a certificate of it out of its validity then, in
    # the words of cryptography's verifier (they differ between its releases; `_code`
    # also compares the times with the leaf's validity itself), else another fault.
    ("not valid at validation time", "sigstore_certificate_not_valid_at_time"),
    ("has expired", "sigstore_certificate_not_valid_at_time"),
    ("not yet valid", "sigstore_certificate_not_valid_at_time"),
    ("failed to build timestamp certificate chain", "sigstore_certificate_invalid"),
    ("failed to verify SCT", "sigstore_sct_invalid"),
    ("Key usage is not", "sigstore_certificate_invalid"),
    ("Extended usage does not contain", "sigstore_certificate_invalid"),
    ("expired at time of signing", "sigstore_tlog_time_invalid"),
    ("not enough sources of verified time", "sigstore_timestamp_invalid"),
    ("signed timestamp", "sigstore_timestamp_invalid"),
    ("Timestamp Authorities", "sigstore_timestamp_invalid"),
    ("Bundle message digest mismatch", "sigstore_message_mismatch"),
    ("Signature is invalid for input", "sigstore_signature_invalid"),
    ("transparency log entry is inconsistent", "sigstore_tlog_entry_mismatch"),
    ("Expected entry type", "sigstore_tlog_entry_mismatch"),
    ("Unsupported hashedrekord version", "sigstore_bundle_unsupported"),
    ("Integrated time only supported", "sigstore_bundle_unsupported"),
)
#: (how the rest begins, code): the merkle check's words start "inclusion proof", the
#: checkpoint's "checkpoint", "Inclusion proof …" (its root against the proof's) or a
#: malformed note's; the SET's "SET:". Read by prefix: the words quote the proof.
_TLOG: tuple[tuple[str, str], ...] = (
    ("SET:", "sigstore_tlog_promise_invalid"),
    ("inclusion proof", "sigstore_tlog_inclusion_invalid"),
    ("checkpoint", "sigstore_tlog_checkpoint_invalid"),
    ("Inclusion proof", "sigstore_tlog_checkpoint_invalid"),
    ("malformed LogCheckpoint", "sigstore_tlog_checkpoint_invalid"),
    ("malformed Note", "sigstore_tlog_checkpoint_invalid"),
    ("note must contain", "sigstore_tlog_checkpoint_invalid"),
)
#: The bundle's own invariants, as sigstore-python checks them when it reads one.
_BUNDLE: tuple[tuple[str, str], ...] = (
    ("unsupported bundle format", "sigstore_bundle_unsupported"),
    ("Expected log entry version", "sigstore_bundle_unsupported"),
    ("inclusion proof", "sigstore_tlog_inclusion_invalid"),
    ("checkpoint", "sigstore_tlog_checkpoint_invalid"),
    ("inclusion promise", "sigstore_tlog_promise_invalid"),
)


def _code(e: BaseException, cert: Any = None, times: Sequence[datetime] = ()) -> str:
    """The ledger's code for the library's refusal `e`, for a bundle signed with `cert`
    at the verified `times`."""
    from cryptography import x509
    from sigstore.errors import CertValidationError, VerificationError

    if isinstance(e, _Mismatch):
        return e.code
    if isinstance(e, CertValidationError) and cert is not None and any(
        not cert.not_valid_before_utc <= t <= cert.not_valid_after_utc for t in times
    ):
        # The chain failed at a time the certificate itself was not valid (as the Rust
        # crate reads webpki's CertExpired / CertNotValidYet).
        return "sigstore_certificate_not_valid_at_time"
    if isinstance(e, (x509.ExtensionNotFound, x509.UnsupportedGeneralNameType)):
        return "sigstore_certificate_invalid"
    if not isinstance(e, VerificationError):
        return "sigstore_refused"
    msg = str(e)
    if msg.startswith("SET: "):
        return "sigstore_tlog_promise_invalid"
    if msg.startswith("invalid log entry: "):
        rest = msg[len("invalid log entry: ") :]
        return next((c for w, c in _TLOG if rest.startswith(w)), "sigstore_refused")
    return next((c for w, c in _WORDS if w in msg), "sigstore_refused")


def _bundle(bundle_json: str) -> Any:
    """The bundle read by sigstore-python, or `Refusal`."""
    from sigstore.models import Bundle, InvalidBundle

    try:
        return Bundle.from_json(bundle_json)
    except InvalidBundle as e:
        msg = str(e)
        if msg.startswith("failed to load bundle"):
            raise Refusal("sigstore_bundle_malformed", _short(e)) from None
        code = next((c for w, c in _BUNDLE if w in msg), "sigstore_bundle_malformed")
        raise Refusal(code, _short(e)) from None
    except Exception as e:  # a certificate that does not parse, a value out of range
        raise Refusal("sigstore_bundle_malformed", _short(e)) from None


# --- the check ---------------------------------------------------------------------------


#: Rekor v1 entry kinds, whose integrated time a SET signs.
_V1 = {("hashedrekord", "0.0.1"), ("dsse", "0.0.1"), ("intoto", "0.0.2")}


def _within(t: datetime, start: Optional[datetime], end: Optional[datetime]) -> bool:
    return (start is None or start <= t) and (end is None or t <= end)


def _authority_at(root: _Root, cert: Any, at: datetime) -> None:
    """The certificate chains to a Fulcio authority whose window in the root covers `at`
    (sigstore-python takes every authority's certificates as anchors, whatever their
    windows; the Rust crate only those valid at the verified time)."""
    from cryptography import x509
    from cryptography.x509.verification import Criticality, ExtensionPolicy, PolicyBuilder, Store, VerificationError

    anchors = [c for start, end, certs in root.fulcio if _within(at, start, end) for c in certs]
    if not anchors:
        raise Refusal("sigstore_certificate_invalid", f"no Fulcio authority of the trusted root is valid at {at.isoformat()}")
    ca = ExtensionPolicy.webpki_defaults_ca().may_be_present(x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None)
    ee = ExtensionPolicy.webpki_defaults_ee().may_be_present(x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None)
    verifier = (PolicyBuilder().store(Store(anchors)).time(at).extension_policies(ca_policy=ca, ee_policy=ee)
                .build_client_verifier())
    try:
        verifier.verify(cert, [])
    except (VerificationError, x509.UnsupportedGeneralNameType) as e:
        raise Refusal("sigstore_certificate_invalid",
                      f"no Fulcio authority valid at {at.isoformat()} issued the certificate: {_short(e)}") from None


def verify_message(bundle_json: str, message: bytes, identity: str, issuer: str, trusted_root: str,
                   now: Optional[int] = None) -> Verified:
    """Verifies `bundle_json` as a Sigstore message signature over `message` by the
    certificate naming `identity` and `issuer`, against `trusted_root` (its JSON), offline,
    every check required (see the module's doc). `now` (unix seconds; default this
    machine's clock) is when the integrated time may not be later than. Raises `Refusal`
    naming the check that failed, `SigstoreUnavailable` without sigstore-python."""
    _require("a Sigstore bundle")
    root = _root(trusted_root)
    bundle = _bundle(bundle_json)
    if bundle._inner.message_signature is None:
        raise Refusal("sigstore_bundle_unsupported",
                      "a DSSE envelope, where a signature over the message itself is required")
    clock = datetime.fromtimestamp(now, tz=timezone.utc) if now is not None else datetime.now(timezone.utc)
    times: list[datetime] = []
    try:
        # The Rust crate's order: the verified time first (a Rekor v1 entry's SET, by the
        # key its log ID names, valid at the integrated time, which is not in the
        # future), then the chain at that time and the SCT (sigstore-python), the
        # authority's window, SAN and issuer (`_Signer`), the log, and the signature.
        entry = bundle.log_entry._inner
        kv = (entry.kind_version.kind, entry.kind_version.version)
        if kv in _V1 and entry.inclusion_promise is not None and entry.integrated_time is not None:
            integrated = datetime.fromtimestamp(entry.integrated_time, tz=timezone.utc)
            window = root.rekor.get(bytes(entry.log_id.key_id))
            if window is None or not _within(integrated, *window):
                raise Refusal("sigstore_tlog_promise_invalid",
                              f"no log key valid at integrated time {integrated.isoformat()} "
                              f"for log ID {bytes(entry.log_id.key_id).hex()}")
            bundle.log_entry._verify_set(root.rekor_keyring)
            if integrated > clock:
                raise Refusal("sigstore_tlog_time_invalid",
                              f"integrated time {integrated.isoformat()} is in the future (current time: {clock.isoformat()})")
        times = [t.time for t in root.verifier._establish_time(bundle)]
        if not times:
            raise Refusal("sigstore_timestamp_invalid", "not enough sources of verified time")
        root.verifier.verify_artifact(message, bundle, _Signer(identity, issuer, root, times))
    except Refusal:
        raise
    except Exception as e:
        raise Refusal(_code(e, bundle.signing_certificate, times), _short(e)) from None
    return Verified(identity, issuer, int(min(times).timestamp()))
