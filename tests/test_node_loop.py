"""Filter and Score over many nodes in one call into wasm (actors/node_loop.py).

Every outcome must be what the per-node loop in Python gives (the public-API path runs
the same tests): each node's own result and reason, the buffer protocol and the fault
of `currentNodeName`, a trap that keeps the results before it, a deadline per node
(not per batch), single calls outside a batch, and name tables larger than the
driver's first layout or than the bytes it keeps.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterator
from itertools import repeat

import pytest
import wasmtime
from hypothesis import given, settings
from hypothesis import strategies as st

from wasm_scheduler.actors import node_loop
from wasm_scheduler.actors.abi import high_words
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.framework_api import Code, NodeScore, ScoreResult, Status, node_scores
from wasm_scheduler.registry.compiler import CompiledGuest, GuestCompiler
from wasm_scheduler.registry.config import LimitsConfig, PluginConfig
from wasm_scheduler.vocabulary import EmptyHandle

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}

#: Each node's behaviour comes from the first letter of its name: o ok, b refuses (with
#: a reason), w succeeds but sets a stray reason, s spins [0x40] iterations, h hangs,
#: t traps, x asks for its name into a buffer outside memory. Score is the name's length.
NAMED_GUEST = r"""
(module
  (import "k8s.io/scheduler" "currentNodeName" (func $name (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $reason (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0x200) "stray reason")
  (data (i32.const 0x220) "node says no")
  ;; the node name's first letter; its length at 0x44. A 1-byte buffer first: the host
  ;; must answer the size and write nothing.
  (func $first (result i32) (local $n i32)
    (i32.store8 (i32.const 0x100) (i32.const 0x7e))
    (local.set $n (call $name (i32.const 0x100) (i32.const 1)))
    (if (i32.and (i32.gt_u (local.get $n) (i32.const 1))
                 (i32.ne (i32.load8_u (i32.const 0x100)) (i32.const 0x7e)))
      (then unreachable))
    (i32.store (i32.const 0x44) (call $name (i32.const 0x100) (i32.const 64)))
    (i32.load8_u (i32.const 0x100)))
  (func $spin (local $i i32)
    (block $done (loop $again
      (br_if $done (i32.ge_u (local.get $i) (i32.load (i32.const 0x40))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $again))))
  (func $behave (result i32) (local $c i32)
    (local.set $c (call $first))
    (if (i32.eq (local.get $c) (i32.const 0x62))
      (then (call $reason (i32.const 0x220) (i32.const 12)) (return (i32.const 2))))
    (if (i32.eq (local.get $c) (i32.const 0x77)) (then (call $reason (i32.const 0x200) (i32.const 12))))
    (if (i32.eq (local.get $c) (i32.const 0x73)) (then (call $spin)))
    (if (i32.eq (local.get $c) (i32.const 0x68)) (then (loop $forever (br $forever))))
    (if (i32.eq (local.get $c) (i32.const 0x74)) (then unreachable))
    (if (i32.eq (local.get $c) (i32.const 0x78)) (then (drop (call $name (i32.const 0xFFFF) (i32.const 64)))))
    (i32.const 0))
  (func (export "filter") (result i32) (call $behave))
  (func (export "reserve") (result i32) (call $behave))
  (func (export "score") (result i64) (local $status i32)
    (local.set $status (call $behave))
    (if (local.get $status) (then (return (i64.const 1))))
    (i64.shl (i64.extend_i32_u (i32.load (i32.const 0x44))) (i64.const 32))))
"""

#: Filter and Score without `currentNodeName`: the loop without its trampoline.
NAMELESS_GUEST = """
(module
  (memory (export "memory") 1)
  (global $calls (mut i32) (i32.const 0))
  (func (export "filter") (result i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (i32.and (global.get $calls) (i32.const 2)))
  (func (export "score") (result i64) (i64.const 0x700000000)))
"""


@pytest.fixture(params=[True, False], ids=["fast", "public"])
def compiler(request: pytest.FixtureRequest) -> Iterator[GuestCompiler]:
    with GuestCompiler(fast_calls=request.param) as compiler:
        yield compiler


@pytest.fixture
def make(compiler: GuestCompiler) -> Callable[..., GuestInstance]:
    guests: dict[str, CompiledGuest] = {}

    def make(source: str = NAMED_GUEST, timeout_ms: int = 1000) -> GuestInstance:
        guest = guests.get(source) or guests.setdefault(
            source, compiler.compile("named", "named.wat", source.encode()))
        config = PluginConfig("named", "named.wat", limits=LimitsConfig(call_timeout_ms=timeout_ms))
        return GuestInstance(guest, config, "named-1")

    return make


def ok(code: Code = Code.SUCCESS, reason: str = "") -> Status:
    return Status(code, reason, "named")


def test_each_node_gets_its_own_result_and_reason(make: Callable[..., GuestInstance]) -> None:
    inst, handle = make(), EmptyHandle()
    names = ["o-1", "w-2", "o-3", "b-4", "o-5", "b-6", "w-7"]
    assert inst.filter(POD, names, handle).statuses == (
        ("o-1", ok()), ("w-2", ok()), ("o-3", ok()), ("b-4", ok(Code.UNSCHEDULABLE, "node says no")),
        ("o-5", ok()), ("b-6", ok(Code.UNSCHEDULABLE, "node says no")), ("w-7", ok()),
    )
    # A stray reason on a Success node never leaks to the next node that fails.
    assert inst.filter(POD, ["w-1", "b-22"], handle).statuses[1][1] == ok(Code.UNSCHEDULABLE, "node says no")
    assert inst.calls == 9


def test_score_is_per_node_and_stops_at_the_first_failure(make: Callable[..., GuestInstance]) -> None:
    inst, handle = make(), EmptyHandle()
    names = ["o", "o-22", "w-333", "o-4444"]
    result = inst.score(POD, names, handle)
    assert result.status.ok
    assert result.scores == tuple(NodeScore(n, len(n)) for n in names)
    failed = inst.score(POD, ["o-1", "b-2", "o-3"], handle)
    assert failed.status == ok(Code.ERROR, "node b-2: node says no")
    assert inst.calls == 4 + 2  # o-3 never ran


def test_a_trap_keeps_the_results_before_it(make: Callable[..., GuestInstance]) -> None:
    inst, handle = make(), EmptyHandle()
    statuses = dict(inst.filter(POD, ["o-1", "b-2", "t-3", "o-4"], handle).statuses)
    assert statuses["o-1"] == ok()
    assert statuses["b-2"] == ok(Code.UNSCHEDULABLE, "node says no")
    assert statuses["t-3"].code == Code.ERROR and "trap in filter" in statuses["t-3"].reason
    assert statuses["o-4"] == statuses["t-3"]  # did not run: the instance is broken
    assert inst.broken


def test_a_name_buffer_outside_memory_faults_like_any_host_call(make: Callable[..., GuestInstance]) -> None:
    inst, handle = make(), EmptyHandle()
    statuses = dict(inst.filter(POD, ["o-1", "x-2"], handle).statuses)
    assert statuses["o-1"] == ok()
    assert statuses["x-2"].code == Code.ERROR
    assert "currentNodeName: range [65535, 65538) is outside guest memory of 65536 bytes" in statuses["x-2"].reason


def test_single_calls_outside_a_batch_see_their_node(make: Callable[..., GuestInstance]) -> None:
    inst, handle = make(), EmptyHandle()
    assert inst.reserve(POD, "o-1", handle) == ok()
    assert inst.reserve(POD, "b-1", handle) == ok(Code.UNSCHEDULABLE, "node says no")
    assert inst.filter(POD, ["o-1"], handle).statuses == (("o-1", ok()),)
    assert inst.reserve(POD, "b-2", handle).code == Code.UNSCHEDULABLE  # still right after a batch


def _spin_for(inst: GuestInstance, seconds: float) -> None:
    """Set the spin count so that one 's' node takes about `seconds`."""
    count = 200_000
    while True:
        inst.memory.write_u32(0x40, count)
        start = time.perf_counter()
        inst.filter(POD, ["s-0"], EmptyHandle())
        took = time.perf_counter() - start
        if took >= seconds / 4:
            inst.memory.write_u32(0x40, int(count * seconds / took))
            return
        count *= 4


def test_the_deadline_is_per_node_not_per_batch(make: Callable[..., GuestInstance]) -> None:
    inst, handle = make(timeout_ms=300), EmptyHandle()
    _spin_for(inst, 0.03)  # a tenth of the deadline a node
    names = [f"s-{i}" for i in range(50)]  # together, about five times the deadline
    start = time.perf_counter()
    statuses = inst.filter(POD, names, handle).statuses
    elapsed = time.perf_counter() - start
    assert all(status.ok for _name, status in statuses), statuses
    assert elapsed > 0.3, "the batch was meant to outlast one call's deadline"


def test_a_hanging_node_hits_the_deadline_and_the_others_keep_their_results(
    make: Callable[..., GuestInstance],
) -> None:
    inst, handle = make(timeout_ms=50), EmptyHandle()
    statuses = dict(inst.filter(POD, ["o-1", "b-2", "h-3", "o-4"], handle).statuses)
    assert statuses["o-1"] == ok()
    assert statuses["b-2"] == ok(Code.UNSCHEDULABLE, "node says no")
    assert statuses["h-3"].code == Code.ERROR
    assert "deadline exceeded: the call ran longer than 50 ms (limits.callTimeoutMs)" in statuses["h-3"].reason
    assert statuses["o-4"] == statuses["h-3"]


def test_a_guest_without_current_node_name(make: Callable[..., GuestInstance]) -> None:
    inst, handle = make(NAMELESS_GUEST), EmptyHandle()
    codes = [status.code for _n, status in inst.filter(POD, ["a", "b", "c", "d", "e"], handle).statuses]
    assert codes == [Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE, Code.SUCCESS, Code.SUCCESS]
    assert inst.score(POD, ["a", "b"], handle).scores == (NodeScore("a", 7), NodeScore("b", 7))


def test_many_nodes_and_many_distinct_names(make: Callable[..., GuestInstance],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_loop, "NAME_BYTES_LIMIT", 4096)
    inst, handle = make(), EmptyHandle()
    for batch in range(6):
        names = [f"o-{batch}-{'x' * (i % 40)}-{i}" for i in range(300 + 200 * batch)]
        result = inst.score(POD, names, handle)
        assert result.scores == tuple(NodeScore(n, len(n)) for n in names)
    names = [f"o-{i}" for i in range(5000)]
    assert inst.score(POD, names, handle).scores == tuple(NodeScore(n, len(n)) for n in names)
    assert inst.score(POD, [], handle).scores == ()
    assert not inst.broken


def test_without_the_driver_the_instance_loops_in_python(compiler: GuestCompiler,
                                                         make: Callable[..., GuestInstance],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver that cannot be made (a memory it cannot import, say) leaves the instance
    working: the guest's currentNodeName goes straight to the host."""
    def refuse(*_args: object) -> None:
        raise wasmtime.WasmtimeError("incompatible import type for `guest::memory`")

    monkeypatch.setattr(node_loop.NodeLoop, "attach", refuse)
    inst, handle = make(), EmptyHandle()
    assert inst._loop is None
    assert inst.filter(POD, ["o-1", "b-2"], handle).statuses == (
        ("o-1", ok()), ("b-2", ok(Code.UNSCHEDULABLE, "node says no")))
    assert inst.reserve(POD, "b-3", handle).code == Code.UNSCHEDULABLE


# --- the score results, split and paired in C ------------------------------------------------

_I32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(_I32, max_size=300))
def test_high_words_are_each_i64_s_signed_high_half(scores: list[int]) -> None:
    packed = [score << 32 for score in scores]  # a Success score: the low half is 0
    assert list(high_words(packed)) == scores
    assert list(high_words(array("q", packed))) == scores


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), _I32), max_size=300))
def test_node_scores_are_the_named_tuples_the_constructor_makes(pairs: list[tuple[str, int]]) -> None:
    names = [name for name, _ in pairs]
    made = node_scores(names, [score for _, score in pairs])
    assert made == tuple(NodeScore(name, score) for name, score in pairs)
    assert all(type(one) is NodeScore for one in made)
    assert [(one.name, one.score) for one in made] == pairs
    assert node_scores(names, repeat(0)) == tuple(NodeScore(name, 0) for name in names)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), _I32), max_size=300))
