"""The exceptions of the package, grouped by what the caller must do.

- `InvalidInput`: the caller's own input is wrong (an event field, a key
  file, an argument, a policy file: `PolicyError` names its line). Raised before anything is sent; names the field and
  the rule it breaks.
- `ProblemError`: the server refused a request with an
  `application/problem+json` document. Every documented code has its own
  class (`evidence_ledger.problems`), under a group base:
  `MalformedRequest` (400), `Unauthenticated` (401), `Forbidden` (403),
  `NotFoundError` (404), `Conflict` (409), `RuleViolation` (422),
  `ServiceUnavailable` (503: retry later) and `ServerFault` (5xx).
- `VerificationError`: an answer of the server does not verify against
  what the client trusts (a key, a saved checkpoint, the evidence). The
  server lied, or its data is damaged: do not use the answer, and alert.
  `StaleCheckpoint` and `ForkDetected` are the two a trusted state raises;
  `NoQuorum` and `LogNotListed` are a witness policy's refusals; a state
  answer (`verify.check_state`) fails with `CommitmentMismatch`,
  `StaleCommitment`, `NotCommitted`, `CasesMismatch`, `AbsenceNotProven` or
  `ViewMismatch`, and a replay with `WrongStateRoot` when the ledger
  committed a state its log does not give and with `Incomplete` when it
  signed a projection or a recommendation its log does not give; the
  disclosures served to a reader with a role that do not open the entry's
  commitments raise `DisclosureMismatch`, a field answered as redacted
  that no `field.redacted` entry of the replayed log records raises
  `Incomplete`, and a value with two handles, or a handle beside another
  value, in the disclosures a replay is served raises `RuleBroken`. An
  anchor the audited tree does not extend raises an `AnchorError`
  (`AnchorUnknownKey`, `AnchorWrongLog`, `AnchorTruncation`,
  `AnchorRewrite`, `AnchorFork`), and a Rekor bundle kept beside the
  anchors that does not verify, stands beside no anchor or is missing
  where every anchor must have one an `AnchorBundleError`
  (`AnchorBundleInvalid`, `AnchorBundleStray`, `AnchorBundleMissing`):
  each names the file and carries a stable `code` (`anchor_...`).
- `NotYetWitnessed`: the entry is not in the witnessed tree yet; ask again
  after the server's next witnessing (not a lie).
- `TransportError`: the server could not be reached, or answered something
  that is not the API (after the retries the client allows).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence


class LedgerError(Exception):
    """Every error this package raises."""


class InvalidInput(LedgerError, ValueError):
    """The caller's input breaks a rule; nothing was sent.

    `field` is the JSON path (or argument name) at fault and `rule` says
    what it must be.
    """

    def __init__(self, field: str, rule: str, code: Optional[str] = None) -> None:
        super().__init__(f"{field}: {rule}" + (f" ({code})" if code else ""))
        self.field = field
        self.rule = rule
        #: The server's problem code for the same fault, when there is one.
        self.code = code


class ProblemError(LedgerError):
    """The server refused a request (RFC 9457 problem document).

    `code` is the stable code (docs/reject_codes.md, docs/API.md), `field`
    the JSON path or parameter it concerns when there is one, `status` the
    HTTP status, `detail` the server's explanation, and `recorded_index`
    the entry that records the refusal (only for `tier.apply`).
    """

    code: str = ""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        field: Optional[str] = None,
        recorded_index: Optional[int] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        where = f" on {field}" if field else ""
        super().__init__(f"refused {status} {code}{where}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        self.recorded_index = recorded_index
        self.retry_after = retry_after


class MalformedRequest(ProblemError):
    """400-class refusals: the request or envelope is malformed."""


class Unauthenticated(ProblemError):
    """401: the signer is unknown, the signature is bad, or a read token is missing."""


class Forbidden(ProblemError):
    """403: the signer may not do this (revoked, wrong role, tier.apply)."""


class NotFoundError(ProblemError):
    """404: no such route, entry or task class."""


class Conflict(ProblemError):
    """409: the id or thing already exists, or the capability is spent."""


class RuleViolation(ProblemError):
    """422: a domain rule of docs/EVENTS.md is broken."""


class ServiceUnavailable(ProblemError):
    """503: the server cannot answer now; it says when to retry."""


class ServerFault(ProblemError):
    """500: an internal error on the server."""


class UnknownProblem(ProblemError):
    """A problem code this package does not know (a newer server)."""


class VerificationError(LedgerError):
    """An answer does not verify: do not use it.

    `what` names the part of the answer at fault (such as `receipt.inclusion_proof`
    or `view.held_out.mean`).
    """

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.what = what
        self.reason = reason


class BadSignature(VerificationError):
    """A signed note (checkpoint, bundle attestation) has no valid signature by a trusted key."""


class ProofMismatch(VerificationError):
    """An inclusion or consistency proof does not lead to the signed root."""


class LeafMismatch(VerificationError):
    """A leaf does not hash to its leaf hash, is not the envelope that was posted, or is
    served (to a reader with a role, beside its disclosures) as another kind than its own."""


class StaleCheckpoint(VerificationError):
    """The server shows a tree smaller than one the client already verified."""

    def __init__(self, trusted: int, served: int) -> None:
        super().__init__(
            "checkpoint",
            f"the server shows size {served}, older than the trusted size {trusted}",
        )
        self.trusted = trusted
        self.served = served


class ForkDetected(VerificationError):
    """The server's tree is not an extension of the one the client trusts."""


