"""The ledger's timestamps: RFC 3339 in UTC, ending in `Z`; six fractional digits when it writes them."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

_RFC3339_Z = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$")


def parse_utc_micros(text: str) -> int | None:
    """Microseconds since the Unix epoch of an RFC 3339 UTC timestamp, or None."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    m = _RFC3339_Z.match(text)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = (m.group(7) or "").ljust(9, "0")
    try:
        dt = datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc)
    except ValueError:
        return None
    whole = (dt - datetime(1970, 1, 1, tzinfo=timezone.utc)).days * 86_400_000_000 + (
        h * 3600 + mi * 60 + s
    ) * 1_000_000
    return whole + int(frac[:6])


def format_micros(micros: int) -> str:
    """`YYYY-MM-DDTHH:MM:SS.ffffffZ`."""
    secs, us = divmod(micros, 1_000_000)
    dt = datetime.fromtimestamp(secs, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{us:06d}Z"


def now_micros() -> int:
    return time.time_ns() // 1000


def now() -> str:
    """This machine's clock as a ledger timestamp."""
    return format_micros(now_micros())
