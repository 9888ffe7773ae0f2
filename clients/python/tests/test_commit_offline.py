"""Completeness by commitment without a server: the trees and their paths, absence by
neighbours, the records' canonical bytes, the view from the records against the fold's
view over a random history, and `state.committed` in the ledger's rules and the fold."""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace
from typing import Any, Optional, Sequence

import pytest

from evidence_ledger import AbsenceNotProven, CasesMismatch, InvalidInput, NotCommitted, RuleBroken, SigningKey, WrongStateRoot
from evidence_ledger import events as ev
from evidence_ledger.acceptance import State as Rules
from evidence_ledger.commit import (
    CaseRecord,
    ClassProof,
    ClassRecord,
    ClassState,
    FailedScore,
    LatestScore,
    Neighbour,
    State,
    cases_root,
    check_absent,
    check_class,
    record_bytes,
    tree_path,
    tree_root,
    view,
)
from evidence_ledger.envelope import Envelope, decode_leaf, sign_payload
from evidence_ledger.fold import Projection, TierRule, first_difference
from evidence_ledger.merkle import EMPTY_ROOT, verify_inclusion
from evidence_ledger.stats import Settings

# --- the trees ------------------------------------------------------------------------


def mth(leaves: Sequence[bytes]) -> bytes:
    """RFC 6962 section 2.1, as written (an independent definition)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def leaves(n: int) -> list[bytes]:
    return [hashlib.sha256(b"\x00" + f"leaf {i}".encode()).digest() for i in range(n)]


def test_every_path_verifies_against_the_root_for_trees_up_to_33_leaves() -> None:
    assert tree_root([]) == EMPTY_ROOT == hashlib.sha256(b"").digest()
    for n in range(1, 34):
        ls = leaves(n)
        root = tree_root(ls)
        assert root == mth(ls), n
        for i in range(n):
            verify_inclusion(i, n, ls[i], tree_path(ls, i), root)
        assert tree_path(ls, n) == [] and tree_path(ls, -1) == []


def klass(name: str, cases: Sequence[CaseRecord] = ()) -> ClassRecord:
    return ClassRecord(task_class=name, tier="bronze", silver=TierRule(1, 0.5), gold=TierRule(2, 0.9), pending_proposals=0,
                       registered=0, cases=len(cases), cases_root=cases_root(cases).hex())


def state(names: Sequence[str]) -> State:
    return State(tuple(ClassState(klass(n), ()) for n in names))


def test_absence_is_proven_before_between_and_after_the_classes_and_in_an_empty_state() -> None:
    for names in (["b", "d"], [], ["b"], ["b", "d", "f", "h", "j"]):
        s = state(names)
        root = s.root()
        for missing in ("a", "c", "e", "i", "k"):
            n = s.neighbours(missing)
            check_absent(root, len(names), missing, n)
        for present in names:
            p = s.proof(present)
            assert p is not None
            with pytest.raises(ValueError):
                s.neighbours(present)


def test_a_present_class_cannot_be_shown_absent() -> None:
    s = state(["a", "b", "c"])
    root = s.root()
    pa, pc = s.proof("a"), s.proof("c")
    assert pa is not None and pc is not None
    # Real, proven neighbours that are not adjacent.
    with pytest.raises(AbsenceNotProven, match="not adjacent"):
        check_absent(root, 3, "b", (Neighbour(klass("a"), pa), Neighbour(klass("c"), pc)))
    # `c` claimed at index 1: its proof does not lead to the root from there.
    with pytest.raises(AbsenceNotProven, match="not in the committed state"):
        check_absent(root, 3, "b", (Neighbour(klass("a"), pa), Neighbour(klass("c"), replace(pc, index=1))))
    # The last class shown as the last before a name it precedes.
    with pytest.raises(AbsenceNotProven):
        check_absent(root, 3, "bb", (Neighbour(klass("b"), s.proof("b") or pa), None))
    # A neighbour proven in a tree of another size, no neighbours for a state that has classes,
    # and a record that differs from the committed one.
    with pytest.raises(AbsenceNotProven, match="another size"):
        check_absent(root, 4, "d", (Neighbour(klass("c"), pc), None))
    with pytest.raises(AbsenceNotProven, match="no neighbours"):
        check_absent(root, 3, "d", (None, None))
    with pytest.raises(AbsenceNotProven, match="not in the committed state"):
        check_absent(root, 3, "d", (Neighbour(replace(klass("c"), tier="gold"), pc), None))


def case(task_class: str, case_id: str, *, active: bool = True, latest: Optional[LatestScore] = None,
         failures: Sequence[FailedScore] = (), curation: str = "held-out") -> CaseRecord:
    return CaseRecord(task_class, case_id, curation, active, latest, tuple(failures))


def test_a_class_is_checked_against_its_case_tree_and_the_state_root() -> None:
    cs = [case("tc", f"c{i}", latest=LatestScore(10 + i, "ab" * 32, 1_790_000_000_000_000 + i, 0.5 + i / 10, True))
          for i in range(4)]
    tc = ClassState(klass("tc", cs), tuple(cs))
    s = State((ClassState(klass("a"), ()), tc, ClassState(klass("z"), ())))
    root, proof = s.root(), s.proof("tc")
    assert proof is not None and proof.count == 3 and proof.index == 1
    check_class(root, tc.class_, cs, proof)
    for lie, match in (
        (cs[:1] + cs[2:], "do not hash"),                               # a case left out
        ([cs[1], cs[0]] + cs[2:], "out of order"),                      # reordered
        (cs[:1] + cs, "out of order or repeated"),                      # repeated
        (cs[:3] + [replace(cs[3], task_class="a")], "belongs to"),      # another class's
        (cs[:3] + [replace(cs[3], record="task_class")], "not a case record"),
        (cs[:3] + [replace(cs[3], active=False)], "do not hash"),       # altered
    ):
        with pytest.raises(CasesMismatch, match=match):
            check_class(root, tc.class_, lie, proof)
    # A careful liar recomputes the case tree: then the class record is not the committed one.
    fewer = cs[1:]
    with pytest.raises(NotCommitted):
        check_class(root, klass("tc", fewer), fewer, proof)
    with pytest.raises(NotCommitted):
        check_class(root, tc.class_, cs, ClassProof(2, 3, proof.path))


def test_records_are_canonical_json_with_floats_as_floats() -> None:
    c = case("tc", "c1", latest=LatestScore(7, "ab" * 32, 1_790_000_000_000_000, 1.0, True),
             failures=[FailedScore(7, 1_790_000_000_000_000, 1, 0, 2)])
    assert record_bytes(c) == (
        b'{"active":true,"case_id":"c1","curation_class":"held-out","failures":[{"block":1,"index":7,"info":2,'
        b'"sequenced_at":1790000000000000,"warn":0}],"latest":{"index":7,"leaf_hash":"' + b"ab" * 32
        + b'","passed":true,"score":1.0,"sequenced_at":1790000000000000},"record":"case","task_class":"tc"}'
    )
    assert record_bytes(case("tc", "c2", active=False)) == \
        b'{"active":false,"case_id":"c2","curation_class":"held-out","failures":[],"latest":null,"record":"case","task_class":"tc"}'
    r = ClassRecord("tc", "silver", TierRule(1, 0.0), TierRule(2, 1), 3, 4, 0, EMPTY_ROOT.hex())
    assert record_bytes(r) == (
        b'{"cases":0,"cases_root":"' + EMPTY_ROOT.hex().encode() + b'","gold":{"min_cases_for_promotion":2,'
        b'"score_threshold":1.0},"pending_proposals":3,"record":"task_class","registered":4,"silver":'
        b'{"min_cases_for_promotion":1,"score_threshold":0.0},"task_class":"tc","tier":"silver"}'
    )


# --- a log built in memory ----------------------------------------------------------------


def digest(tag: str) -> str:
    return "blake3:" + hashlib.sha256(tag.encode()).hexdigest()


class Log:
    """Entries checked by the ledger's rules and folded, as the replica does (a cited
    checkpoint at the entry's own index is the fold's root there)."""

    def __init__(self) -> None:
        self.rules = Rules()
        self.fold = Projection()
        self.roots: list[bytes] = []
        self.at = 1_790_000_000_000_000
        self.op = SigningKey.generate("op")
        self.append(ev.PrincipalEnrolled.of(self.op, "op@example.org", ["operator"]).sign(self.op))

    def append(self, env: Envelope, step: int = 1) -> int:
        self.at += step
        leaf = env.leaf_bytes(self.at)
        d = decode_leaf(leaf)
        index = self.rules.size

        def cite(size: int, root: str, field: str) -> None:
            known = self.roots[size] if size < len(self.roots) else self.fold.root() if size == index else None
            if known is None or root != known.hex():
                raise RuleBroken(index, "checkpoint_unknown", field, "not a checkpoint of this log")

        self.rules.check(d, index, cite)
        self.rules.apply(d, index)
        self.roots.append(self.fold.root())
        self.fold.apply(index, leaf, d)
        return index

    def commitment(self, **body: Any) -> dict[str, Any]:
        st = self.fold.state()
        b: dict[str, Any] = {"checkpoint": {"size": self.fold.size, "root": self.fold.root().hex()},
                             "state_root": st.root().hex(), "task_classes": len(st.classes)}
        b.update(body)
        return b


class World:
    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.log = g = Log()
        self.harness, self.cur_a, self.cur_b, self.rec, self.ledger = (
            SigningKey.generate(n) for n in ("harness", "cur-a", "cur-b", "reconciler", "ledger"))
        for k, role in ((self.harness, "harness"), (self.cur_a, "curator"), (self.cur_b, "curator"),
                        (self.rec, "reconciler"), (self.ledger, "ledger")):
            g.append(ev.PrincipalEnrolled.of(k, f"{k.name}@example.org", [role]).sign(g.op))
        self.classes = ["tc-b", "tc-a"]
        self.cases: dict[str, list[ev.CaseDraft]] = {c: [] for c in self.classes}
        self.proposals: list[tuple[str, ev.CaseDraft]] = []
        self.runs: dict[str, list[str]] = {}
        self.commitments = self.proposed = 0
        for c in self.classes:
            g.append(ev.TaskClassRegistered(task_class=c, silver=ev.TierRule(2, 0.5), gold=ev.TierRule(3, 0.8),
                                            failure_modes=[ev.FailureMode("broken", "block", "b"), ev.FailureMode("slow", "warn", "s"),
                                                           ev.FailureMode("style", "info", "i")],
                                            breakdown_keys=["correctness"], rubric_digest=digest(c)).sign(g.op))
            for i in range(5):
                self.add_case(c, f"{c}-case-{i}", "held-out" if i < 4 else "corpus-derived")
            self.runs[c] = []
            for iso in ("microvm", "shared_kernel"):
                run = f"{c}-{iso}"
                g.append(ev.RunStarted(run, c, "h 1", digest(c), digest("image"), iso).sign(self.harness))
                self.runs[c].append(run)

    def add_case(self, c: str, case_id: str, curation: str = "held-out") -> None:
        d, bound = ev.CaseDraft(case_id, case_id, "positive", "medium", curation, digest(case_id), digest(case_id + "-cassette")).bind()
        self.log.append(ev.CaseAdded.cosigned(c, d, source="curated", source_ref="bench", added_at="2026-11-20T00:00:00Z",
                                              added_by=self.cur_a, reviewed_by=self.cur_b).sign(self.cur_a, bound=[bound]))
        self.cases[c].append(d)

    def active(self, c: str) -> list[ev.CaseDraft]:
        return [d for d in self.cases[c] if self.log.rules.cases[d.case_id]["active"]]

    def step(self) -> None:
        rng, g = self.rng, self.log
        c = rng.choice(self.classes)
        r = rng.random()
        gap = rng.choices([1, 1_000_000, 3600 * 1_000_000, 2 * 24 * 3600 * 1_000_000], weights=[6, 6, 6, 1])[0]
        active = self.active(c)
        if r < 0.6 and active:
            d = rng.choice(active)
            fm = tuple(rng.choice([("broken", "block"), ("slow", "warn"), ("style", "info")])
                       for _ in range(rng.choice([0, 0, 0, 0, 0, 1, 2])))
            value = rng.choice([0.0, 1.0, round(0.5 + rng.random() / 2, 3), round(rng.random(), 3)])
            s = ev.ScoreRecorded(run_id=rng.choice(self.runs[c]), task_class=c, case_id=d.case_id, case_digest=d.case_digest,
                                 rubric_digest=digest(c), cassette_digest=d.cassette_digest, harness_version="h 1",
                                 image_digest=digest("image"), score=ev.BenchScore(value >= 0.5, value, {"correctness": value}, fm),
                                 started_at="2026-11-20T00:00:00Z", finished_at="2026-11-20T00:01:00Z", operator_fingerprint="ci")
            g.append(s.sign(self.harness), gap)
        elif r < 0.65 and len(active) > 1:
            d = rng.choice(active)
            g.append(ev.CaseRetired.cosigned(d.case_id, d.case_digest, "superseded", retired_by=self.cur_a,
                                             reviewed_by=self.cur_b).sign(self.cur_b), gap)
        elif r < 0.76:
            self.proposed += 1
            n = self.proposed
            d, bound = ev.CaseDraft(f"{c}-p{n}", "p", "negative", "hard", rng.choice(["held-out", "corpus-derived"]), digest(f"p{n}"),
                                    digest(f"p{n}-cassette")).bind("draft.case_name")
            g.append(ev.CaseProposed(f"prop-{n}", c, d, "outcome-ledger").sign(self.rec, bound=[bound]), gap)
            self.proposals.append((c, d))
        elif r < 0.86 and self.proposals:
            pc, d = self.proposals.pop(rng.randrange(len(self.proposals)))
            pid = f"prop-{(d.case_name or '').rsplit('-p', 1)[1]}"
            if rng.random() < 0.7:
                g.append(ev.ProposalApproved.cosigned(pid, d, "2026-11-21T00:00:00Z", added_by=self.cur_a,
                                                      reviewed_by=self.cur_b).sign(self.cur_a), gap)
                self.cases[pc].append(d)
            else:
                g.append(ev.ProposalRejected(pid, "no").sign(self.cur_b), gap)
        else:
            g.append(sign_payload(self.ledger, "state.committed", g.commitment()), gap)
            self.commitments += 1


COMMITTED_KEYS = ("task_class", "tree_size", "now_micros", "window_start_micros", "settings", "tier",
                  "active_cases_by_curation_class", "pending_proposals", "held_out", "all_cases", "failures", "evidence",
                  "recommendation")


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_the_view_from_the_records_equals_the_folds_over_a_random_history(seed: int) -> None:
    """At every step, for every class: the view the committed records give equals, key by
    key and bit for bit, the fold's view at the same size, time and settings; the state
    built from the fold's caches equals the one built afresh; every commitment folds."""
    w = World(seed)
    settings = Settings(window_seconds=3 * 24 * 3600, confidence=0.9, resamples=100)
    window = settings.window_seconds * 1_000_000
    compared = 0
    for step in range(220):
        w.step()
        g = w.log
        st = g.fold.state()
        if step % 20 == 0:
            fresh = Projection.from_json(g.fold.to_json()).state()
            assert fresh == st and fresh.root() == st.root(), step
        for c in w.classes:
            cls = st.class_(c)
            assert cls is not None
            check_class(st.root(), cls.class_, cls.cases, st.proof(c) or ClassProof(0, 0, ()))
            # Now, later, or exactly when a committed score or failure is at the window's start.
            edges = [f.sequenced_at for x in cls.cases for f in x.failures] + [x.latest.sequenced_at for x in cls.cases if x.latest]
            now = w.rng.choice([g.at, g.at + 12 * 3600 * 1_000_000] + ([w.rng.choice(edges) + window] if edges else []))
            committed = view(cls.class_, cls.cases, g.fold.size, now, settings)
            folded = g.fold.view(c, now, settings, g.fold.size, g.fold.root())
            assert first_difference(committed, {k: folded[k] for k in COMMITTED_KEYS}) is None, (step, c)
            compared += 1
    assert compared == 440 and w.commitments > 5
    # The records' view with the default settings too (2,000 resamples).
    for c in w.classes:
        cls = w.log.fold.state().class_(c)
        assert cls is not None
        folded = w.log.fold.view(c, w.log.at, Settings(), w.log.fold.size, w.log.fold.root())
        assert first_difference(view(cls.class_, cls.cases, w.log.fold.size, w.log.at, Settings()),
                                {k: folded[k] for k in COMMITTED_KEYS}) is None


