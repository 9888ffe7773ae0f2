"""`python -m evidence_ledger`: verify a bundle offline, audit a server, or read a
task class's committed state.

    python -m evidence_ledger verify-bundle FILE --key VKEY [--key VKEY ...]
    python -m evidence_ledger audit URL --key VKEY --trusted FILE [--samples N]
        [--projections DIR [--window-days 30] [--max-skew-secs 300]] [--policy FILE]
        [--anchors DIR [--rekor-identity SAN --rekor-issuer URL --sigstore-root FILE
        [--rekor-require-all]]]
    python -m evidence_ledger state URL TASK_CLASS --key VKEY [--trusted FILE]
        [--min-size N] [--policy FILE] [--window-days 30] [--max-skew-secs 300] [--json]

`audit` saves the new trusted checkpoint only when every check passed.
With `--projections DIR` it also keeps a replica of the log in DIR, follows
it from the trusted checkpoint (only new entries are fetched), replays the
ledger's rules and the projection fold, and requires every task class's
projection to equal the replica's, bit for bit (`evidence_ledger.replay`).
With `--policy FILE` (C2SP tlog-policy) the audited checkpoint is the
server's witnessed one and must be cosigned by witnesses that meet the
policy's quorum; the trusted checkpoint is only ever replaced by such one.
With `--anchors DIR` the checkpoint to be saved must extend every anchor in
DIR (each a checkpoint signed by a trusted key, proven a prefix of it by the
server's consistency proof, checked here: `evidence_ledger.anchors`); with
`--rekor-identity SAN --rekor-issuer URL --sigstore-root FILE` as well, the
Rekor bundle kept beside each anchor must verify offline as a signature by
that Sigstore identity over the anchor's bytes (needs sigstore-python).

`state` reads `GET /v1/task-classes/{name}/state` and checks it
(`verify.check_state`): the commitment is proven in the signed checkpoint,
every case record hashes to the committed state (or the class is proven
absent), the view is recomputed from the records bit for bit and states
the agreed settings and a current time, and the commitment is not older
than `--min-size` (default: the size in `--trusted`, which is then
replaced by the answer's checkpoint once everything passed).

Exit status: 0 verified; 1 the answer does not verify (the server lied or
the file was changed); 2 usage, input or network error (or a replica
directory that cannot be used); 3 a stale checkpoint (the server shows an
older tree than the trusted one or the replica).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from . import sigstore_check
from .anchors import check_anchors, check_rekor_bundles, read_anchors
from .audit import audit
from .client import Client
from .cosign import Policy
from .errors import InvalidInput, LedgerError, ProblemError, StaleCheckpoint, TransportError, VerificationError
from .replay import Replica, ReplayRules, replay_projections
from .stats import Settings
from .trust import TrustedState
from .verify import ReplayRules as StateRules
from .verify import VerifiedState, verify_bundle


def _keys(args: argparse.Namespace) -> list[str]:
    keys: list[str] = list(args.key or [])
    for path in args.key_file or []:
        keys.append(Path(path).read_text(encoding="utf-8").strip())
    if not keys:
        raise InvalidInput("--key", "give at least one trusted verifier key (--key or --key-file)")
    return keys


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evidence_ledger", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="command", required=True)
    vb = sub.add_parser("verify-bundle", help="verify an offline proof bundle (`ledger bundle` output)")
    vb.add_argument("file", help="the bundle file, or - for standard input")
    vb.add_argument("--policy", metavar="FILE", help="a C2SP tlog-policy file: the bundle's tree must be proven a prefix of a checkpoint its witnesses' quorum cosigned (`ledger bundle --policy`)")
    au = sub.add_parser("audit", help="audit a running server")
    au.add_argument("url")
    au.add_argument("--trusted", required=True, help="the trusted checkpoint file (created on the first run)")
    au.add_argument("--samples", type=int, default=16, help="random entries to re-hash and prove")
    au.add_argument("--token", help="the server's read token, if it has one; a reader token (readers file) also has the disclosures checked against their leaves (of the sampled entries and, with --projections, of every entry replayed, which must give no value two handles)")
    au.add_argument("--projections", metavar="DIR", help="also replay the log into the replica kept in DIR and require every projection to equal its own")
    au.add_argument("--window-days", type=int, default=30, help="with --projections: the window every projection must state (the server's window_days)")
    au.add_argument("--policy", metavar="FILE", help="a C2SP tlog-policy file: the audited checkpoint must be cosigned by a quorum of its witnesses")
    au.add_argument("--max-skew-secs", type=int, default=300, help="with --projections: how far a projection's stated time may be from this clock")
    au.add_argument("--anchors", metavar="DIR", help="the anchors the audited tree must extend: every *.checkpoint file in DIR, each signed by a trusted key (--key) and proven a prefix of the audited tree by the server's consistency proof, checked here")
    au.add_argument("--rekor-identity", metavar="SAN", help="with --anchors: also check the Rekor bundle kept beside each anchor (<anchor>.sigstore.json) offline, as a keyless signature over the anchor's bytes by this Sigstore identity (the certificate's SAN, compared exactly); needs sigstore-python")
    au.add_argument("--rekor-issuer", metavar="URL", help="with --rekor-identity: the OIDC issuer the certificate names")
    au.add_argument("--sigstore-root", metavar="FILE", help="with --rekor-identity (required): the Sigstore trusted root the bundles must verify against")
    au.add_argument("--rekor-require-all", action="store_true", help="with --rekor-identity: fail on an anchor without a kept bundle (by default it is listed as not yet published)")
    # Key-signed bundles are checked by the Rust `ledger audit --rekor-pub`: sigstore-python
    # reads no bundle without a certificate. Refused with that said, not as unknown.
    au.add_argument("--rekor-pub", metavar="PEM", help=argparse.SUPPRESS)
    st = sub.add_parser("state", help="read and verify a task class's committed state")
    st.add_argument("url")
    st.add_argument("task_class")
    st.add_argument("--trusted", help="a trusted checkpoint file: the answer must be consistent with it and no older (saved on success)")
    st.add_argument("--min-size", type=int, help="the commitment may have no entry after it in the log of this size (default: the trusted size)")
    st.add_argument("--token", help="the server's read token, if it has one")
    st.add_argument("--policy", metavar="FILE", help="a C2SP tlog-policy file: the answer's checkpoint must be cosigned by a quorum of its witnesses")
    st.add_argument("--window-days", type=int, default=30, help="the window the view must state (the server's window_days)")
    st.add_argument("--max-skew-secs", type=int, default=300, help="how far the view's stated time may be from this clock")
    st.add_argument("--json", action="store_true", help="print the verified records and view as JSON")
    for p in (vb, au, st):
        p.add_argument("--key", action="append", help="a trusted note verifier key (repeatable)")
        p.add_argument("--key-file", action="append", help="a file holding a trusted verifier key")
    args = ap.parse_args(argv)
    try:
        keys = _keys(args)
        if args.command == "verify-bundle":
            data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
            s = verify_bundle(data, keys, Policy.load(args.policy) if args.policy else None)
            witnessed = "" if s.witnessed_size is None else f"; a prefix of the witnessed tree of size {s.witnessed_size}"
            print(
                f"bundle verified: task class {s.task_class} at tree size {s.tree_size}, "
                f"{s.evidence} evidence entries proven, held-out statistics recomputed; "
                f"recommends {s.recommended_tier} (from {s.current_tier}), "
                f"human approval required: {str(s.requires_human_approval).lower()}{witnessed}"
            )
            return 0
        if args.command == "state":
            return _state(args, keys)
        sigstore_root = _refuse_unusable_anchor_options(args)
        trust = TrustedState.file(args.trusted, autosave=False)
        policy = Policy.load(args.policy) if args.policy else None
        client = Client(args.url, keys, trust=trust, token=args.token, policy=policy)
        replica = Replica.open(args.projections, client.keys) if args.projections else None
        r = audit(client, samples=args.samples)
        since = f"consistent with trusted size {r.previous_size}" if r.previous_size is not None else "first audit: checkpoint saved"
        witnessed = ""
        if policy is not None:
            witnessed = f"; cosigned by {len(r.cosigned)} witnesses ({', '.join(r.cosigned) or 'none: quorum none'})"
        print(
            f"audit passed: size {r.size} root {r.root} ({since}); {r.entries_checked} entries proven, "
            f"{r.projections_checked} projections and {r.evidence_checked} evidence entries verified{witnessed}"
        )
        if replica is not None:
            if args.window_days < 1 or args.max_skew_secs < 0:
                raise InvalidInput("--window-days", "the window is at least one day and the skew not negative")
            rules = ReplayRules(Settings(window_seconds=args.window_days * 24 * 3600), args.max_skew_secs * 1_000_000)
            rp = replay_projections(client, replica, rules)
            print(
                f"replay: {rp.task_classes} task classes equal the replica's projections at size {rp.size} "
                f"({rp.followed} new entries checked and folded into {args.projections}, {rp.recommendations} signed "
                f"recommendations among them equal to the replica's); window {args.window_days} days, "
                f"confidence {rules.settings.confidence}, {rules.settings.resamples} resamples, "
                f"stated times within {args.max_skew_secs} s of this clock"
            )
        if args.anchors is not None:
            _check_anchors(args, client, sigstore_root)
        trust.save()
        print(f"OK: saved the new trusted checkpoint to {args.trusted}")
        return 0
    except StaleCheckpoint as e:
        print(f"stale: {e}", file=sys.stderr)
        return 3
    except VerificationError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    except (InvalidInput, ProblemError, TransportError, LedgerError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _refuse_unusable_anchor_options(args: argparse.Namespace) -> Optional[str]:
    """Refuses the anchor options that cannot be honoured, before anything is fetched;
    the trusted root's JSON when the Rekor bundles are to be checked."""
    if args.rekor_pub is not None:
        raise InvalidInput(
            "--rekor-pub",
            "this audit checks keyless (identity) Rekor bundles only (--rekor-identity, --rekor-issuer): "
            "sigstore-python reads no bundle signed by a bare key; check key-signed bundles with "
            "the Rust `ledger audit --anchors DIR --rekor-pub PEM`",
        )
    if args.anchors is not None and not Path(args.anchors).is_dir():
        raise InvalidInput(args.anchors, "the anchors directory does not exist (or is not a directory)")
    wanted = args.rekor_identity is not None or args.rekor_issuer is not None
    if wanted and args.anchors is None:
        raise InvalidInput("--rekor-identity", "--rekor-identity and --rekor-issuer check the bundles beside anchors: give --anchors")
    if not wanted and (args.rekor_require_all or args.sigstore_root is not None):
        raise InvalidInput("--rekor-require-all", "--rekor-require-all and --sigstore-root go with --rekor-identity and --rekor-issuer")
    if not wanted:
        return None
    if args.rekor_identity is None or args.rekor_issuer is None:
        raise InvalidInput("--rekor-identity", "give both --rekor-identity SAN and --rekor-issuer URL (the certificate must name both)")
    if args.sigstore_root is None:
        raise InvalidInput(
            "--sigstore-root",
            "give the Sigstore trusted root the bundles must verify against (this package embeds none)",
        )
    if not sigstore_check.available():
        raise InvalidInput(
            "--rekor-identity",
            f"checking the Rekor bundles needs the optional `sigstore` package (sigstore-python): {sigstore_check.INSTALL}",
        )
    root = Path(args.sigstore_root).read_text(encoding="utf-8")
    try:
        sigstore_check.check_root(root)
    except sigstore_check.Refusal as e:
        raise InvalidInput(args.sigstore_root, e.detail, e.code) from None
    return root


