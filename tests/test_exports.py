"""Every extension-point export: how its result is decoded, exactly as the ABI packs it.

The probe guest returns whatever its script stores in its status word (low 32 bits) and
high word (high 32 bits); `node_digit` makes the answer depend on the current node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from tests.conftest import wat_guest
from tests.probe import CALLS, EXPORT_IDS, HIGH, LAST_EXPORT, STATUS, ExportInputs, Script, status_of, word
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.framework_api import (
    ClusterEvent,
    Code,
    FilterResult,
    NodeScore,
    NominatingMode,
    NormalizeScoreResult,
    PermitResult,
    PostFilterResult,
    PreFilterResult,
    ScoreResult,
    Status,
)
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.vocabulary import EmptyHandle

POD = {"metadata": {"name": "web-0", "namespace": "shop", "uid": "uid-web-0"},
       "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}
TARGET = {"metadata": {"name": "db-0", "namespace": "shop", "uid": "uid-db-0"},
          "spec": {"containers": [{"name": "db", "image": "postgres:16"}], "nodeName": "node-1"}}
INPUTS = ExportInputs(POD, TARGET)

I32_EXPORTS = ["prefilter", "filter", "prescore", "reserve", "prebind", "bind", "addpod", "removepod",
               "normalizescore"]


@pytest.fixture
def inst(make_instance: Callable[..., GuestInstance]) -> GuestInstance:
    return make_instance()


def with_reason(reason: bytes) -> Script:
    script = Script()
    return script.op("status_reason", *script.put(reason))


# --- i32 exports -------------------------------------------------------------------------

@pytest.mark.parametrize("code", list(Code))
@pytest.mark.parametrize("export", I32_EXPORTS)
def test_i32_status_codes(export: str, code: Code, inst: GuestInstance, handle: EmptyHandle) -> None:
    with_reason(f"{export} says {code.label}".encode()).returns(code).load(inst)
    status = status_of(INPUTS.call(inst, export, handle))
    if code == Code.SUCCESS:
        assert status == Status(Code.SUCCESS, "", "probe")
    else:
        assert status == Status(code, f"{export} says {code.label}", "probe")
    assert word(inst, LAST_EXPORT) == EXPORT_IDS[export]
    assert inst.calls == 1 == word(inst, CALLS)


@pytest.mark.parametrize("export", I32_EXPORTS)
def test_non_success_without_status_reason_has_an_empty_reason(
    export: str, inst: GuestInstance, handle: EmptyHandle
) -> None:
    Script().returns(Code.UNSCHEDULABLE).load(inst)
    assert status_of(INPUTS.call(inst, export, handle)) == Status(Code.UNSCHEDULABLE, "", "probe")


@pytest.mark.parametrize("bad", [6, 9, -1, 0x7FFFFFFF])
@pytest.mark.parametrize("export", I32_EXPORTS)
def test_i32_unknown_status_code_is_an_error(export: str, bad: int, inst: GuestInstance,
                                             handle: EmptyHandle) -> None:
    with_reason(b"whatever").returns(bad).load(inst)
    status = status_of(INPUTS.call(inst, export, handle))
    assert status == Status(Code.ERROR, f"wasm plugin probe: {export} returned unknown status code {bad}",
                            "probe")
    assert not inst.broken


@pytest.mark.parametrize("bad", [6, 9])
@pytest.mark.parametrize("export", ["score", "postfilter", "permit"])
def test_i64_unknown_status_code_is_an_error(export: str, bad: int, inst: GuestInstance,
                                             handle: EmptyHandle) -> None:
    if export == "permit":
        with_reason(b"whatever").returns(100, bad).load(inst)  # permit: status in the HIGH word
    else:
        with_reason(b"whatever").returns(bad, 100).load(inst)
    status = status_of(INPUTS.call(inst, export, handle))
    prefix = "node node-1: " if export == "score" else ""
    assert status == Status(Code.ERROR, f"{prefix}wasm plugin probe: {export} returned unknown status code {bad}",
                            "probe")
    assert not inst.broken


# --- filter over several nodes --------------------------------------------------------------

def test_filter_gives_one_status_per_node(inst: GuestInstance, handle: EmptyHandle) -> None:
    with_reason(b"node rejected").op("node_digit", STATUS).load(inst)
    nodes = ["node-0", "node-2", "node-3", "node-5", "node-4", "node-1", "node-0"]
    res = inst.filter(POD, nodes, handle)
    assert isinstance(res, FilterResult)
    assert res.statuses == (
        ("node-0", Status(Code.SUCCESS, "", "probe")),
        ("node-2", Status(Code.UNSCHEDULABLE, "node rejected", "probe")),
        ("node-3", Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node rejected", "probe")),
        ("node-5", Status(Code.SKIP, "node rejected", "probe")),
        ("node-4", Status(Code.WAIT, "node rejected", "probe")),
        ("node-1", Status(Code.ERROR, "node rejected", "probe")),
        ("node-0", Status(Code.SUCCESS, "", "probe")),
    )
    assert inst.calls == len(nodes) == word(inst, CALLS)
    assert word(inst, LAST_EXPORT) == EXPORT_IDS["filter"]
    assert not inst.broken


def test_filter_reason_is_per_node(inst: GuestInstance, handle: EmptyHandle) -> None:
    """A reason given for one node does not stick to the next node's status."""
    Script().op("node_digit", STATUS).load(inst)
    res = inst.filter(POD, ["node-2", "node-3"], handle)
    assert res.as_dict() == {"node-2": Status(Code.UNSCHEDULABLE, "", "probe"),
                             "node-3": Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "", "probe")}
    script = Script()
    script.op("node_digit", STATUS)
    script.op("status_reason", *script.put(b"only for node-2")).load(inst)
    assert inst.filter(POD, ["node-2"], handle).statuses[0][1].reason == "only for node-2"
    Script().op("node_digit", STATUS).load(inst)
    assert inst.filter(POD, ["node-3"], handle).statuses[0][1].reason == ""