class EvidenceMismatch(VerificationError):
    """A projection's evidence or statistics do not follow from the cited leaves."""


class Incomplete(VerificationError):
    """A projection is not the one the whole log gives (a projection served, or a
    `promotion.recommended` entry the ledger signed), or a field is answered as
    redacted to a reader with a role with no `field.redacted` entry in the log that
    records it, so its disclosure is withheld (found by replay)."""


class RuleBroken(VerificationError):
    """The log holds an entry the ledger's acceptance rules refuse (found by replay):
    no honest ledger appended it. `index` is the entry, `code` the server's
    refusal code for it, `field` the JSON path at fault. A replay with a reader token
    also finds an entry the door refuses from the disclosures: a value given a second
    handle (`handle_value_bound`) or a handle named beside another value
    (`handle_value_mismatch`; `handles.Audit`)."""

    def __init__(self, index: int, code: str, field: str, reason: str) -> None:
        super().__init__(f"entry {index}", f"{code} on {field}: {reason}")
        self.index = index
        self.code = code
        self.field = field


class SigstoreUnavailable(VerificationError):
    """A Sigstore bundle (a co-signature by a principal enrolled by Sigstore identity) or
    a Sigstore trusted root (`sigstore.root_trusted`) must be verified, and the optional
    `sigstore` package (sigstore-python) is not installed: `pip install
    evidence-ledger[sigstore]`. Nothing was accepted unverified: the replay stops at the
    entry, which is neither accepted nor found to break the rules. `index` is the entry
    and `field` the JSON path of the bundle or root, when a replay raised it."""

    def __init__(self, what: str, index: Optional[int] = None, field: Optional[str] = None) -> None:
        super().__init__(
            what,
            "cannot be verified without the optional `sigstore` package (sigstore-python): "
            "pip install evidence-ledger[sigstore]",
        )
        self.index = index
        self.field = field


class SettingsMismatch(VerificationError):
    """A projection states settings (window, confidence, resamples) other than the
    agreed ones, or a time too far from this machine's clock (found by replay)."""


class WrongStateRoot(VerificationError):
    """A `state.committed` entry commits a state that the log before it does not fold
    to (found by folding the log: every commitment is checked before it is folded).
    The ledger signed a wrong commitment, and it is in the log: signed evidence of
    misbehaviour at entry `index`. `committed` and `folded` are the two state roots
    (hex); `committed_classes` and `folded_classes` the two class counts."""

    def __init__(self, index: int, committed: str, folded: str, committed_classes: int, folded_classes: int, reason: str = "") -> None:
        super().__init__(
            f"entry {index}",
            reason or f"commits state root {committed} over {committed_classes} task classes; "
            f"the log before it folds to {folded} over {folded_classes}",
        )
        self.index = index
        self.committed = committed
        self.folded = folded
        self.committed_classes = committed_classes
        self.folded_classes = folded_classes


class CommitmentMismatch(VerificationError):
    """A state answer's commitment is not what it claims: its entry is not a
    `state.committed` naming the log just before it (its own index), the answer's
    state root, class count or tree differ from the entry's or the signed
    checkpoint's, or the entry lies beyond the checkpoint."""


