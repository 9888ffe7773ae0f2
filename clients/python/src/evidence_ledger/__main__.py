"""`python -m evidence_ledger`: verify a bundle offline, or audit a server.

    python -m evidence_ledger verify-bundle FILE --key VKEY [--key VKEY ...]
    python -m evidence_ledger audit URL --key VKEY --trusted FILE [--samples N]
        [--projections DIR [--window-days 30] [--max-skew-secs 300]] [--policy FILE]

`audit` saves the new trusted checkpoint only when every check passed.
With `--projections DIR` it also keeps a replica of the log in DIR, follows
it from the trusted checkpoint (only new entries are fetched), replays the
ledger's rules and the projection fold, and requires every task class's
projection to equal the replica's, bit for bit (`evidence_ledger.replay`).
With `--policy FILE` (C2SP tlog-policy) the audited checkpoint is the
server's witnessed one and must be cosigned by witnesses that meet the
policy's quorum; the trusted checkpoint is only ever replaced by such one.

Exit status: 0 verified; 1 the answer does not verify (the server lied or
the file was changed); 2 usage, input or network error (or a replica
directory that cannot be used); 3 a stale checkpoint (the server shows an
older tree than the trusted one or the replica).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from .audit import audit
from .client import Client
from .cosign import Policy
from .errors import InvalidInput, LedgerError, ProblemError, StaleCheckpoint, TransportError, VerificationError
from .replay import Replica, ReplayRules, replay_projections
from .stats import Settings
from .trust import TrustedState
from .verify import verify_bundle


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
    au.add_argument("--token", help="the server's read token, if it has one")
    au.add_argument("--projections", metavar="DIR", help="also replay the log into the replica kept in DIR and require every projection to equal its own")
    au.add_argument("--window-days", type=int, default=30, help="with --projections: the window every projection must state (the server's window_days)")
    au.add_argument("--policy", metavar="FILE", help="a C2SP tlog-policy file: the audited checkpoint must be cosigned by a quorum of its witnesses")
    au.add_argument("--max-skew-secs", type=int, default=300, help="with --projections: how far a projection's stated time may be from this clock")
    for p in (vb, au):
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
                f"({rp.followed} new entries checked and folded into {args.projections}); window {args.window_days} days, "
                f"confidence {rules.settings.confidence}, {rules.settings.resamples} resamples, "
                f"stated times within {args.max_skew_secs} s of this clock"
            )
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


if __name__ == "__main__":
    sys.exit(main())