def test_filter_unknown_code_on_one_node(inst: GuestInstance, handle: EmptyHandle) -> None:
    Script().op("node_digit", STATUS).load(inst)
    res = inst.filter(POD, ["node-0", "node-9", "node-2"], handle)
    assert res.as_dict() == {
        "node-0": Status(Code.SUCCESS, "", "probe"),
        "node-9": Status(Code.ERROR, "wasm plugin probe: filter returned unknown status code 9", "probe"),
        "node-2": Status(Code.UNSCHEDULABLE, "", "probe"),
    }


def test_filter_of_no_nodes_runs_nothing(inst: GuestInstance, handle: EmptyHandle) -> None:
    assert inst.filter(POD, [], handle) == FilterResult(())
    assert inst.calls == 0 == word(inst, CALLS)


# --- score ----------------------------------------------------------------------------------

@pytest.mark.parametrize("score", [0, 1, 100, -5, -1, 2**31 - 1, -(2**31), 1_000_000])
def test_score_packing(score: int, inst: GuestInstance, handle: EmptyHandle) -> None:
    Script().returns(0, score).load(inst)
    res = inst.score(POD, ["node-1"], handle)
    assert res == ScoreResult(Status(Code.SUCCESS, "", "probe"), (NodeScore("node-1", score),))
    assert word(inst, LAST_EXPORT) == EXPORT_IDS["score"]


def test_score_over_several_nodes(inst: GuestInstance, handle: EmptyHandle) -> None:
    Script().op("node_digit", HIGH).op("store", STATUS, 0).load(inst)
    nodes = ["node-3", "node-9", "node-0", "node-7"]
    res = inst.score(POD, nodes, handle)
    assert res == ScoreResult(Status(Code.SUCCESS, "", "probe"),
                              tuple(NodeScore(n, int(n[-1])) for n in nodes))
    assert inst.calls == 4 == word(inst, CALLS)


