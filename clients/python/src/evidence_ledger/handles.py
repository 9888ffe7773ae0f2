"""One value, one handle, audited over a walk of the log (`events/src/handles.rs`
`Audit`, in Python).

From schema 3 on, where a case id, an identity or a workflow id is first named, the
identifier holds its handle: the digest of the commitment to the value beside it
(docs/PRIVACY.md, "Handles"). Anyone can check from the log that a handle is such a
digest or one an earlier event gave (`acceptance.State`: `handle_not_derived`). What
the log cannot show to a reader without the values is that one value has one handle:
the ledger checks it at its door, where it holds the disclosures
(`handle_value_bound`, `handle_value_mismatch`). A reader with a role is served the
disclosures, and checks it again over its walk of the log (`replay.Replica.follow`),
as `ledger verify --token` does:

- a value named in clear (schemas 1 and 2, before the log's switch) is its own handle;
- a schema-3 event whose handle is derived (`disclose.HandleField.derived`) gives
  that handle to the value its companion discloses: a value that already has another
  handle is refused (`handle_value_bound`), and so is a handle already given to
  another value (`handle_value_mismatch`);
- a schema-3 event that names an earlier handle is held to the value that handle was
  given for, when the walk knows it (`handle_value_mismatch`);
- a `field.redacted` of a companion (`case_name`, `draft.case_name`, `identity_name`,
  `workflow_name`) unbinds what the redacted entry gave, as the door forgets it: a
  later event may give that value a new handle;
- a companion the walk is not shown (redacted, or a reader without a role) is passed
  over.

The walk knows what the door knows from the entries it met: one that starts past
entry 0 (a replica opened from its directory) checks the handles given from there on.
It keeps BLAKE3 hashes of the values, never the values, and only in memory: a hash of
a guessable value (a `GHSA-…` id) kept on disk would let whoever reads the file test
a guess.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import blake3

from .disclose import SCHEMA_HANDLES, Disclosed, handle_field, is_handle_name_path
from .errors import RuleBroken


def value_hash(class_: str, value: str) -> bytes:
    """The BLAKE3 hash a value is known by: its class (`case`, `identity`, `workflow`),
    a zero byte, and the value (`events::handles::value_hash`)."""
    return blake3.blake3(class_.encode("utf-8") + b"\x00" + value.encode("utf-8")).digest()


class Audit:
    """The rule that one value has one handle, as a reader holding the disclosures checks
    it over a walk of the log from its first entry (see the module's doc). `see` takes
    each entry in log order."""

    def __init__(self) -> None:
        #: The handle each value has, and the entry that gave it.
        self._by_value: dict[tuple[str, bytes], tuple[str, int]] = {}
        #: The value each handle stands for, and the entry that gave it.
        self._by_handle: dict[tuple[str, str], tuple[bytes, int]] = {}

    @property
    def known(self) -> int:
        """How many handles the walk knows the value of."""
        return len(self._by_handle)

    def see(self, index: int, payload: Mapping[str, Any], opened: Optional[Sequence[Disclosed]]) -> None:
        """Takes entry `index`: its payload (one the ledger's rules accept), and its
        committed fields with their values when the walk holds them (`EntryView.disclosed`;
        None without a role). A schema-3 companion that was not disclosed is passed over.
        Raises `RuleBroken` naming the entry, the identifier and the door's code
        (`handle_value_bound`: the value already has another handle;
        `handle_value_mismatch`: the handle stands for another value)."""
        event = payload.get("event")
        if not isinstance(event, dict):
            return
        kind, body = event.get("kind"), event.get("body")
        if not isinstance(kind, str) or not isinstance(body, dict):
            return
        if kind == "field.redacted":
            if isinstance(body.get("field"), str) and is_handle_name_path(body["field"]):
                gave = body.get("entry")
                self._by_handle = {k: v for k, v in self._by_handle.items() if v[1] != gave}
                self._by_value = {k: v for k, v in self._by_value.items() if v[1] != gave}
            return
        h = handle_field(kind, body)
        if h is None or not isinstance(h.handle, str):
            return
        class_, handle = h.class_, h.handle
        schema = payload.get("schema")
        clear = isinstance(schema, int) and schema < SCHEMA_HANDLES
        if clear:
            value = handle
        else:
            disclosed = next((d.value for d in opened or () if d.path == h.spec.name_path), None)
            if not isinstance(disclosed, str):
                return
            value = disclosed
        vh = value_hash(class_, value)
        field = f"event.body.{h.spec.handle_path}"
        if not (clear or h.derived):
            known = self._by_handle.get((class_, handle))
            if known is not None and known[0] != vh:
                raise RuleBroken(
                    index,
                    "handle_value_mismatch",
                    field,
                    f"names the handle `{handle}` of another {class_} (given at entry {known[1]}) beside its value",
                )
            return
        bound = self._by_value.get((class_, vh))
        if bound is not None:
            if bound[0] == handle:
                return
            raise RuleBroken(
                index,
                "handle_value_bound",
                field,
                f"this {class_} already has the handle `{bound[0]}` (entry {bound[1]}), and is given another",
            )
        given = self._by_handle.get((class_, handle))
        if given is not None:
            raise RuleBroken(
                index,
                "handle_value_mismatch",
                field,
                f"the handle `{handle}` was given to another {class_} at entry {given[1]}",
            )
        self._by_value[(class_, vh)] = (handle, index)
        self._by_handle[(class_, handle)] = (vh, index)