# --- state.committed in the rules and the fold -----------------------------------------


@pytest.fixture()
def world() -> World:
    w = World(11)
    for _ in range(30):
        w.step()
    return w


def refused(w: World, body: dict[str, Any], code: str, field: str, key: Optional[SigningKey] = None) -> None:
    with pytest.raises(RuleBroken) as e:
        w.log.append(sign_payload(key or w.ledger, "state.committed", body))
    assert (e.value.code, e.value.field) == (code, field), e.value


def test_a_commitment_at_the_head_is_accepted_from_the_ledger_key_and_changes_no_state(world: World) -> None:
    g = world.log
    before = g.fold.state()
    index = g.append(ev.StateCommitted(ev.CheckpointRef(g.fold.size, g.fold.root().hex()), before.root().hex(),
                                       len(before.classes)).sign(world.ledger))
    assert g.fold.state() == before and index == g.fold.size - 1
    # The next commitment names the log with the first one in it: same state, its own index.
    g.append(sign_payload(world.ledger, "state.committed", g.commitment()))


def test_a_stale_commitment_is_refused_with_state_not_at_head(world: World) -> None:
    g = world.log
    size = g.fold.size - 1
    refused(world, g.commitment(checkpoint={"size": size, "root": g.roots[size].hex()}), "state_not_at_head",
            "event.body.checkpoint.size")
    refused(world, g.commitment(checkpoint={"size": size + 2, "root": g.fold.root().hex()}), "state_not_at_head",
            "event.body.checkpoint.size")