def test_score_failure_on_one_node_is_the_result(inst: GuestInstance, handle: EmptyHandle) -> None:
    with_reason(b"cannot score").op("node_digit", STATUS).op("store", HIGH, 50).load(inst)
    res = inst.score(POD, ["node-0", "node-2", "node-0"], handle)
    assert res == ScoreResult(Status(Code.UNSCHEDULABLE, "node node-2: cannot score", "probe"))
    assert inst.calls == 2  # stops at the first failure


def test_score_with_status_in_the_high_word_is_not_a_failure(inst: GuestInstance, handle: EmptyHandle) -> None:
    """Low 32 bits are the status: a score of 2 with status 0 is Success, not Unschedulable."""
    Script().returns(0, 2).load(inst)
    assert inst.score(POD, ["node-1"], handle).scores == (NodeScore("node-1", 2),)
    Script().returns(2, 0).load(inst)
    assert inst.score(POD, ["node-1"], handle).status.code == Code.UNSCHEDULABLE


# --- postfilter -------------------------------------------------------------------------------

@pytest.mark.parametrize(("low", "high", "nominated", "expected"), [
    (0, 0, b"", PostFilterResult(Status(Code.SUCCESS, "", "probe"), "", NominatingMode.NOOP)),
    (0, 1, b"node-2", PostFilterResult(Status(Code.SUCCESS, "", "probe"), "node-2", NominatingMode.OVERRIDE)),
    (0, 0, b"node-3", PostFilterResult(Status(Code.SUCCESS, "", "probe"), "node-3", NominatingMode.NOOP)),
    (2, 0, b"", PostFilterResult(Status(Code.UNSCHEDULABLE, "no victim", "probe"), "", NominatingMode.NOOP)),
    (3, 1, b"node-1", PostFilterResult(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "no victim", "probe"),
                                      "node-1", NominatingMode.OVERRIDE)),
])
def test_postfilter_packing(low: int, high: int, nominated: bytes, expected: PostFilterResult,
                            inst: GuestInstance, handle: EmptyHandle) -> None:
    script = with_reason(b"no victim")
    if nominated:
        script.op("nominated_node_name", *script.put(nominated))
    script.returns(low, high).load(inst)
    assert inst.postfilter(POD, {"node-1": 2, "node-2": 3}, handle) == expected
    assert word(inst, LAST_EXPORT) == EXPORT_IDS["postfilter"]


# --- permit -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("code", "timeout"), [
    (Code.SUCCESS, 0), (Code.WAIT, 0xFFFFFFFF), (Code.WAIT, 30_000), (Code.UNSCHEDULABLE, 5),
    (Code.ERROR, 0), (Code.SKIP, 1),
])
def test_permit_packing(code: Code, timeout: int, inst: GuestInstance, handle: EmptyHandle) -> None:
    # permit: HIGH 32 bits status, LOW 32 bits timeout
    with_reason(b"waiting for gang").returns(timeout, code).load(inst)
    res = inst.permit(POD, "node-1", handle)
    reason = "" if code == Code.SUCCESS else "waiting for gang"
    assert res == PermitResult(Status(code, reason, "probe"), timeout)
    assert word(inst, LAST_EXPORT) == EXPORT_IDS["permit"]


def test_permit_is_not_packed_like_score(inst: GuestInstance, handle: EmptyHandle) -> None:
    """A status in the LOW word is a timeout: Success with 4 ms, not Wait."""
    Script().returns(Code.WAIT, 0).load(inst)
    assert inst.permit(POD, "node-1", handle) == PermitResult(Status(Code.SUCCESS, "", "probe"), 4)


# --- normalizescore ---------------------------------------------------------------------------

SCORES = [NodeScore("node-1", 3), NodeScore("node-2", -7), NodeScore("node-3", 12)]


