"""Canonical JSON (docs/FORMAT.md section 7): the only byte form of a payload.

`encode` writes exactly what the ledger accepts: keys sorted by code point,
no whitespace, UTF-8, integers within +-(2^53 - 1), finite floats as
Python's `repr`. `parse_strict` reads JSON as the ledger does: a duplicate
key, an integer that would lose precision, NaN or an infinity is refused.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import InvalidInput

#: The largest integer every JSON reader holds exactly.
MAX_SAFE_INTEGER = (1 << 53) - 1


def _check(value: Any, path: str) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise InvalidInput(path or "$", "integers must be within ±(2^53 − 1)")
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidInput(path or "$", "numbers must be finite")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidInput(path or "$", "object keys must be strings")
            _check(v, f"{path}.{k}" if path else k)
        return
    raise InvalidInput(path or "$", f"{type(value).__name__} has no JSON form")


def encode(value: Any) -> bytes:
    """The canonical JSON bytes of `value` (dicts, lists, str, int, float, bool, None).

    Raises `InvalidInput` naming the path of a value with no canonical form.
    """
    _check(value, "")
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInput("$", f"text must be valid Unicode (no lone surrogates): {e}") from e


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise InvalidInput(k, "duplicate_key: an object repeats this key")
        out[k] = v
    return out


def _int(text: str) -> int:
    n = int(text)
    if abs(n) > MAX_SAFE_INTEGER:
        raise InvalidInput("$", f"integer_precision: {text} is outside ±(2^53 − 1)")
    return n


def _constant(text: str) -> Any:
    raise InvalidInput("$", f"malformed_json: {text} is not JSON")


def parse_strict(data: bytes, what: str = "$") -> Any:
    """Parses JSON strictly; raises `InvalidInput` (field `what`) on anything the ledger refuses."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInput(what, f"not UTF-8: {e}") from e
    try:
        value = json.loads(
            text, object_pairs_hook=_pairs, parse_int=_int, parse_constant=_constant
        )
    except InvalidInput as e:
        raise InvalidInput(what if e.field == "$" else f"{what}.{e.field}", e.rule) from e
    except (ValueError, RecursionError) as e:
        raise InvalidInput(what, f"malformed_json: {e}") from e
    for v in _floats(value):
        if v in (float("inf"), float("-inf")):
            raise InvalidInput(what, "malformed_json: a number overflows a double")
    return value


def _floats(value: Any) -> list[float]:
    out: list[float] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            out.append(v)
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return out


def parse_canonical(data: bytes, what: str = "$") -> Any:
    """Parses `data` strictly and requires it to be in canonical form (no byte may differ)."""
    value = parse_strict(data, what)
    if encode(value) != data:
        raise InvalidInput(what, "not in canonical form (docs/FORMAT.md §7)")
    return value