def test_a_score_result_of_columns_is_the_one_of_node_scores(pairs: list[tuple[str, int]]) -> None:
    names, scores = [name for name, _ in pairs], array("i", [score for _, score in pairs])
    ok = Status(Code.SUCCESS, "", "p")
    columns = ScoreResult.from_columns(ok, names, scores)
    assert list(columns.pairs()) == pairs and len(columns) == len(pairs)
    assert columns._scores is None  # no NodeScore made for the pairs or the length
    named = ScoreResult(ok, tuple(NodeScore(name, score) for name, score in pairs))
    assert list(named.pairs()) == pairs and len(named) == len(pairs)
    assert columns == named and hash(columns) == hash(named) and repr(columns) == repr(named)
    assert columns.scores is columns.scores  # built once, when first read
    assert all(type(one) is NodeScore for one in columns.scores)


def test_a_score_result_is_immutable_and_its_columns_must_pair_up() -> None:
    result = ScoreResult.from_columns(Status(), ["a", "b"], [1, 2])
    with pytest.raises(AttributeError, match="immutable"):
        result.status = Status(Code.ERROR)  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del result._names
    with pytest.raises(ValueError, match="2 node names for 1 scores"):
        ScoreResult.from_columns(Status(), ["a", "b"], [1])
    assert ScoreResult(Status()) == ScoreResult(Status(), ()) and len(ScoreResult(Status())) == 0
    assert ScoreResult(Status()) != ScoreResult.from_columns(Status(), ["a"], [0])


def test_a_score_result_copies_its_columns_and_pickles_as_node_scores() -> None:
    import copy
    import pickle

    names, scores = ["a", "b"], array("i", [1, 2])
    result = ScoreResult.from_columns(Status(), names, scores)
    names.append("c")
    scores[0] = 99
    assert list(result.pairs()) == [("a", 1), ("b", 2)] and len(result) == 2
    handed = ScoreResult.from_columns(Status(), ["x"], array("i", [5]), copy=False)
    for clone in (pickle.loads(pickle.dumps(result)), copy.copy(result), copy.deepcopy(result)):
        assert clone == result and type(clone) is ScoreResult and clone.scores == result.scores
    assert pickle.loads(pickle.dumps(handed)).scores == (NodeScore("x", 5),)
