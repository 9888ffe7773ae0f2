"""`python -m evidence_ledger`: verify a bundle offline, or audit a server.

    python -m evidence_ledger verify-bundle FILE --key VKEY [--key VKEY ...]
    python -m evidence_ledger audit URL --key VKEY --trusted FILE [--samples N]

Exit status: 0 verified; 1 the answer does not verify (the server lied or
the file was changed); 2 usage, input or network error; 3 a stale
checkpoint (the server shows an older tree than the trusted one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from .audit import audit
from .client import Client
from .errors import InvalidInput, LedgerError, ProblemError, StaleCheckpoint, TransportError, VerificationError
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
    au = sub.add_parser("audit", help="audit a running server")
    au.add_argument("url")
    au.add_argument("--trusted", required=True, help="the trusted checkpoint file (created on the first run)")
    au.add_argument("--samples", type=int, default=16, help="random entries to re-hash and prove")
    au.add_argument("--token", help="the server's read token, if it has one")
    for p in (vb, au):
        p.add_argument("--key", action="append", help="a trusted note verifier key (repeatable)")
        p.add_argument("--key-file", action="append", help="a file holding a trusted verifier key")
    args = ap.parse_args(argv)
    try:
        keys = _keys(args)
        if args.command == "verify-bundle":
            data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
            s = verify_bundle(data, keys)
            print(
                f"bundle verified: task class {s.task_class} at tree size {s.tree_size}, "
                f"{s.evidence} evidence entries proven, held-out statistics recomputed; "
                f"recommends {s.recommended_tier} (from {s.current_tier}), "
                f"human approval required: {str(s.requires_human_approval).lower()}"
            )
            return 0
        client = Client(args.url, keys, trust=TrustedState.file(args.trusted), token=args.token)
        r = audit(client, samples=args.samples)
        since = f"consistent with trusted size {r.previous_size}" if r.previous_size is not None else "first audit: checkpoint saved"
        print(
            f"audit passed: size {r.size} root {r.root} ({since}); {r.entries_checked} entries proven, "
            f"{r.projections_checked} projections and {r.evidence_checked} evidence entries verified"
        )
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