def test_a_commitment_breaking_the_other_rules_is_refused(world: World) -> None:
    g = world.log
    refused(world, g.commitment(checkpoint={"size": g.fold.size, "root": "00" * 32}), "checkpoint_unknown", "event.body.checkpoint")
    refused(world, g.commitment(state_root=g.fold.state().root().hex().upper()), "invalid_digest", "event.body.state_root")
    refused(world, g.commitment(state_root="ab"), "invalid_digest", "event.body.state_root")
    refused(world, g.commitment(extra=1), "unknown_field", "event.body.extra")
    refused(world, g.commitment(), "role_not_permitted", "event.kind", key=g.op)
    refused(world, g.commitment(), "role_not_permitted", "event.kind", key=world.harness)
    with pytest.raises(InvalidInput):
        ev.StateCommitted(ev.CheckpointRef(1, "00" * 32), "AB" * 32, 1)


def test_a_commitment_to_a_state_the_log_does_not_give_fails_the_fold_naming_its_index(world: World) -> None:
    g = world.log
    index = g.fold.size
    st = g.fold.state()
    cls = st.classes[0]
    fewer = ClassState(replace(cls.class_, cases=cls.class_.cases - 1, cases_root=cases_root(cls.cases[1:]).hex()), cls.cases[1:])
    lies = (
        g.commitment(state_root="ab" * 32),
        g.commitment(task_classes=len(world.classes) + 1),
        g.commitment(state_root=State((fewer,) + st.classes[1:]).root().hex()),  # a case left out
    )
    for body in lies:
        leaf = sign_payload(world.ledger, "state.committed", body).leaf_bytes(g.at + 1)
        with pytest.raises(WrongStateRoot) as e:
            g.fold.apply(index, leaf)
        assert e.value.index == index and e.value.what == f"entry {index}"
        assert (e.value.committed, e.value.folded) == (body["state_root"], st.root().hex())
        assert g.fold.size == index  # nothing was folded
    # The honest commitment folds.
    g.append(sign_payload(world.ledger, "state.committed", g.commitment()))
    assert g.fold.size == index + 1