def test_normalizescore_without_a_list_keeps_the_scores(inst: GuestInstance, handle: EmptyHandle) -> None:
    Script().op("nodeScoreList", 0x1000, 256).returns(0).load(inst)
    res = inst.normalizescore(POD, SCORES, handle)
    assert res == NormalizeScoreResult(Status(Code.SUCCESS, "", "probe"), tuple(SCORES))
    assert inst.memory.read(0x1000, 40) == b'{"node-1":3,"node-2":-7,"node-3":12}' + bytes(4)
    assert word(inst, LAST_EXPORT) == EXPORT_IDS["normalizescore"]


def test_normalizescore_with_a_list(inst: GuestInstance, handle: EmptyHandle) -> None:
    script = Script()
    script.op("normalized_score_list", *script.put(b'{"node-3": 100, "node-1": 25, "node-2": 0}'))
    script.returns(0).load(inst)
    res = inst.normalizescore(POD, SCORES, handle)
    assert res == NormalizeScoreResult(Status(Code.SUCCESS, "", "probe"), (
        NodeScore("node-1", 25), NodeScore("node-2", 0), NodeScore("node-3", 100)))


def test_normalizescore_partial_list_keeps_the_others(inst: GuestInstance, handle: EmptyHandle) -> None:
    script = Script()
    script.op("normalized_score_list", *script.put(b'{"node-2": 50, "node-9": 1}')).returns(0).load(inst)
    res = inst.normalizescore(POD, SCORES, handle)
    assert res.scores == (NodeScore("node-1", 3), NodeScore("node-2", 50), NodeScore("node-3", 12))


def test_normalizescore_failure_has_no_scores(inst: GuestInstance, handle: EmptyHandle) -> None:
    script = with_reason(b"bad scores")
    script.op("normalized_score_list", *script.put(b'{"node-1": 1}')).returns(2).load(inst)
    res = inst.normalizescore(POD, SCORES, handle)
    assert res == NormalizeScoreResult(Status(Code.UNSCHEDULABLE, "bad scores", "probe"), ())


# --- enqueue, unreserve, postbind ---------------------------------------------------------------

#: The ABI: a guest that exports no `enqueue`, or returns no events, registers for all
#: events of Pod, Node, CSINode, PersistentVolume, PersistentVolumeClaim and StorageClass.
ABI_DEFAULT_EVENTS = {ClusterEvent(0, 63), ClusterEvent(1, 63), ClusterEvent(7, 63), ClusterEvent(2, 63),
                      ClusterEvent(3, 63), ClusterEvent(6, 63)}


def test_enqueue_with_events(inst: GuestInstance, handle: EmptyHandle) -> None:
    script = Script()
    script.op("cluster_events", *script.put(bytes([1, 0, 0, 0, 8 | 16, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0])))
    script.load(inst)
    events, status = inst.enqueue(handle)
    assert status == Status(Code.SUCCESS, "", "probe")
    assert events == (ClusterEvent(1, 24), ClusterEvent(10, 1))
    assert word(inst, LAST_EXPORT) == EXPORT_IDS["enqueue"]
    assert inst.calls == 1


@pytest.mark.parametrize("given", [None, b""])
def test_enqueue_without_events_gives_the_defaults(given: bytes | None, inst: GuestInstance,
                                                   handle: EmptyHandle) -> None:
    script = Script()
    if given is not None:
        script.op("cluster_events", *script.put(given))
    script.load(inst)
    events, status = inst.enqueue(handle)
    assert status == Status(Code.SUCCESS, "", "probe")
    assert set(events) == ABI_DEFAULT_EVENTS and len(events) == 6
    assert word(inst, LAST_EXPORT) == EXPORT_IDS["enqueue"]


@pytest.mark.parametrize("export", ["unreserve", "postbind"])
def test_void_exports_are_success(export: str, inst: GuestInstance, handle: EmptyHandle) -> None:
    with_reason(b"ignored").returns(2).load(inst)
    assert INPUTS.call(inst, export, handle) == Status(Code.SUCCESS, "", "probe")
    assert word(inst, LAST_EXPORT) == EXPORT_IDS[export]
    assert inst.calls == 1 == word(inst, CALLS)


# --- every export, once -------------------------------------------------------------------------