class StaleCommitment(StaleCheckpoint):
    """A state answer's commitment is older than what the caller already knows: it
    commits the state of the log at size `index` (its own index), and the log of size
    `known` had entries after the commitment (`index + 1 < known`)."""

    def __init__(self, known: int, index: int) -> None:
        VerificationError.__init__(
            self,
            "commitment.index",
            f"the state was committed at size {index}; the log of size {known} already known has entries after it",
        )
        self.trusted = self.known = known
        self.served = self.index = index


class NotCommitted(VerificationError):
    """The class record of a state answer is not in the committed state: its
    inclusion proof does not lead to the committed state root (or it is the record
    of another task class than the one asked for)."""


class CasesMismatch(VerificationError):
    """The case records of a state answer are not exactly those of the committed
    class record: one was left out, added, altered, repeated, put out of order, or
    belongs to another task class (they do not hash to its case tree)."""


class AbsenceNotProven(VerificationError):
    """A state answer says the task class is not registered, and its neighbours do not
    prove it: they are not adjacent leaves of the committed state tree around the
    name (or not in it at all)."""


class ViewMismatch(VerificationError):
    """The view of a state answer is not the one its committed records give at its
    stated time and settings (`what` names the first field that differs)."""


class DisclosureMismatch(VerificationError):
    """A disclosure served with an entry does not open one of the entry's commitments
    (docs/PRIVACY.md): it matches no commitment in the leaf (a wrong value or salt, or
    another entry's), names another field than the one whose commitment it opens, opens
    a field twice, or is malformed. `disclosure` is its position in the answer's
    `disclosures`, `field` the committed field it concerns when one is known."""

    def __init__(self, what: str, reason: str, disclosure: int, field: Optional[str] = None) -> None:
        super().__init__(what, reason)
        self.disclosure = disclosure
        self.field = field


class AnchorError(VerificationError):
    """The audited tree does not extend an anchor (`evidence_ledger.anchors`): a signed
    checkpoint of the log kept in an anchors directory. `anchor` is the anchor's file
    name and `code` the stable code of the failure (`anchor_unknown_key`,
    `anchor_wrong_log`, `anchor_truncation`, `anchor_rewrite`, `anchor_fork`, as the
    Rust `AnchorError` names them; `anchor_bundle_...` for a Rekor bundle kept beside
    an anchor)."""

    code: str = "anchor"

    def __init__(self, anchor: str, reason: str, what: Optional[str] = None) -> None:
        super().__init__(what or f"anchor {anchor}", f"{reason} ({self.code})")
        self.anchor = anchor


class AnchorUnknownKey(AnchorError):
    """The anchor is not a well-formed signed checkpoint, or no trusted key signed it
    (or its origin is not the name of the key that signed it)."""

    code = "anchor_unknown_key"


class AnchorWrongLog(AnchorError):
    """The anchor is signed by a trusted key but names another log (`found`) than the
    audited checkpoint's origin (`expected`)."""

    code = "anchor_wrong_log"

    def __init__(self, anchor: str, expected: str, found: str) -> None:
        super().__init__(anchor, f"origin `{found}` is not this log's `{expected}`")
        self.expected = expected
        self.found = found


class AnchorTruncation(AnchorError):
    """The audited tree is smaller than the anchor: entries the anchor covers are gone."""

    code = "anchor_truncation"

    def __init__(self, anchor: str, log_size: int, anchor_size: int) -> None:
        super().__init__(anchor, f"the log was truncated: it has {log_size} entries, the anchor covers {anchor_size}")
        self.log_size = log_size
        self.anchor_size = anchor_size


class AnchorRewrite(AnchorError):
    """The audited tree has the anchor's size and another root: the log was rewritten.
    `log_root` and `anchor_root` are the two roots (hex)."""

    code = "anchor_rewrite"

    def __init__(self, anchor: str, size: int, log_root: str, anchor_root: str) -> None:
        super().__init__(
            anchor, f"the log was rewritten: at size {size} its root is {log_root}, the anchor says {anchor_root}"
        )
        self.size = size
        self.log_root = log_root
        self.anchor_root = anchor_root


class AnchorFork(AnchorError):
    """The audited tree is larger than the anchor but not an extension of the anchored
    tree: no consistency proof from the anchor's size to the audited size leads to both
    roots (the server's proof does not verify, or it gave none)."""

    code = "anchor_fork"

    def __init__(self, anchor: str, anchor_size: int, log_size: int, reason: str) -> None:
        super().__init__(
            anchor, f"the log forked after it: no consistency from size {anchor_size} to {log_size} ({reason})"
        )
        self.anchor_size = anchor_size
        self.log_size = log_size