def _check_anchors(args: argparse.Namespace, client: Client, sigstore_root: Optional[str]) -> None:
    """The anchors check against the checkpoint the audit is about to save, then the
    Rekor bundles beside them; prints what was checked. Raises on a failure."""
    cp = client.trust.checkpoint
    if cp is None:
        raise InvalidInput("--trusted", "no checkpoint was verified")
    found = read_anchors(args.anchors)
    checked = check_anchors(client, found, client.keys, cp)
    print(f"anchors:     the audited tree extends all {len(checked)} anchors in {args.anchors}")
    if sigstore_root is None:
        return
    r = check_rekor_bundles(found, args.rekor_identity, args.rekor_issuer, sigstore_root, require_all=args.rekor_require_all)
    print(
        f"Rekor: {len(r.verified)} anchors' bundles verified offline (logged, signed by {args.rekor_identity} "
        f"(issuer {args.rekor_issuer}), over the anchor's bytes)"
    )
    if r.missing:
        print(
            f"note: {len(r.missing)} anchors are not yet published to Rekor (the next `ledger anchor publish "
            f"--rekor` publishes them): {', '.join(r.missing)}",
            file=sys.stderr,
        )


def _state(args: argparse.Namespace, keys: list[str]) -> int:
    if args.window_days < 1 or args.max_skew_secs < 0 or (args.min_size is not None and args.min_size < 0):
        raise InvalidInput("--window-days", "the window is at least one day, the skew and the minimum size not negative")
    trust = TrustedState.file(args.trusted, autosave=False) if args.trusted else TrustedState()
    policy = Policy.load(args.policy) if args.policy else None
    client = Client(args.url, keys, trust=trust, token=args.token, policy=policy)
    rules = StateRules(Settings(window_seconds=args.window_days * 24 * 3600), args.max_skew_secs * 1_000_000)
    v = client.state(args.task_class, min_size=args.min_size, rules=rules)
    if args.json:
        print(json.dumps(_state_json(v), indent=2, sort_keys=True))
    elif v.class_ is None:
        left, right = v.answer.neighbours or (None, None)
        around = ", ".join(n.class_.task_class for n in (left, right) if n is not None) or "none: the state is empty"
        print(
            f"state verified: task class {v.task_class} is not registered in the state committed at size {v.index} "
            f"(entry {v.index}, proven in the checkpoint of size {v.checkpoint.size}); {v.task_classes} task classes, "
            f"neighbours {around}"
        )
    else:
        assert v.view is not None
        h, rec = v.view["held_out"], v.view["recommendation"]
        print(
            f"state verified: task class {v.task_class} as committed at size {v.index} (entry {v.index}, proven in the "
            f"checkpoint of size {v.checkpoint.size}); {len(v.cases)} case records ({sum(c.active for c in v.cases)} active) "
            f"hash to the committed state root {v.state_root} over {v.task_classes} task classes; view recomputed "
            f"bit for bit: {h['cases']} held-out cases scored, mean {h['mean']}, {v.view['failures']['block']} block "
            f"failures in the window; recommends {rec['recommended_tier']} (from {rec['current_tier']}), human approval "
            f"required: {str(rec['requires_human_approval']).lower()}"
        )
    if args.trusted:
        trust.save()
    return 0


def _state_json(v: VerifiedState) -> dict[str, object]:
    return {
        "task_class": v.task_class,
        "registered": v.registered,
        "committed_size": v.index,
        "checkpoint_size": v.checkpoint.size,
        "state_root": v.state_root,
        "task_classes": v.task_classes,
        "class": None if v.class_ is None else v.class_.to_json(),
        "cases": [c.to_json() for c in v.cases],
        "view": v.view,
    }


if __name__ == "__main__":
    sys.exit(main())