def test_each_export_runs_its_own_function(inst: GuestInstance, handle: EmptyHandle) -> None:
    Script().op("currentNodeName", 0x1000, 64).load(inst)
    for n, export in enumerate(EXPORT_IDS, start=1):
        replace(INPUTS, node=f"node-{n}").call(inst, export, handle)
        assert word(inst, LAST_EXPORT) == EXPORT_IDS[export], export
        assert inst.calls == n == word(inst, CALLS)


def test_per_node_exports_see_their_node(inst: GuestInstance, handle: EmptyHandle) -> None:
    Script().op("node_digit", STATUS).load(inst)
    for export in ("filter", "reserve", "prebind", "bind", "addpod", "removepod"):
        on_3, on_0 = (status_of(replace(INPUTS, node=node).call(inst, export, handle)) for node in ("node-3", "node-0"))
        assert on_3.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and on_0.code == Code.SUCCESS
    Script().op("node_digit", HIGH).load(inst)
    assert inst.permit(POD, "node-4", handle).status.code == Code.WAIT


# --- exports the guest lacks ----------------------------------------------------------------------

FILTER_ONLY = """
(module
  (memory (export "memory") 1)
  (global $calls (mut i32) (i32.const 0))
  (func (export "filter") (result i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (i32.const 2)))
"""


@pytest.fixture
def filter_only(compiler: GuestCompiler, make_instance: Callable[..., GuestInstance]) -> GuestInstance:
    return make_instance(wat_guest(compiler, "filter-only", FILTER_ONLY))


def test_guest_with_only_filter(filter_only: GuestInstance, handle: EmptyHandle) -> None:
    inst = filter_only
    ok = Status(Code.SUCCESS, "", "filter-only")
    assert inst.exports == frozenset({"filter"})
    assert inst.filter(POD, ["node-1", "node-2"], handle).statuses == (
        ("node-1", Status(Code.UNSCHEDULABLE, "", "filter-only")),
        ("node-2", Status(Code.UNSCHEDULABLE, "", "filter-only")))
    assert inst.calls == 2
    expected: dict[str, Any] = {
        "prefilter": (lambda: inst.prefilter(POD, handle), PreFilterResult(ok, None)),
        "postfilter": (lambda: inst.postfilter(POD, {"node-1": 2}, handle),
                       PostFilterResult(Status(Code.UNSCHEDULABLE, "", "filter-only"))),
        "prescore": (lambda: inst.prescore(POD, ["node-1"], handle), ok),
        "score": (lambda: inst.score(POD, ["node-1", "node-2"], handle),
                  ScoreResult(ok, (NodeScore("node-1", 0), NodeScore("node-2", 0)))),
        "normalizescore": (lambda: inst.normalizescore(POD, SCORES, handle),
                           NormalizeScoreResult(ok, tuple(SCORES))),
        "reserve": (lambda: inst.reserve(POD, "node-1", handle), ok),
        "unreserve": (lambda: inst.unreserve(POD, "node-1", handle), ok),
        "permit": (lambda: inst.permit(POD, "node-1", handle), PermitResult(ok, 0)),
        "prebind": (lambda: inst.prebind(POD, "node-1", handle), ok),
        # a Bind plugin that does not bind this pod skips it, so another binder runs
        "bind": (lambda: inst.bind(POD, "node-1", handle), Status(Code.SKIP, "", "filter-only")),
        "postbind": (lambda: inst.postbind(POD, "node-1", handle), ok),
        "addpod": (lambda: inst.addpod(POD, TARGET, "node-1", handle), ok),
        "removepod": (lambda: inst.removepod(POD, TARGET, "node-1", handle), ok),
    }
    for export, (run, want) in expected.items():
        assert run() == want, export
    events, status = inst.enqueue(handle)
    assert status == ok
    assert set(events) == ABI_DEFAULT_EVENTS
    assert inst.calls == 2  # no guest code ran for the missing exports
    assert not inst.broken
    assert not set(expected) & inst.exports and "filter" in inst.exports