class AnchorBundleError(AnchorError):
    """A Rekor bundle kept beside an anchor (`<anchor>.sigstore.json`) fails the offline
    check (`anchors.check_rekor_bundles`)."""

    code = "anchor_bundle"


class AnchorBundleInvalid(AnchorBundleError):
    """The bundle beside the anchor does not verify, offline, as a Sigstore message
    signature by the expected identity and issuer over exactly the anchor file's bytes,
    logged in Rekor, against the trusted root. `sigstore_code` is the refusal's code
    (`sigstore_message_mismatch`, `sigstore_identity_mismatch`, ...)."""

    code = "anchor_bundle_invalid"

    def __init__(self, anchor: str, bundle: str, sigstore_code: str, detail: str) -> None:
        super().__init__(anchor, f"{sigstore_code}: {detail}", what=f"Rekor bundle {bundle}")
        self.bundle = bundle
        self.sigstore_code = sigstore_code


class AnchorBundleStray(AnchorBundleError):
    """A Rekor bundle in the anchors directory stands beside no anchor file (its anchor
    was removed or renamed). `anchor` is the bundle's file name."""

    code = "anchor_bundle_stray"

    def __init__(self, bundle: str) -> None:
        super().__init__(bundle, "a Rekor bundle without its anchor file", what=f"Rekor bundle {bundle}")


class AnchorBundleMissing(AnchorBundleError):
    """Every anchor must have its Rekor bundle (`require_all`), and this one has none."""

    code = "anchor_bundle_missing"

    def __init__(self, anchor: str) -> None:
        super().__init__(anchor, "no Rekor bundle kept beside it")


class ReplicaError(LedgerError):
    """The replica's saved state cannot be used: unreadable, of another format or
    log, or not at the checkpoint it claims. Nothing was checked against the server."""


class MalformedAnswer(VerificationError):
    """An answer is not in the form the API documents (a field is missing or of the wrong type)."""


class PolicyError(InvalidInput):
    """A policy file breaks a rule of C2SP tlog-policy (or of the ledger's reading of it).

    `line` is the 1-based line at fault (0: the file as a whole, such as a
    missing quorum line) and `rule` says what it must be.
    """

    def __init__(self, line: int, rule: str, source: str = "policy") -> None:
        super().__init__(f"{source} line {line}" if line else source, rule)
        self.line = line


class NoQuorum(VerificationError):
    """A checkpoint lacks the cosignatures the policy's quorum needs.

    `have` lists the policy names of the witnesses whose cosignatures
    verified, `needs` the quorum's name.
    """

    def __init__(self, have: Sequence[str], needs: str) -> None:
        cosigned = ", ".join(have) if have else "no witness"
        super().__init__("checkpoint", f"cosigned by {cosigned}; the policy's quorum `{needs}` is not met")
        self.have = tuple(have)
        self.needs = needs


class LogNotListed(VerificationError):
    """The log key that signed the checkpoint is not one of the policy's `log` lines."""


class NotYetWitnessed(LedgerError):
    """The entry is not in the witnessed tree yet: the newest checkpoint a quorum
    cosigned (`witnessed_size`) does not cover entry `index`. Not a lie: the server
    submits its head to the witnesses every few seconds; ask again later."""

    def __init__(self, index: int, witnessed_size: int) -> None:
        super().__init__(f"entry {index} is not in the witnessed tree of size {witnessed_size} yet; try again after the next witnessing")
        self.index = index
        self.witnessed_size = witnessed_size


class TransportError(LedgerError):
    """The server could not be reached, or kept answering 503 past the retries allowed."""


def problem_from(status: int, doc: Mapping[str, Any], retry_after: Optional[float] = None) -> ProblemError:
    """The typed exception for a problem document."""
    from .problems import BY_CODE

    code = doc.get("code")
    detail = doc.get("detail")
    field = doc.get("field")
    recorded = doc.get("recorded_index")
    code_s = code if isinstance(code, str) else ""
    cls: type[ProblemError] = BY_CODE.get(code_s, UnknownProblem)
    return cls(
        status,
        code_s,
        detail if isinstance(detail, str) else "",
        field if isinstance(field, str) else None,
        recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None,
        retry_after,
    )
